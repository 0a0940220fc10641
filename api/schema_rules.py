"""Rules of a process request that JSON Schema can say, written into the OpenAPI document so that a
client learns them from it: each topology kind's own parameters, and the consortium sizes a kind is
defined for (the cycle with inverse chord: prime sizes, seed 000; the DPSDA graphs: their fixed size),
read off the registry the tasks build topologies with (:mod:`algorithms.topologies.registry`).

What JSON Schema cannot say (a ``random_link`` topology's ``links`` below the consortium's size, the
hyper-parameters a given image accepts) is checked on request: ``ProcessIn`` (422) and
:func:`executor.process.launch` (400), before anything is written."""

from __future__ import annotations

from typing import Any

from executor.images.declarations import TOPOLOGY_KINDS, topology_problems
from ledger.rules import MAX_CONSORTIUM

#: each topology kind's own parameters as JSON Schema (the registry checks the same rules; a test keeps
#: the two in step): a kind accepts exactly these besides ``kind`` and ``seed``
TOPOLOGY_PARAMETERS: dict[str, dict[str, Any]] = {
    "random_link": {"links": {"type": "integer", "minimum": 1}},
    "erdos_renyi": {"p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}},
    "random_links": {"period": {"type": "integer", "minimum": 1}},
}
TOPOLOGY_REQUIRED: dict[str, list[str]] = {"erdos_renyi": ["p"]}


def topology_parameters_rule() -> dict[str, Any]:
    rules = []
    for kind in TOPOLOGY_KINDS:
        params = TOPOLOGY_PARAMETERS.get(kind, {})
        own: dict[str, Any] = {
            "properties": {"kind": True, "seed": True, **params},
            "additionalProperties": False,
        }
        if kind in TOPOLOGY_REQUIRED:
            own["required"] = TOPOLOGY_REQUIRED[kind]
        rules.append({"anyOf": [{"properties": {"kind": {"not": {"const": kind}}}}, own]})
    return {"allOf": rules}


def process_rules(clipped_if_private: dict[str, Any]) -> dict[str, Any]:
    """The consortium sizes each topology kind is defined for (the cycle with inverse chord: prime
    sizes; the DPSDA graphs: their fixed size), read off the registry the tasks build topologies with,
    as a JSON Schema rule so that a client learns it from the document."""
    rules = []
    for kind in sorted(TOPOLOGY_SIZES):
        sizes = TOPOLOGY_SIZES[kind]
        rules.append(
            {
                "anyOf": [
                    {"properties": {"topology": {"properties": {"kind": {"not": {"const": kind}}}}}},
                    {
                        "properties": {
                            "consortium": {"anyOf": [{"minItems": n, "maxItems": n} for n in sizes]}
                        }
                    },
                ]
            }
        )
    return {"allOf": [clipped_if_private, *rules]}


#: kind -> the consortium sizes it is defined for, for the kinds not defined for every size
TOPOLOGY_SIZES = {
    kind: sizes
    for kind in TOPOLOGY_KINDS
    if len(
        sizes := [
            n for n in range(1, MAX_CONSORTIUM + 1) if not topology_problems({"kind": kind, "seed": 0}, n)
        ]
    )
    < MAX_CONSORTIUM
    and not topology_problems({"kind": kind, "seed": 0})  # kinds with required parameters: checked on request
}
