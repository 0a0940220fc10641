"""The chaincode entry point shared by both ledger hosts.

``invoke(stub, "Contract:function", args)`` runs one contract method and returns its result (a record
of :mod:`chaincode.records`, a list of them, or plain JSON) as canonical JSON bytes, or raises a :class:`ContractError` (whose ``to_wire()`` JSON the Fabric
chaincode service returns as the error message, so clients rebuild the typed error).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from chaincode.canonical import RawJSON, canonical_json
from chaincode.context import TransactionContext
from chaincode.disclosure import DisclosureContract
from chaincode.errors import ContractError, InternalError, InvalidArgument, NotFound
from chaincode.execution_record import ExecutionRecordContract
from chaincode.image import ImageContract
from chaincode.learning_process import LearningProcessContract
from chaincode.limits import check_arguments
from chaincode.membership import MembershipContract
from chaincode.model import ModelContract
from chaincode.records import Record, json_value
from chaincode.stub import ChaincodeStub

log = logging.getLogger(__name__)

CONTRACTS = (
    ImageContract(),
    LearningProcessContract(),
    ExecutionRecordContract(),
    ModelContract(),
    MembershipContract(),
    DisclosureContract(),
)


def _functions() -> dict[str, tuple[Callable[..., Any], int, int]]:
    table: dict[str, tuple[Callable[..., Any], int, int]] = {}
    for contract in CONTRACTS:
        for name, fn in inspect.getmembers(contract, inspect.ismethod):
            if name.startswith("_"):
                continue
            params = list(inspect.signature(fn).parameters.values())[1:]  # drop ctx
            required = sum(1 for p in params if p.default is inspect.Parameter.empty)
            table[f"{contract.name}:{name}"] = (fn, required, len(params))
    return table


FUNCTIONS = _functions()


def invoke(stub: ChaincodeStub, function: str, args: list[str]) -> bytes:
    entry = FUNCTIONS.get(function)
    if entry is None:
        raise NotFound(f"no chaincode function {function!r}; known: {sorted(FUNCTIONS)}")
    fn, required, total = entry
    if not required <= len(args) <= total:
        raise InvalidArgument(f"{function} takes {required}..{total} arguments, got {len(args)}")
    check_arguments(function, args)
    ctx = TransactionContext(stub)
    try:
        result = fn(ctx, *args)
        if isinstance(result, RawJSON):
            return bytes(result)
        if isinstance(result, Record):
            return ctx.stored_json(result) or result.canonical()
        return canonical_json(json_value(result))
    except ContractError:
        raise
    except Exception as exc:  # a bug must not look like a rule; report without payloads
        log.exception("internal error in %s", function)
        raise InternalError(f"internal error in {function}: {type(exc).__name__}") from None
