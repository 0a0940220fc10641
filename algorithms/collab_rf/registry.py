"""Registries: where neighbours' SHAREs wait for the receiver's GET (seed 003 §III-B; docs/collab_rf.md).

* ``paper`` (seed 003 §III-B): one slot R_j(v_i) per sender, overwritten by each SHARE of v_i;
  GET reads every slot and does not clear (duplicates are dropped by ADD). Holds at most
  n_share·(N−1) estimators.
* ``code`` (authors' repo): one inbox per receiver; a write merges by estimator id
  (``{**inbox, **message}``); a read returns the inbox and clears it.

A registry is a payload: {"semantics": str, "slots": {sender: [estimators]}}; under ``code``
the single inbox is kept in the slot ``""`` in first-write order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from algorithms.collab_rf.estimators import estimator_id

SEMANTICS = ("paper", "code")
_INBOX = ""


def new_registry(semantics: str = "paper") -> dict:
    if semantics not in SEMANTICS:
        raise ValueError(f"unknown registry semantics {semantics!r}; expected one of {SEMANTICS}")
    return {"semantics": semantics, "slots": {}}


def write(registry: Mapping[str, Any], sender: str, estimators: Sequence[Mapping[str, Any]]) -> dict:
    """SHARE from ``sender`` lands in ``registry``; returns the new registry."""
    if not sender:
        raise ValueError("sender must be a non-empty organisation id")
    slots = {k: list(v) for k, v in registry["slots"].items()}
    if registry["semantics"] == "paper":
        slots[sender] = list(estimators)  # overwrite the sender's slot
    else:
        inbox = slots.get(_INBOX, [])
        pos = {estimator_id(e): i for i, e in enumerate(inbox)}
        for e in estimators:  # {**inbox, **message}
            i = estimator_id(e)
            if i in pos:
                inbox[pos[i]] = e
            else:
                pos[i] = len(inbox)
                inbox.append(e)
        slots[_INBOX] = inbox
    return {"semantics": registry["semantics"], "slots": {k: slots[k] for k in sorted(slots)}}


def read(registry: Mapping[str, Any]) -> tuple[list[dict], dict]:
    """GET's read: (estimators, registry after the read). Paper: every slot in sender order,
    registry unchanged. Code: the inbox, and the registry is emptied."""
    slots = registry["slots"]
    received = [e for s in sorted(slots) for e in slots[s]]
    if registry["semantics"] == "code":
        return received, {"semantics": "code", "slots": {}}
    return received, {"semantics": registry["semantics"], "slots": {k: list(v) for k, v in slots.items()}}


def size(registry: Mapping[str, Any]) -> int:
    return sum(len(v) for v in registry["slots"].values())
