"""Input limits of every contract argument, in one place (issue 14, item 8; docs/limits.md).

A contract argument is attacker-controlled text that, once accepted, is stored on every peer and
served to every member for ever. So that no single transaction can make records that other
organisations cannot read back (a value nested 900 levels deep breaks recursive encoders; an 8 MiB
object bloats every replica), every argument passes through here before a contract sees it:

* :func:`check_arguments` -- every argument of every function (the dispatcher calls it): a string
  of at most :data:`MAX_ARGUMENT_BYTES` bytes of UTF-8;
* :func:`parse_json` -- every JSON argument: valid JSON, nested at most :data:`MAX_JSON_DEPTH`
  levels, only finite numbers (``NaN``, ``Infinity`` and overflowing literals such as ``1e999``
  are refused, so what is stored has a canonical encoding);
* :func:`bounded_json` / :func:`bounded_text` -- per-field size limits of free-form values that
  the contracts store (hyper-parameters, topology, failure details, descriptions, ...).

Each violation is an :class:`~chaincode.errors.InvalidArgument` naming the field and the limit.
The gateway's request schemas (``api/schemas.py``) import these numbers, so the two never disagree.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from chaincode.canonical import canonical_json
from chaincode.errors import InvalidArgument
from wire.bounded_json import json_depth

KiB = 1024
MiB = 1024 * KiB

MAX_ARGUMENT_BYTES = 1 * MiB  #: one contract argument, UTF-8 bytes
MAX_JSON_DEPTH = 32  #: containers (objects/arrays) nested in one JSON argument
MAX_FIELD_DEPTH = MAX_JSON_DEPTH - 1  #: a value inside an argument's object (the object is level 1)
MAX_HYPERPARAMETERS_BYTES = 64 * KiB  #: a process's hyper-parameters, canonical JSON bytes
MAX_TOPOLOGY_BYTES = 16 * KiB  #: a process's topology object, canonical JSON bytes
MAX_FAILURE_DETAILS_BYTES = 16 * KiB  #: the details of a failed task, canonical JSON bytes
MAX_ESTIMATORS_BYTES = 512 * KiB  #: a model's estimator list, canonical JSON bytes
MAX_DESCRIPTION_CHARS = 2048  #: description of an image or a process
MAX_REFERENCE_CHARS = 512  #: an image's reference / a model's location
MAX_DATASET_CHARS = 256  #: a process's dataset name
MAX_REASON_CHARS = 2048  #: reason of a failed task
MAX_STATUS_REASON_CHARS = 1024  #: reason of a process's failure or abort
MAX_REVOCATION_REASON_CHARS = 512  #: reason of an image's revocation
MAX_CONSORTIUM = 64  #: organisations in one learning process
#: rounds x members of one learning process: each (round, member) record key is written as a placeholder
#: with the members' policy when the process is created (chaincode.endorsement.protect_process), in that
#: one transaction, which Fabric's orderer takes up to 10 MB (AbsoluteMaxBytes); the policy names every
#: member, so rounds x members^2 is bounded too (about 20 bytes each): at most about 4 MB in all
MAX_PROCESS_TASKS = 10_000
MAX_PROCESS_POLICY_ENTRIES = 160_000
MAX_APPROVAL_DATASETS = 64  #: dataset names one image approval may list
MAX_ENDPOINT_CHARS = 256  #: an organisation's published endpoint (https://host:port)
# the consortium's cap on a process's rigorous privacy budget (chaincode.privacy.parse_budget; docs/ledger.md
# "Privacy budgets"): part of the chaincode definition, so changing it is a chaincode upgrade, which the
# channel's lifecycle policy makes a decision of a majority of the organisations
PRIVACY_CAP_EPSILON = 10.0  #: the largest ε a process's privacy budget may declare
PRIVACY_CAP_DELTA = 1e-5  #: the largest δ a process's privacy budget may declare


def process_size_problem(rounds: int, members: int) -> str | None:
    """Why a process of ``rounds`` rounds and ``members`` members is too large to create (None: it is not)."""
    if rounds * members <= MAX_PROCESS_TASKS and rounds * members * members <= MAX_PROCESS_POLICY_ENTRIES:
        return None
    return (
        f"a process of {rounds} rounds and {members} members is too large to create: rounds x members must be "
        f"at most {MAX_PROCESS_TASKS} and rounds x members^2 at most {MAX_PROCESS_POLICY_ENTRIES} (each "
        f"task's record key is created with the members' policy)"
    )


def check_arguments(function: str, args: list[Any]) -> None:
    """Every argument of ``function`` is a string of at most :data:`MAX_ARGUMENT_BYTES` UTF-8 bytes."""
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            raise InvalidArgument(f"{function}: argument {i + 1} is not a string")
        # a character is at most 4 bytes of UTF-8: only long strings need encoding to be measured
        if len(arg) * 4 > MAX_ARGUMENT_BYTES:
            try:
                size = len(arg.encode("utf-8"))
            except UnicodeEncodeError:
                raise InvalidArgument(f"{function}: argument {i + 1} is not valid UTF-8 text") from None
            if size > MAX_ARGUMENT_BYTES:
                raise InvalidArgument(
                    f"{function}: argument {i + 1} is {size} bytes, over the limit of "
                    f"{MAX_ARGUMENT_BYTES} bytes per contract argument",
                    limit=MAX_ARGUMENT_BYTES,
                    size=size,
                )


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:32]} overflows a finite number")
    return value


def check_depth(value: Any, what: str, limit: int = MAX_JSON_DEPTH) -> None:
    depth = json_depth(value)
    if depth > limit:
        raise InvalidArgument(
            f"{what} is nested {depth} levels deep, over the limit of {limit}", limit=limit, depth=depth
        )


def parse_json(text: str, what: str) -> Any:
    """Decode a JSON argument: valid JSON, finite numbers only, at most :data:`MAX_JSON_DEPTH` deep."""
    if not isinstance(text, str):
        raise InvalidArgument(f"{what} must be JSON text")
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise InvalidArgument(
            f"{what} is nested deeper than the limit of {MAX_JSON_DEPTH} levels", limit=MAX_JSON_DEPTH
        ) from None
    except ValueError as exc:
        if "finite number" in str(exc):
            raise InvalidArgument(
                f"{what} holds a number that is not finite ({exc}); only finite numbers are accepted"
            ) from None
        raise InvalidArgument(f"{what} is not valid JSON") from None
    except TypeError:
        raise InvalidArgument(f"{what} is not valid JSON") from None
    check_depth(value, what)
    return value


def bounded_json(value: Any, what: str, max_bytes: int) -> Any:
    """``value`` as stored must be at most ``max_bytes`` bytes of canonical JSON."""
    size = len(canonical_json(value))
    if size > max_bytes:
        raise InvalidArgument(
            f"{what} is {size} bytes of canonical JSON, over the limit of {max_bytes} bytes",
            limit=max_bytes,
            size=size,
        )
    return value


def bounded_text(value: Any, what: str, max_chars: int) -> str:
    """An optional free-text field: absent/null is ``""``; otherwise a string of at most ``max_chars``."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string")
    if len(value) > max_chars:
        raise InvalidArgument(
            f"{what} is {len(value)} characters long, over the limit of {max_chars}",
            limit=max_chars,
            size=len(value),
        )
    return value


# ---- history pages (every contract's ``history`` function; docs/ledger.md "History reads")
DEFAULT_HISTORY_PAGE = 100  #: versions in a history page when a bookmark is given without a limit
MAX_HISTORY_PAGE = 1000  #: versions in one history page
MAX_BOOKMARK_CHARS = 128  #: a history bookmark (the transaction id of the last version seen)
BOOKMARK_PATTERN = r"[0-9A-Za-z_.:-]+"  #: characters of a bookmark (Fabric's transaction ids are hex)


def history_page_request(limit: str, after: str) -> tuple[int, str | None] | None:
    """The page a ``history`` call asks for: ``None`` when both arguments are empty (the whole
    history, as before paging existed), else ``(limit, after)``: ``limit`` a decimal integer from 1
    to :data:`MAX_HISTORY_PAGE` (empty: :data:`DEFAULT_HISTORY_PAGE`), ``after`` empty (the newest
    page) or the bookmark a previous page returned."""
    if limit == "" and after == "":
        return None
    size = DEFAULT_HISTORY_PAGE
    if limit != "":
        valid = limit.isascii() and limit.isdigit() and len(limit) <= 6
        if not valid or not 1 <= int(limit) <= MAX_HISTORY_PAGE:
            raise InvalidArgument(
                f"history page limit {limit[:32]!r} must be an integer from 1 to {MAX_HISTORY_PAGE}",
                limit=MAX_HISTORY_PAGE,
            )
        size = int(limit)
    if after == "":
        return size, None
    if len(after) > MAX_BOOKMARK_CHARS or not re.fullmatch(BOOKMARK_PATTERN, after):
        raise InvalidArgument(
            f"history bookmark must be at most {MAX_BOOKMARK_CHARS} characters of {BOOKMARK_PATTERN}"
        )
    return size, after
