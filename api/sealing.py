"""Opening a model's data key: the copy sealed on the ledger for one organisation (docs/models.md).

The owner seals the model's data key to each organisation on the access list
(:func:`ledger.envelope.seal`, ``info`` = the model's key label); an organisation opens its own copy
with its key-agreement private key. The gateway (model download, revocation with key rotation) and
the CLI (``model grant``) both open it here.
"""

from __future__ import annotations

import base64
from typing import Any

from ledger.envelope import DecryptionError, unseal
from ledger.errors import Forbidden


def open_data_key(consortium: Any, msp_id: str, record: dict[str, Any], info: bytes) -> bytes:
    """The data key of model ``record`` as sealed for ``msp_id`` with label ``info``;
    :class:`Forbidden` when ``msp_id`` holds no sealed key or its key does not open."""
    if not record.get("wrapped_key"):
        raise Forbidden(f"{msp_id} holds no sealed key for model {record['id']}")
    try:
        return unseal(consortium.encryption_key(msp_id), base64.b64decode(record["wrapped_key"]), info)
    except DecryptionError as exc:
        raise Forbidden(
            f"the data key of model {record['id']} sealed for {msp_id} does not open: {exc}"
        ) from None
