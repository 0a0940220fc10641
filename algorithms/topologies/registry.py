"""The one list of topology kinds a learning process may name, and how each is built.

A process's ledger record names its topology as ``{"kind": <name>, "seed": <int>, <parameters>...}``.
The same registry validates that record when the process is created
(:func:`executor.images.declarations.validate_process`), builds the graph inside the algorithm image for each
task (:mod:`algorithms.task_runtime`) and in the in-memory simulator (:mod:`algorithms.simulator`), so
the audited run and the simulation see the same neighbours in every round. The host passes only the
record (names and seed); it never computes a graph.

Kinds (``size`` is the number of organisations, in consortium order):

* ``none`` -- no exchange at all (no graph);
* ``empty``, ``ring``, ``complete``, ``cycle_with_inverse_chord`` (alias ``cic``, prime sizes; seed 000
  Fig. 1) -- fixed graphs (:mod:`algorithms.topologies.static`);
* ``random_link`` (``links``, default 1) and ``erdos_renyi`` (``p``) -- fresh random undirected graphs
  every round (seed 003 §VI, Fig. 3 (iii); :mod:`algorithms.topologies.random_graphs`);
* ``random_links`` (``period``, default 1) -- one random link per node per iteration of ``period``
  rounds (collaborative RF; :mod:`algorithms.topologies.random_links`);
* ``dpsda_digraphs``, ``dpsda_graphs`` -- the time-varying 7-node graphs of the DPSDA experiments
  (seed 002 §6; :mod:`algorithms.topologies.periodic`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from algorithms.topologies import periodic, random_graphs, random_links, static
from algorithms.topologies.base import Topology


class TopologyError(ValueError):
    """A topology record the registry cannot build; ``problems`` lists every reason."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def _int_at_least(low: int) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        ok = isinstance(v, int) and not isinstance(v, bool) and v >= low
        return None if ok else f"must be an integer >= {low}, got {v!r}"

    return check


def _probability(v: Any) -> str | None:
    ok = isinstance(v, int | float) and not isinstance(v, bool) and 0.0 < float(v) <= 1.0
    return None if ok else f"must be a number in (0, 1], got {v!r}"


@dataclass(frozen=True)
class Kind:
    """One topology kind: its constructor ``(size, seed, parameters) -> Topology`` and its parameters
    (name -> check returning the problem or None)."""

    build: Callable[[int, int, Mapping[str, Any]], Topology]
    parameters: Mapping[str, Callable[[Any], str | None]] = field(default_factory=dict)
    sizes: tuple[int, ...] | None = None  # the only sizes the kind is defined for (None: any)
    required: tuple[str, ...] = ()  # parameters without a default


def _static(make: Callable[[int], Topology]) -> Kind:
    return Kind(lambda size, seed, p: make(size))


def _dpsda(make: Callable[[], Topology]) -> Kind:
    return Kind(lambda size, seed, p: make(), sizes=(periodic.DPSDA_NODES,))


REGISTRY: dict[str, Kind] = {
    "empty": _static(static.empty),
    "ring": _static(static.ring),
    "complete": _static(static.complete),
    "cycle_with_inverse_chord": _static(static.cycle_with_inverse_chord),
    "cic": _static(static.cycle_with_inverse_chord),
    "random_link": Kind(
        lambda size, seed, p: random_graphs.RandomLinkTopology(size, seed, p.get("links", 1)),
        {"links": _int_at_least(1)},
    ),
    "erdos_renyi": Kind(
        lambda size, seed, p: random_graphs.ErdosRenyiTopology(size, seed, float(p["p"])),
        {"p": _probability},
        required=("p",),
    ),
    "random_links": Kind(
        lambda size, seed, p: random_links.RandomLinks(size, seed, p.get("period", 1)),
        {"period": _int_at_least(1)},
    ),
    "dpsda_digraphs": _dpsda(periodic.dpsda_digraphs),
    "dpsda_graphs": _dpsda(periodic.dpsda_graphs),
}
NONE = "none"
KINDS: tuple[str, ...] = tuple(sorted([*REGISTRY, NONE]))


def normalise(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The record with its defaults: no ``kind`` is ``empty``, no ``seed`` is 0 (older records)."""
    return {"kind": "empty", "seed": 0, **spec}


def problems(spec: Any, size: int | None = None) -> list[str]:
    """Every reason the record ``spec`` cannot be built (for ``size`` organisations, if given)."""
    if not isinstance(spec, Mapping):
        return ["topology must be an object {kind, seed}"]
    out: list[str] = []
    name = spec.get("kind")
    if name not in KINDS:
        out.append(f"topology kind {name!r} is not known to the executor (known: {', '.join(KINDS)})")
    seed = spec.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        out.append(f"topology seed must be an integer, got {seed!r}")
    elif seed < 0:
        out.append(f"topology seed must be non-negative, got {seed}")
    kind = REGISTRY.get(name) if isinstance(name, str) else None
    if kind is None or not isinstance(name, str):
        return out
    for key, value in spec.items():
        if key in ("kind", "seed"):
            continue
        check = kind.parameters.get(key)
        if check is None:
            known = ", ".join(kind.parameters) or "none"
            out.append(f"topology {name} has no parameter {key!r} (parameters: {known})")
        elif (problem := check(value)) is not None:
            out.append(f"topology {name} parameter {key} {problem}")
    out += [f"topology {name} needs the parameter {k}" for k in kind.required if k not in spec]
    if size is not None and not out:
        out += _build_problems(kind, name, spec, size)
    return out


def _build_problems(kind: Kind, name: str, spec: Mapping[str, Any], size: int) -> list[str]:
    if kind.sizes is not None and size not in kind.sizes:
        return [f"topology {name} is defined for {list(kind.sizes)} organisations only, not {size}"]
    try:
        kind.build(size, int(spec["seed"]), spec)
    except ValueError as exc:  # e.g. a cycle with inverse chord on a non-prime number of nodes
        return [f"topology {name} for {size} organisations: {exc}"]
    return []


def build(spec: Mapping[str, Any], size: int) -> Topology | None:
    """The topology a process record names, for ``size`` organisations (``none``: no graph).

    :class:`TopologyError` if the record names an unknown kind or invalid parameters (defaults:
    :func:`normalise`)."""
    spec = normalise(spec)
    name = spec["kind"]
    if name in (NONE, ""):
        return None
    found = problems(spec, size)  # (builds it once to see that it can be built)
    if found:
        raise TopologyError(found)
    return REGISTRY[name].build(size, int(spec["seed"]), spec)
