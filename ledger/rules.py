"""The contracts' input rules a client validates against before submitting (re-exported from
``chaincode``, which defines and enforces them), so that ``api``, ``executor`` and ``home`` never
import ``chaincode`` directly: size limits and history page bounds (``chaincode.limits``), identifier
patterns and bounds, the consortium's cap on a privacy budget, and the form of a membership endpoint (``chaincode.membership.check_endpoint``)."""

from __future__ import annotations

from chaincode.learning_process import MAX_ROUNDS
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
from chaincode.records import ID_PATTERN, MSP_PATTERN
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
]
