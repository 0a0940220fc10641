"""``consortia simulate PATH --data DIR``: an algorithm folder run by the in-memory simulator on local
files, as the platform would run it (docs/sdk.md "Write, check, simulate").

``DIR`` holds one CSV or Parquet file per organisation; the file's stem is the organisation (name the
files by MSP id, ``Org1MSP.csv``, to compare digests with an audited process), the consortium is in the
files' name order. Each file is read exactly as ``consortia data import`` reads it
(:func:`executor.data_import.read_dataset`: every column but the label a finite number, labels within the
declared classes), so the arrays are those a task reads. The topology record is the one a process
records (``{"kind", "seed", parameters...}``, the process seed being its seed), and
:func:`algorithms.simulator.simulate` runs under the numeric profile, so the digests printed are those an
audited process of the same data, image, hyper-parameters, topology and seed records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from algorithms import codec
from algorithms.simulator import SimulationResult, simulate
from algorithms.step import LocalDataset
from api.algorithm_kit import folder as folders
from executor.data_import import SUFFIXES, read_dataset
from executor.images.declarations import ImageDeclaration


class LocalRunError(ValueError):
    """The run cannot start: bad topology text, no data files, unreadable data; the message says why."""


def topology_record(text: str, seed: int) -> dict[str, Any]:
    """``KIND[,k=v...]`` as a process's topology record: ``{"kind": KIND, "seed": seed, k: v...}`` (values
    read as integers, then numbers, else text)."""
    kind, *pairs = [p.strip() for p in text.split(",")]
    record: dict[str, Any] = {"kind": kind, "seed": seed}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        if not eq or not key:
            raise LocalRunError(f"--topology: {pair!r} is not k=v (e.g. random_link,links=2)")
        value: Any = raw
        for parse in (int, float):
            try:
                value = parse(raw)
                break
            except ValueError:
                continue
        record[key.strip()] = value
    return record


def read_organisations(
    data_dir: Path, label: str | None, decl: ImageDeclaration, dataset: str = "default"
) -> dict[str, LocalDataset]:
    """One dataset per CSV/Parquet file of ``data_dir``, by file stem, in name order."""
    from executor.data_import import DataImportError

    files = (
        sorted(p for p in Path(data_dir).iterdir() if p.suffix.lower() in SUFFIXES)
        if Path(data_dir).is_dir()
        else []
    )
    if not files:
        raise LocalRunError(f"{data_dir}: no .csv or .parquet file (one per organisation, named by it)")
    stems = [p.stem for p in files]
    if len(set(stems)) != len(stems):
        raise LocalRunError(f"{data_dir}: two files for one organisation: {sorted(stems)}")
    out = {}
    for p in files:
        try:
            out[p.stem] = read_dataset(p, label, decl, dataset, label_optional=not decl.label)
        except DataImportError as exc:
            raise LocalRunError(f"organisation {p.stem}: {exc}") from None
    return out


@dataclass
class LocalRun:
    """What ``consortia simulate`` prints: the last round's metrics and every round's, the final model and
    state digests, the validation figures (with a slice) and the numeric profile."""

    result: SimulationResult
    topology: dict[str, Any]
    seed: int

    def last_metrics(self) -> list[dict[str, Any]]:
        last = self.result.metrics[-1] if self.result.metrics else {}
        return [
            {
                "organisation": o,
                **{k: last.get(o, {})[k] for k in sorted(last.get(o, {}))},
                **{f"validation_{k}": v for k, v in self.result.validation.get(o, {}).items()},
                "model": codec.digest(self.result.models[o]) if o in self.result.models else None,
            }
            for o in self.result.consortium
        ]

    def every_round(self) -> list[dict[str, Any]]:
        return [
            {"round": r, "organisation": o, **{k: m[o][k] for k in sorted(m.get(o, {}))}}
            for r, m in enumerate(self.result.metrics, start=1)
            for o in self.result.consortium
        ]

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "consortium": list(r.consortium),
            "rounds": r.rounds,
            "seed": self.seed,
            "topology": self.topology,
            "numeric_profile": r.numeric_profile,
            "metrics": {o: r.metrics[-1].get(o, {}) for o in r.consortium} if r.metrics else {},
            "rounds_metrics": [{o: m.get(o, {}) for o in r.consortium} for m in r.metrics],
            "models": {o: codec.digest(b) for o, b in sorted(r.models.items())},
            "states": {o: codec.digest(b) for o, b in sorted(r.states.items())},
            "validation": r.validation,
        }


def run_folder(
    path: Path,
    data_dir: Path,
    *,
    topology: str,
    rounds: int,
    seed: int = 0,
    label: str | None = "label",
    validation_fraction: float = 0.0,
    hyperparameters: Mapping[str, Any] | None = None,
    dataset: str = "default",
) -> LocalRun:
    """Simulate the folder's algorithm (built from its schema's defaults and ``hyperparameters``) on the
    files of ``data_dir`` (module doc)."""
    folder = Path(path).resolve()
    decl = folders.declaration(folder)
    datasets = read_organisations(data_dir, label, decl, dataset)
    record = topology_record(topology, seed)
    params = {k: v["default"] for k, v in (decl.parameters or {}).items() if "default" in v}
    params.update(hyperparameters or {})
    with folders.importable(folder):
        cls = folders.load_class(folder, decl.algorithm)
        result = simulate(
            cls(**params),
            datasets,
            rounds=rounds,
            seed=seed,
            topology=record,
            validation_fraction=validation_fraction,
        )
    return LocalRun(result, record, seed)
