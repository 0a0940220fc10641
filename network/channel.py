"""A channel made from the members' public packages only (``consortia network channel create``;
docs/fabric.md "Channel creation from packages").

There is no orderer organisation: every member is an application organisation and an orderer
organisation at once (the same MSP in both groups, its peer as anchor peer, its orderer among
``OrdererEndpoints``) and runs one orderer node. Consensus is SmartBFT (Fabric 3 ``BFT``; channel
capability ``V3_0``) by default from four members on (``f = 1`` at 4: 3f + 1 nodes tolerate f
faulty ones), etcdraft below that or when asked (``raft``). The consenters come from the packages:
BFT's ``ConsenterMapping`` names each member's orderer by its address, MSP id, signing certificate
(``Identity``) and TLS certificate (client and server); etcdraft's ``Consenters`` by address and TLS
certificate.

Policies: each organisation's Readers (admin|peer|client|orderer), Writers (admin|client|orderer),
Admins (admin) and Endorsement (peer); the channel's ``Admins`` (and the Application's and the
Orderer's) ``MAJORITY Admins``: a configuration update needs the admins of a majority of the members
(3 of 4). ``LifecycleEndorsement`` is ``MAJORITY Endorsement`` (a chaincode definition is committed
once a majority approved it). Readers, Writers and Endorsement of the Application and the channel are
explicit signature policies over every member (:func:`network.files.channel_policies`, why in
docs/fabric.md "Policies"). The BFT block-validation policy is the one Fabric computes from the
consenters (2f + 1 of their signatures).

:func:`inspect_block` decodes a block with ``configtxlator`` and :func:`check_block` compares it with
the packages a member was given: before it joins, a member checks that the genesis block holds
exactly the members it expects, with the certificates of their packages."""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from fabric_protos.common import common_pb2

from ledger.fabric.proposal import block_header_bytes
from ledger.identity import parse_serialized_identity, verify
from network.config import DEFAULT_HOME, NetworkError
from network.files import channel_policies, configtx_organisation, configtx_profile
from network.package import OrganisationPackage
from network.processes import ensure_fabric

CONSENSUS = ("bft", "raft")
#: SmartBFT's options (Fabric's sampleconfig values, with shorter complaint and heartbeat timeouts so
#: that a crashed leader is replaced in seconds rather than a minute; RequestBatchMaxInterval follows
#: the batch timeout)
SMARTBFT = {
    "RequestBatchMaxCount": 500,
    "RequestBatchMaxBytes": 10485760,
    "RequestForwardTimeout": "2s",
    "RequestComplainTimeout": "10s",
    "RequestAutoRemoveTimeout": "3m0s",
    "ViewChangeResendInterval": "5s",
    "ViewChangeTimeout": "20s",
    "LeaderHeartbeatTimeout": "20s",
    "CollectTimeout": "1s",
    "IncomingMessageBufferSize": 200,
    "RequestPoolSize": 100000,
    "LeaderHeartbeatCount": 10,
}


class ChannelError(NetworkError):
    """A channel that cannot be made from these packages, or a block that is not what a member expects."""


def default_consensus(members: int) -> str:
    """``bft`` from four members on (f = 1), ``raft`` below."""
    return "bft" if members >= 4 else "raft"


@dataclass(frozen=True)
class ChannelMember:
    """One member as a channel configuration holds it."""

    msp_id: str
    root_certs: tuple[str, ...]
    tls_root_certs: tuple[str, ...]
    orderer_endpoints: tuple[str, ...]
    anchor_peers: tuple[str, ...]


@dataclass(frozen=True)
class ChannelConfig:
    """What :func:`inspect_block` reads from a configuration block."""

    channel: str
    number: int
    consensus: str  # "bft" or "raft"
    members: dict[str, ChannelMember]
    # every consenter: address, MSP id (BFT), signing identity (BFT), TLS certificates
    consenters: list[dict[str, str]] = field(default_factory=list)
    policies: dict[str, str] = field(default_factory=dict)  # "Channel/Admins" -> "MAJORITY Admins"
    capabilities: dict[str, list[str]] = field(default_factory=dict)
    orderer_organisations: tuple[str, ...] = ()
    application_organisations: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "block": self.number,
            "consensus": self.consensus,
            "members": sorted(self.members),
            "orderer_organisations": list(self.orderer_organisations),
            "application_organisations": list(self.application_organisations),
            "consenters": [{k: v for k, v in c.items() if "cert" not in k} for c in self.consenters],
            "policies": self.policies,
            "capabilities": self.capabilities,
        }


def configtx_yaml(
    packages: list[OrganisationPackage],
    work: Path,
    consensus: str,
    batch_timeout: str = "50ms",
    max_message_count: int = 500,
) -> str:
    """``configtx.yaml`` for the channel of ``packages``; the certificates it names are written
    under ``work`` (one MSP folder and one consenter folder per member)."""
    if consensus not in CONSENSUS:
        raise ChannelError(f"consensus {consensus!r}: choose one of {', '.join(CONSENSUS)}")
    orgs, consenters = [], []
    for cid, p in enumerate(packages, start=1):
        msp = work / p.msp_id / "msp"
        (msp / "cacerts").mkdir(parents=True)
        (msp / "tlscacerts").mkdir()
        (msp / "cacerts" / f"ca.{p.domain}-cert.pem").write_text(p.ca_cert)
        (msp / "tlscacerts" / f"tlsca.{p.domain}-cert.pem").write_text(p.tlsca_cert)
        (msp / "config.yaml").write_text(p.node_ous)
        node = work / p.msp_id / "orderer"
        node.mkdir()
        (node / "tls.crt").write_text(p.certificates["orderer_tls"])
        (node / "identity.pem").write_text(p.certificates["orderer"])
        peer_host, _, peer_port = p.endpoints["peer"].rpartition(":")
        orgs.append(
            configtx_organisation(p.msp_id, p.msp_id, msp, (peer_host, peer_port), p.endpoints["orderer"])
        )
        host, _, port = p.endpoints["orderer"].rpartition(":")
        tls = node / "tls.crt"
        if consensus == "bft":
            consenters.append(
                f"      - {{ID: {cid}, Host: {host}, Port: {port}, MSPID: {p.msp_id}, "
                f"ClientTLSCert: {tls}, ServerTLSCert: {tls}, Identity: {node / 'identity.pem'}}}\n"
            )
        else:
            consenters.append(
                f"      - {{Host: {host}, Port: {port}, ClientTLSCert: {tls}, ServerTLSCert: {tls}}}\n"
            )
    msps = [p.msp_id for p in packages]
    refs = ", ".join(f"*{m}" for m in msps)
    readers, writers, _ = channel_policies([p.organisation for p in packages])
    orderers = [f"'{m}.orderer'" for m in msps]
    if consensus == "bft":
        options = "".join(
            f"    {k}: {v}\n" for k, v in {**SMARTBFT, "RequestBatchMaxInterval": batch_timeout}.items()
        )
        ordering = f"  OrdererType: BFT\n  ConsenterMapping:\n{''.join(consenters)}  SmartBFT:\n{options}"
    else:
        ordering = f"  OrdererType: etcdraft\n  EtcdRaft:\n    Consenters:\n{''.join(consenters)}"
    profile = configtx_profile(
        [p.organisation for p in packages],
        channel_readers=readers[:-1] + ", " + ", ".join(orderers) + ")",
        channel_writers=writers[:-1] + ", " + ", ".join(orderers) + ")",
        ordering=ordering,
        batch_timeout=batch_timeout,
        max_message_count=max_message_count,
        orderer_refs=refs,
        application_refs=refs,
    )
    return f"""# generated by consortia network channel create, from the members' public packages only
Organizations:
{"".join(orgs)}
{profile}"""


def create_channel(
    packages: list[OrganisationPackage],
    out: Path,
    channel: str = "consortia",
    consensus: str | None = None,
    batch_timeout: str = "50ms",
    fabric_home: Path | None = None,
) -> ChannelConfig:
    """The genesis block of ``channel`` among the members of ``packages`` (read and checked by
    :func:`network.package.read_packages`), written to ``out``; what it holds. Nothing but the
    packages is read; the configtx.yaml and the certificate files it names live in a temporary
    folder that is removed."""
    if len(packages) < 1:
        raise ChannelError("a channel needs the package of at least one member")
    msps = [p.msp_id for p in packages]
    if len(set(msps)) != len(msps):
        raise ChannelError(f"two packages of one member: {msps}")
    orderers = [p.endpoints["orderer"] for p in packages]
    if len(set(orderers)) != len(orderers):
        raise ChannelError(f"two members name the same orderer address: {orderers}")
    consensus = consensus or default_consensus(len(packages))
    if consensus == "bft" and len(packages) < 4:
        raise ChannelError(
            f"BFT ordering among {len(packages)} members tolerates no faulty orderer (it needs 3f + 1 "
            f"nodes: 4 for f = 1): use --consensus raft, or four members or more"
        )
    home = Path(fabric_home or DEFAULT_HOME)
    ensure_fabric(home, ("core", "tools"))
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="channel-") as tmp:
        work = Path(tmp)
        (work / "configtx.yaml").write_text(configtx_yaml(packages, work, consensus, batch_timeout))
        partial = out.with_name(out.name + ".tmp")
        _tool(
            [
                str(home / "bin" / "configtxgen"),
                *("-profile", "ConsortiaChannel", "-channelID", channel, "-outputBlock", str(partial)),
            ],
            {"FABRIC_CFG_PATH": str(work)},
            "configtxgen",
        )
        partial.replace(out)
    config = inspect_block(out, home)
    check_block(config, packages)
    return config


def _tool(argv: list[str], env: dict[str, str], step: str) -> str:
    try:
        r = subprocess.run(
            argv, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        raise ChannelError(f"{step} did not finish within 120 s") from None
    if r.returncode != 0:
        raise ChannelError(f"{step} failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}")
    return r.stdout


def _pem(b64: str) -> str:
    return base64.b64decode(b64).decode()


def _policy(p: dict[str, Any]) -> str:
    pol = p.get("policy", {})
    value = pol.get("value", {})
    if pol.get("type") == 3:  # IMPLICIT_META
        return f"{value.get('rule')} {value.get('sub_policy')}"
    return "Signature"


def inspect_block(block: Path, fabric_home: Path | None = None) -> ChannelConfig:
    """The channel configuration held by the configuration block ``block`` (``configtxlator
    proto_decode``)."""
    home = Path(fabric_home or DEFAULT_HOME)
    ensure_fabric(home, ("tools",))
    if not Path(block).is_file():
        raise ChannelError(f"no block at {block}")
    decoded = _tool(
        [
            str(home / "bin" / "configtxlator"),
            "proto_decode",
            "--type",
            "common.Block",
            "--input",
            str(block),
        ],
        {},
        "configtxlator proto_decode",
    )
    try:
        blk = json.loads(decoded)
        env = blk["data"]["data"][0]["payload"]
        channel = env["header"]["channel_header"]["channel_id"]
        group = env["data"]["config"]["channel_group"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ChannelError(f"{block} is not a configuration block: {exc}") from None
    orderer, application = group["groups"]["Orderer"], group["groups"]["Application"]
    ctype = orderer["values"]["ConsensusType"]["value"]
    kind = {"BFT": "bft", "etcdraft": "raft"}.get(ctype["type"], ctype["type"])
    consenters: list[dict[str, str]] = []
    if kind == "bft":
        for c in orderer["values"]["Orderers"]["value"]["consenter_mapping"]:
            consenters.append(
                {
                    "id": str(c["id"]),
                    "address": f"{c['host']}:{c['port']}",
                    "msp_id": c["msp_id"],
                    "identity_cert": _pem(c["identity"]),
                    "client_tls_cert": _pem(c["client_tls_cert"]),
                    "server_tls_cert": _pem(c["server_tls_cert"]),
                }
            )
    elif kind == "raft":
        for c in ctype["metadata"]["consenters"]:
            consenters.append(
                {
                    "address": f"{c['host']}:{c['port']}",
                    "client_tls_cert": _pem(c["client_tls_cert"]),
                    "server_tls_cert": _pem(c["server_tls_cert"]),
                }
            )
    members: dict[str, ChannelMember] = {}
    for name, g in application["groups"].items():
        cfg = g["values"]["MSP"]["value"]["config"]
        og = orderer["groups"].get(name, {})
        anchors = g["values"].get("AnchorPeers", {}).get("value", {}).get("anchor_peers", [])
        members[cfg["name"]] = ChannelMember(
            msp_id=cfg["name"],
            root_certs=tuple(_pem(c) for c in cfg.get("root_certs") or []),
            tls_root_certs=tuple(_pem(c) for c in cfg.get("tls_root_certs") or []),
            orderer_endpoints=tuple(
                og.get("values", {}).get("Endpoints", {}).get("value", {}).get("addresses", [])
            ),
            anchor_peers=tuple(f"{a['host']}:{a['port']}" for a in anchors),
        )
    policies = {f"Channel/{k}": _policy(v) for k, v in group["policies"].items()}
    for section, g in (("Application", application), ("Orderer", orderer)):
        policies.update({f"Channel/{section}/{k}": _policy(v) for k, v in g["policies"].items()})
    capabilities = {
        section: sorted(g["values"]["Capabilities"]["value"]["capabilities"])
        for section, g in (("Channel", group), ("Orderer", orderer), ("Application", application))
    }
    return ChannelConfig(
        channel=channel,
        number=int(blk["header"].get("number", 0)),
        consensus=kind,
        members=members,
        consenters=consenters,
        policies=policies,
        capabilities=capabilities,
        orderer_organisations=tuple(sorted(orderer["groups"])),
        application_organisations=tuple(sorted(application["groups"])),
    )


def check_block(config: ChannelConfig, packages: list[OrganisationPackage]) -> None:
    """Refuse (:class:`ChannelError`, naming every difference) a channel configuration that does not
    hold exactly the members of ``packages`` -- each an application and an orderer organisation, with
    its package's CA and TLS CA, its orderer endpoint, and its orderer as a consenter with the
    package's certificates -- with ``MAJORITY Admins`` at the channel level."""
    problems: list[str] = []
    want = {p.msp_id: p for p in packages}
    if set(config.members) != set(want):
        problems.append(f"members {sorted(config.members)}, expected {sorted(want)}")
    for side, orgs in (
        ("orderer", config.orderer_organisations),
        ("application", config.application_organisations),
    ):
        if set(orgs) != set(want):
            problems.append(f"{side} organisations {sorted(orgs)}, expected {sorted(want)}")
    for msp, p in want.items():
        m = config.members.get(msp)
        if m is None:
            continue
        if m.root_certs != (p.ca_cert,):
            problems.append(f"{msp}'s CA is not its package's")
        if m.tls_root_certs != (p.tlsca_cert,):
            problems.append(f"{msp}'s TLS CA is not its package's")
        if m.orderer_endpoints != (p.endpoints["orderer"],):
            problems.append(
                f"{msp}'s orderer endpoints {list(m.orderer_endpoints)}, expected {p.endpoints['orderer']}"
            )
        mine = [c for c in config.consenters if c["address"] == p.endpoints["orderer"]]
        if len(mine) != 1:
            problems.append(f"{msp}'s orderer {p.endpoints['orderer']} is not one consenter")
            continue
        c = mine[0]
        if (
            c["client_tls_cert"] != p.certificates["orderer_tls"]
            or c["server_tls_cert"] != p.certificates["orderer_tls"]
        ):
            problems.append(f"{msp}'s consenter TLS certificate is not its package's")
        if config.consensus == "bft" and (
            c["msp_id"] != msp or c["identity_cert"] != p.certificates["orderer"]
        ):
            problems.append(f"{msp}'s consenter identity is not its package's orderer")
    if len(config.consenters) != len(want):
        problems.append(f"{len(config.consenters)} consenters for {len(want)} members")
    if config.policies.get("Channel/Admins") != "MAJORITY Admins":
        problems.append(f"Channel/Admins is {config.policies.get('Channel/Admins')}, not MAJORITY Admins")
    if problems:
        raise ChannelError(
            f"block of channel {config.channel} does not match the packages: " + "; ".join(problems)
        )


def block_signers(block: Path, config: ChannelConfig) -> list[str]:
    """The MSP ids of the BFT consenters whose signature on ``block`` verifies (Fabric's
    ``BlockSignatureVerifier``: each signs SHA-256 of the signatures metadata's value, its identifier
    header and the block header's DER bytes, and is known by its consenter id); a block of an
    etcdraft channel is signed by the one orderer that cut it, under a signature header naming it."""
    blk = common_pb2.Block.FromString(Path(block).read_bytes())
    md = common_pb2.Metadata.FromString(blk.metadata.metadata[common_pb2.BlockMetadataIndex.SIGNATURES])
    h = blk.header
    header = block_header_bytes(h.number, h.previous_hash, h.data_hash)
    by_id = {c["id"]: c for c in config.consenters if "id" in c}
    signers: list[str] = []
    for sig in md.signatures:
        if sig.identifier_header:
            ident = str(common_pb2.IdentifierHeader.FromString(sig.identifier_header).identifier)
            consenter = by_id.get(ident)
            if consenter is None:
                continue
            msp_id, pem, signed = (
                consenter["msp_id"],
                consenter["identity_cert"].encode(),
                sig.identifier_header,
            )
        else:
            try:
                msp_id, pem = parse_serialized_identity(
                    common_pb2.SignatureHeader.FromString(sig.signature_header).creator
                )
            except ValueError:
                continue
            signed = sig.signature_header
        key = x509.load_pem_x509_certificate(pem).public_key()
        if isinstance(key, ec.EllipticCurvePublicKey) and verify(
            key, md.value + signed + header, sig.signature
        ):
            signers.append(msp_id)
    return signers
