"""The channel configuration in an embedded ledger's genesis block, checked against a consortium.

The genesis block names the channel's organisations with their CA certificates and the orderer's
CA. Whoever writes a ledger file writes its genesis block, so a file's own genesis block proves
nothing: a ledger written end to end under other CAs that reuse the consortium's MSP ids would
verify against itself. Only the consortium's certificates, read from its crypto directory, are
trusted -- and the genesis block must name exactly those, byte for byte (DER).
"""

from __future__ import annotations

from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from ledger.identity import Consortium


def _der(pem: Any) -> bytes | None:
    try:
        return x509.load_pem_x509_certificate(pem.encode() if isinstance(pem, str) else pem).public_bytes(
            Encoding.DER
        )
    except (ValueError, TypeError, AttributeError):
        return None


def config_mismatch(config: Any, consortium: Consortium) -> str | None:
    """Why the genesis ``config`` is not this consortium's channel (None if it is)."""
    if (
        not isinstance(config, dict)
        or not isinstance(config.get("organisations"), dict)
        or not isinstance(config.get("orderer"), dict)
    ):
        return "the genesis block carries no channel configuration"
    mine = {o.msp_id for o in consortium.organisations}
    if set(config["organisations"]) != mine:
        return (
            f"the channel's organisations are {sorted(config['organisations'])}, not this consortium's "
            f"{sorted(mine)}"
        )
    for msp in sorted(mine):
        if _der(config["organisations"][msp]) != consortium.ca_certificate(msp).public_bytes(Encoding.DER):
            return f"the CA certificate of {msp} in the genesis block is not the consortium's {msp} CA"
    orderer_ca = consortium.membership().ca_certificates["OrdererMSP"].public_bytes(Encoding.DER)
    if config["orderer"].get("msp_id") != "OrdererMSP" or _der(config["orderer"].get("ca")) != orderer_ca:
        return "the orderer CA certificate in the genesis block is not the consortium's orderer CA"
    return None
