"""The contracts' input rules a client validates against before submitting (re-exported from
``chaincode``, which defines and enforces them), so that ``api``, ``executor`` and ``home`` never
import ``chaincode`` directly: size limits and history page bounds (``chaincode.limits``), identifier
patterns and bounds, the consortium's cap on a privacy budget, the form of a membership endpoint (``chaincode.membership.check_endpoint``),
and the state key a contract stores a record under (:func:`record_key`, which an audit proof checks a
block's write against)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chaincode.image import IMAGE
from chaincode.learning_process import EXECUTION, MAX_ROUNDS, PROCESS, round_key
from chaincode.limits import (
    BOOKMARK_PATTERN,
    DEFAULT_HISTORY_PAGE,
    MAX_ARGUMENT_BYTES,
    MAX_BOOKMARK_CHARS,
    MAX_CONSORTIUM,
    MAX_DATASET_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_FIELD_DEPTH,
    MAX_HISTORY_PAGE,
    MAX_HYPERPARAMETERS_BYTES,
    MAX_REFERENCE_CHARS,
    MAX_TOPOLOGY_BYTES,
    PRIVACY_CAP_DELTA,
    PRIVACY_CAP_EPSILON,
    process_size_problem,
)
from chaincode.membership import check_endpoint
from chaincode.records import ID_PATTERN, MODEL, MSP_PATTERN
from chaincode.stub import create_composite_key
from wire.bounded_json import json_depth

__all__ = [
    "BOOKMARK_PATTERN",
    "DEFAULT_HISTORY_PAGE",
    "ID_PATTERN",
    "MAX_ARGUMENT_BYTES",
    "MAX_BOOKMARK_CHARS",
    "MAX_CONSORTIUM",
    "MAX_DATASET_CHARS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_FIELD_DEPTH",
    "MAX_HISTORY_PAGE",
    "MAX_HYPERPARAMETERS_BYTES",
    "MAX_REFERENCE_CHARS",
    "MAX_ROUNDS",
    "PRIVACY_CAP_DELTA",
    "PRIVACY_CAP_EPSILON",
    "MAX_TOPOLOGY_BYTES",
    "MSP_PATTERN",
    "check_endpoint",
    "json_depth",
    "process_size_problem",
    "record_key",
]


def record_key(kind: str, record: Mapping[str, Any]) -> str:
    """The state key under which its contract stores a record of ``kind`` (``image``, ``process``,
    ``model``, ``execution``); ValueError for another kind or a malformed record."""
    if kind in ("image", "process", "model"):
        prefix = {"image": IMAGE, "process": PROCESS, "model": MODEL}[kind]
        return create_composite_key(prefix, [str(record["id"])])
    if kind == "execution":
        rnd = record["round"]
        if not isinstance(rnd, int) or isinstance(rnd, bool) or rnd < 0:
            raise ValueError("an execution record's round is not a non-negative integer")
        return create_composite_key(
            EXECUTION, [str(record["process_id"]), round_key(rnd), str(record["organisation"])]
        )
    raise ValueError(f"no record kind {kind!r}")
