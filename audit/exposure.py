"""What of a learning process an organisation's files expose in clear (issue 32; docs/confidentiality.md
"What a non-member can read, measured").

A member knows a finished process's confidential values in clear: its hyper-parameters and privacy
budget (the process record), each round's metrics and the ε figures the ledger charged (the execution
records), and each task's data commitment. :func:`process_needles` turns them into *needles*: byte
strings distinctive enough that finding one in a file means the value is there. :func:`search` looks
for every needle in a sequence of byte sources (the files of a folder: :func:`files_of`; the blocks a
peer's Deliver service hands out: :meth:`ledger.fabric.gateway.FabricLedger.delivered_blocks`) and
counts, by kind, the values it found.

**Needles.** The contracts store canonical JSON (sorted keys, no whitespace: :mod:`wire.canonical`), so
a value ``v`` stored under the name ``n`` is the bytes ``"n":v`` (canonical JSON of both). That pair is
each value's first *form*. A float whose canonical text has at least :data:`MIN_BARE` characters
(``0.8734177215189873``: Python's shortest round-trip repr, which the contracts write) is distinctive
alone; that bare text is a second form, which also finds the value where it is written under another
name. A string is never bare (``"network"`` is everywhere). Finding any form of a value is one hit of its kind. Skipped, with the
reason in :attr:`Needles.skipped`:

- a boolean or null value (``"converged":true`` says little, and such pairs recur in unrelated records),
  and a zero (``"rho":0.0``: nothing spent, in many records);
- a value whose every form is shorter than :data:`MIN_BYTES` (a needle like ``0`` or ``"a":1`` matches
  by chance);
- a value whose forms are also another kind's (``"epsilon":1.0`` as the budget and as a charged total):
  a hit could not say which kind leaked;

**Kinds** (:data:`KINDS`), issue 32's confidential fields:

- ``hyperparameters``: each top-level pair of the process's hyper-parameters;
- ``privacy_budget``: each pair of its privacy budget (mechanism, ε, δ, accounting, scope);
- ``metrics``: each pair of each completed task's signed metrics, and its validation scores;
- ``epsilon``: each completed task's ``epsilon_total`` and every field of its privacy charge (spent
  and total ε and ρ of both observers, accounting, scope, sensitivity, clip);
- ``data_commitments``: each completed task's data commitment (``sha256:<hex>``);
- ``recipients``: who each completed task sent its messages to, one needle per (sender, recipients):
  the canonical pair ``"recipient":"Org2MSP"`` of each message (the form a result signed with its
  parties in clear stores) and ``"recipients":[...]``, the list its confidential part stores;
- ``model``: each final model's ``location``, every number and string of its estimators and the salt
  of its private part (the model records' private part, as an organisation on the access list reads
  it; the salt is what keeps a guessable field from being found from the public hash).

Not counted: digests of states, messages and models (they are hashes, which the channel keeps by
design), and the member list. A positive control runs the same needles over a member's files, which
must find them (else the needles are wrong, and zero hits elsewhere would mean nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.client import ExecutionRecord, ModelRecord, ProcessRecord
from wire.canonical import canonical_json

KINDS = ("hyperparameters", "privacy_budget", "metrics", "epsilon", "data_commitments", "recipients", "model")
MIN_BYTES = 8  #: a form shorter than this matches by chance
MIN_BARE = 8  #: a float's bare canonical text at least this long is a form of its own


@dataclass(frozen=True)
class Needle:
    """One confidential value: its kind, where a member reads it (``labels``: every place the same
    value stands) and its byte forms (any one found is the value found)."""

    kind: str
    labels: tuple[str, ...]
    forms: tuple[bytes, ...]


@dataclass(frozen=True)
class Skipped:
    kind: str
    label: str
    reason: str


@dataclass(frozen=True)
class Needles:
    needles: tuple[Needle, ...]
    skipped: tuple[Skipped, ...]

    def count_by_kind(self) -> dict[str, int]:
        return {k: sum(n.kind == k for n in self.needles) for k in KINDS}

    def skipped_by_reason(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.skipped:
            out[s.reason] = out.get(s.reason, 0) + 1
        return out


@dataclass(frozen=True)
class Exposure:
    """What a search found: for each kind, the needles searched and the labels of those found, and
    where (source names); ``searched_bytes`` and ``sources`` say what was read."""

    needles: dict[str, int]
    found: dict[str, tuple[str, ...]]
    where: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sources: int = 0
    searched_bytes: int = 0

    @property
    def hits(self) -> int:
        """Confidential values found (each value once, however often it occurs)."""
        return sum(len(v) for v in self.found.values())

    def hits_by_kind(self) -> dict[str, int]:
        return {k: len(self.found.get(k, ())) for k in KINDS}

    def summary(self) -> dict[str, Any]:
        return {
            "hits": self.hits,
            "hits_by_kind": self.hits_by_kind(),
            "needles_by_kind": dict(self.needles),
            "sources": self.sources,
            "searched_bytes": self.searched_bytes,
        }


def _pair(name: str, value: Any) -> bytes:
    """``"name":value`` as a record's canonical JSON writes it."""
    return canonical_json({name: value})[1:-1]


class _Collector:
    def __init__(self) -> None:
        self.forms: dict[tuple[str, tuple[bytes, ...]], list[str]] = {}
        self.skipped: list[Skipped] = []

    def add(self, kind: str, label: str, name: str, value: Any) -> None:
        if value is None or isinstance(value, bool):
            self.skipped.append(Skipped(kind, label, "boolean or null"))
            return
        if isinstance(value, (int, float)) and value == 0:
            self.skipped.append(Skipped(kind, label, "zero"))
            return
        forms = [_pair(name, value)]
        if isinstance(value, float) and len(bare := canonical_json(value)) >= MIN_BARE:
            forms.append(bare)
        forms = [f for f in forms if len(f) >= MIN_BYTES]
        if not forms:
            self.skipped.append(Skipped(kind, label, f"shorter than {MIN_BYTES} bytes"))
            return
        self.forms.setdefault((kind, tuple(forms)), []).append(label)

    def needles(self) -> Needles:
        owners: dict[bytes, set[str]] = {}
        for kind, forms in self.forms:
            for f in forms:
                owners.setdefault(f, set()).add(kind)
        needles, skipped = [], list(self.skipped)
        for (kind, forms), labels in self.forms.items():
            if any(len(owners[f]) > 1 for f in forms):
                others = sorted({k for f in forms for k in owners[f]} - {kind})
                skipped += [Skipped(kind, lab, f"also a value of {', '.join(others)}") for lab in labels]
                continue
            needles.append(Needle(kind, tuple(labels), forms))
        return Needles(tuple(needles), tuple(skipped))


def _scalars(kind: str, label: str, obj: Mapping[str, Any], out: _Collector) -> None:
    """Every number and string of a JSON object at any depth, each as its own ``"name":value`` pair."""
    for name, value in obj.items():
        if isinstance(value, Mapping):
            _scalars(kind, f"{label}.{name}", value, out)
        elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
            out.add(kind, f"{label}.{name}", name, value)


def process_needles(
    process: ProcessRecord, executions: Iterable[ExecutionRecord], models: Iterable[ModelRecord] = ()
) -> Needles:
    """The needles of ``process``'s confidential values, as a member reads them (its record, its
    execution records and its final models); only completed records count."""
    out = _Collector()
    for model in models:
        if model.location:  # empty: a public read, not joined (or a model stored without one)
            out.add("model", f"model {model.id} location", "location", model.location)
        if model.private_salt is not None:  # what keeps the hash from being searched: private too
            out.add("model", f"model {model.id} salt", "salt", model.private_salt)
        for i, estimator in enumerate(model.estimators):
            if isinstance(estimator, Mapping):
                _scalars("model", f"model {model.id} estimators[{i}]", estimator, out)
    for name, value in process.hyperparameters.items():
        out.add("hyperparameters", f"hyperparameters.{name}", name, value)
    if process.privacy_budget is not None:
        for name, value in process.privacy_budget.json_object().items():
            out.add("privacy_budget", f"privacy_budget.{name}", name, value)
    for rec in executions:
        if rec.status != "completed" or rec.result is None:
            continue
        at = f"{rec.organisation} round {rec.round}"
        for name, value in rec.result.metrics.items():
            out.add("metrics", f"{at} metrics.{name}", name, value)
        if (v := rec.result.validation) is not None:
            for name in ("collaborative", "isolated"):
                out.add("metrics", f"{at} validation.{name}", name, getattr(v, name))
        out.add("epsilon", f"{at} epsilon_total", "epsilon_total", rec.epsilon_total)
        if rec.privacy is not None:
            _scalars("epsilon", f"{at} privacy", rec.privacy.to_dict(), out)
        recipients = [m.recipient for m in rec.result.outputs.messages]
        if recipients and all(r is not None for r in recipients):  # None: a public read, not joined
            forms = (_pair("recipients", recipients), *sorted({_pair("recipient", r) for r in recipients}))
            out.forms.setdefault(("recipients", forms), []).append(f"{at} recipients")
        commitment = rec.result.inputs.data_commitment
        if commitment is not None:  # None: a public read, the commitment not joined
            out.forms.setdefault(("data_commitments", (commitment.encode(),)), []).append(
                f"{at} data_commitment"
            )
    return out.needles()


def files_of(paths: Iterable[Path]) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of every regular file under each of ``paths`` (a folder, searched recursively,
    or a file together with its SQLite side files ``-wal`` and ``-shm`` where they exist)."""
    for root in paths:
        if root.is_dir():
            files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
        else:
            files = [
                s for s in (root, *(root.with_name(root.name + x) for x in ("-wal", "-shm"))) if s.is_file()
            ]
        for p in files:
            try:
                yield str(p), p.read_bytes()
            except OSError:  # a file a running node removed meanwhile (a rotated log, a compaction)
                continue


def search(sources: Iterable[tuple[str, bytes]], needles: Needles) -> Exposure:
    """Every needle looked for in each (name, bytes) source, whole (a form is never split across two
    sources' boundaries: give whole files and whole blocks)."""
    found: dict[Needle, list[str]] = {}
    count = size = 0
    for name, data in sources:
        count, size = count + 1, size + len(data)
        for n in needles.needles:
            if any(f in data for f in n.forms):
                found.setdefault(n, []).append(name)
    return Exposure(
        needles=needles.count_by_kind(),
        found={k: tuple(sorted(lab for n in found if n.kind == k for lab in n.labels[:1])) for k in KINDS},
        where={n.labels[0]: tuple(w) for n, w in found.items()},
        sources=count,
        searched_bytes=size,
    )


def search_blocks(blocks: Sequence[bytes] | Iterable[bytes], needles: Needles) -> Exposure:
    """:func:`search` over blocks as delivered (one source per block, named ``block N``)."""
    return search(((f"block {i}", b) for i, b in enumerate(blocks)), needles)
