"""``consortia algorithm check PATH``: the contract an algorithm folder must meet before it spends a
consortium's time (docs/sdk.md "Write, check, simulate").

The folder's algorithm is loaded as its image loads it (:mod:`.folder`), built from the defaults of its
hyper-parameter schema, and run twice by the in-memory simulator (:func:`consortia_sdk.simulate`, under the
numeric profile) on synthetic data matching its declared input (or on local files), while
:class:`.instrument.Recorder` watches it. Each check is reported by name, passed or failed with the
reason:

* ``image.json``: it names a module and class, an SDK version this platform runs, a known numeric
  profile, runtimes, base, input and hyper-parameter schema;
* ``imports``: its modules import ``consortia_sdk``, never the project's internal packages;
* ``loads``: the class imports and is built from the schema's defaults;
* ``parameters rebuild``: ``params()`` is JSON as it is and ``type(a)(**a.params()).params() == a.params()``;
* ``parameter schema``: the schema names exactly ``params()``'s keys, their types, defaults and bounds;
* ``runs``: ``init`` and every ``step`` of every organisation run;
* ``payloads encode``: every state, message and model is a payload of the codec;
* ``outputs as declared``: every message and model is within what ``image.json`` declares (the host's
  own check, :func:`executor.images.outputs.check_outputs`, raw rows included);
* ``neighbours only``: messages go to the round's out-neighbours only (:class:`ProtocolViolation`);
* ``inputs as declared``: declared features and classes fit the data; a label-free declaration never
  reads ``data.labels``; the data is read-only (the platform reloads it for every task);
* ``identical runs``: the two runs give the same bytes: every state, message, metric and model digest;
* ``no clock``, ``seeded randomness``, ``no network``: what :mod:`.instrument` caught, with the line;
* ``validation score`` (if the class has ``validation_score``): it scores a model on a slice.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from algorithms import codec
from algorithms.numeric_profile import named as profile_named
from algorithms.simulator import ProtocolViolation, SimulationResult, simulate
from algorithms.step import LocalDataset, StepResult, TaskContext
from api.algorithm_kit import folder as folders
from api.algorithm_kit.instrument import CLOCK, LABELS, NETWORK, RANDOMNESS, Recorder
from executor.errors import ExecutorError
from executor.images import outputs

CHECKS = (
    "image.json",
    "imports",
    "loads",
    "parameters rebuild",
    "parameter schema",
    "runs",
    "payloads encode",
    "outputs as declared",
    "neighbours only",
    "inputs as declared",
    "identical runs",
    "no clock",
    "seeded randomness",
    "no network",
)
RUNTIMES = ("container", "sandbox")
BASES = ("python", "torch")
FEATURE_KINDS = ("numeric",)
_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


@dataclass(frozen=True)
class Check:
    check: str
    ok: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "ok": self.ok, "detail": self.detail}


@dataclass
class CheckReport:
    """Every check of one folder, in :data:`CHECKS` order."""

    folder: Path
    checks: list[Check] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)  # the first run's final model digests

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def add(self, name: str, problems: list[str] | str | None) -> None:
        if isinstance(problems, str):
            problems = [problems]
        self.checks.append(Check(name, not problems, "; ".join(problems or [])))

    def not_run(self, reason: str) -> None:
        """The checks not reached are failures (never reported as passed)."""
        done = {c.check for c in self.checks}
        for name in CHECKS:
            if name not in done:
                self.checks.append(Check(name, False, f"not run: {reason}"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "ok": self.ok,
            "checks": [c.to_dict() for c in self.checks],
            "models": self.digests,
        }


# ---------------------------------------------------------------------------- the declaration


def declaration_problems(meta: Mapping[str, Any]) -> list[str]:
    """What the folder's image.json lacks beyond what :class:`ImageDeclaration` refuses."""
    problems = []
    for key in ("name", "version", "algorithm"):
        if not isinstance(meta.get(key), str) or not meta[key]:
            problems.append(f'"{key}" must be a non-empty string')
    try:
        profile_named(meta.get("numeric_profile"))
    except ValueError as exc:
        problems.append(str(exc))
    runtimes = meta.get("runtimes")
    if not isinstance(runtimes, list) or not runtimes or set(runtimes) - set(RUNTIMES):
        problems.append(f'"runtimes" must list some of {list(RUNTIMES)}, got {runtimes!r}')
    if meta.get("base") not in BASES:
        problems.append(f'"base" must be one of {list(BASES)}, got {meta.get("base")!r}')
    inp = meta.get("input")
    if not isinstance(inp, dict):
        problems.append('"input" must declare the data: {"features": "numeric", "label": true|false}')
    else:
        if inp.get("features") not in FEATURE_KINDS:
            problems.append(
                f'input "features" must be one of {list(FEATURE_KINDS)}, got {inp.get("features")!r}'
            )
        if not isinstance(inp.get("label", False), bool):
            problems.append('input "label" must be true or false')
        classes = inp.get("classes")
        if classes is not None and not (isinstance(classes, list) and len(classes) >= 2):
            problems.append('input "classes" must list at least two label values')
    if not isinstance(meta.get("parameters"), dict):
        problems.append('"parameters" must describe the hyper-parameters: {name: {"type", "default", ...}}')
    try:
        outputs.parse(meta)
    except outputs.DeclarationInvalid as exc:
        problems.append(str(exc))
    return problems


def schema_problems(
    schema: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any], defaults: Any
) -> list[str]:
    """Where the hyper-parameter schema and ``params()`` disagree (``defaults``: the params of the class
    built with no argument, or None if it needs some)."""
    problems = []
    missing, extra = sorted(set(params) - set(schema)), sorted(set(schema) - set(params))
    if missing:
        problems.append(f"params() has {missing}, which the schema does not describe")
    if extra:
        problems.append(f"the schema describes {extra}, which params() does not return")
    for name in sorted(set(schema) & set(params)):
        spec, value = schema[name], params[name]
        kind = spec.get("type")
        if kind not in _TYPES:
            problems.append(f"{name}: type {kind!r} is not one of {sorted(_TYPES)}")
            continue
        if isinstance(value, bool) and kind != "boolean" or not isinstance(value, _TYPES[kind]):
            problems.append(f"{name}: params() gives {value!r}, not of type {kind}")
            continue
        if "default" not in spec:
            problems.append(f"{name}: the schema gives no default")
        elif defaults is not None and defaults.get(name) != spec["default"]:
            problems.append(
                f"{name}: the schema's default {spec['default']!r} is not the class's {defaults.get(name)!r}"
            )
        for bound, ok in (
            ("minimum", lambda v, b: v >= b),
            ("maximum", lambda v, b: v <= b),
            ("exclusive_minimum", lambda v, b: v > b),
            ("exclusive_maximum", lambda v, b: v < b),
        ):
            if bound in spec and kind in ("integer", "number") and not ok(value, spec[bound]):
                problems.append(f"{name}: {value!r} breaks {bound} {spec[bound]!r}")
        if "enum" in spec and value not in spec["enum"]:
            problems.append(f"{name}: {value!r} is not one of {spec['enum']!r}")
    return problems


def rebuild_problem(algorithm: Any) -> str | None:
    """Why ``type(a)(**a.params())`` is not ``a`` (by its params), or None."""
    try:
        params = algorithm.params()
        text = json.dumps(params, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        return f"params() is not JSON: {exc}"
    if json.loads(text) != params:
        return f"params() changes through JSON (tuples, non-string keys?): {params!r}"
    try:
        again = type(algorithm)(**json.loads(text)).params()
    except Exception as exc:  # the constructor's own refusal
        return f"type(a)(**a.params()) fails: {type(exc).__name__}: {exc}"
    if again != params:
        differ = sorted(k for k in set(params) | set(again) if params.get(k) != again.get(k))
        return f"type(a)(**a.params()).params() differs from a.params() in {differ}: {again!r} != {params!r}"
    return None


# ---------------------------------------------------------------------------- data


class WatchedDataset(LocalDataset):
    """A :class:`LocalDataset` that tells the recorder when the folder's code reads ``labels``."""

    recorder: Recorder | None = None

    def __getattribute__(self, name: str) -> Any:
        if name == "labels":
            rec = object.__getattribute__(self, "recorder")
            if rec is not None:
                rec.note(LABELS, "reads data.labels", sys._getframe(1))
        return object.__getattribute__(self, name)


def read_only(data: LocalDataset, recorder: Recorder | None) -> WatchedDataset:
    arrays = [np.array(data.features)] + ([] if data.labels is None else [np.array(data.labels)])
    for a in arrays:
        a.flags.writeable = False
    watched = WatchedDataset(arrays[0], arrays[1] if len(arrays) > 1 else None, data.name, dict(data.extras))
    object.__setattr__(watched, "recorder", recorder)
    return watched


def synthetic(
    decl_input: Mapping[str, Any], organisations: int, seed: int, rows: int = 80, d: int = 4
) -> dict[str, LocalDataset]:
    """Numeric rows for ``organisations`` members (``Org1MSP``...), whose labels (the declared classes, or
    0/1) follow a linear rule with a little noise, so a learning algorithm can learn them."""
    classes = list(decl_input.get("classes") or [0, 1])
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(d, len(classes)))
    out = {}
    for i in range(organisations):
        X = rng.normal(size=(rows, d)) + 0.25 * i
        scores = X @ W + 0.3 * rng.normal(size=(rows, len(classes)))
        y = np.asarray(classes)[np.argmax(scores, axis=1)]
        out[f"Org{i + 1}MSP"] = LocalDataset(X, y, name="default")
    return out


# ---------------------------------------------------------------------------- the runs


class CheckedAlgorithm:
    """The folder's algorithm as the simulator sees it during the check: every call within
    :meth:`Recorder.task`, messages to non-neighbours refused, outputs checked as the host checks them."""

    def __init__(self, algorithm: Any, recorder: Recorder, declared: outputs.OutputDeclaration):
        self.algorithm = algorithm
        self.name = getattr(algorithm, "name", type(algorithm).__name__)
        self.recorder = recorder
        self.declared = declared
        self.output_problems: list[str] = []

    def params(self) -> dict[str, Any]:
        return dict(self.algorithm.params())

    def init(self, data: LocalDataset, ctx: TaskContext) -> Any:
        with self.recorder.task(type(self.algorithm).init):
            return self.algorithm.init(data, ctx)

    def step(self, state: Any, inbox: Mapping[str, Any], data: LocalDataset, ctx: TaskContext) -> StepResult:
        with self.recorder.task(type(self.algorithm).step):
            res = self.algorithm.step(state, inbox, data, ctx)
        if not isinstance(res, StepResult):
            raise TypeError(f"step returned {type(res).__name__}, not StepResult")
        strangers = sorted(set(res.outbox) - set(ctx.out_neighbours))
        if strangers:
            raise ProtocolViolation(
                f"{ctx.organisation} addressed a message to {', '.join(strangers)} in round {ctx.round}, not an "
                f"out-neighbour (its out-neighbours: {', '.join(ctx.out_neighbours) or 'none'})"
            )
        if not self.output_problems:
            blobs = {r: codec.encode(p) for r, p in res.outbox.items()}
            model = None if res.model is None else codec.encode(res.model)
            rows = outputs.RawRows.of(np.asarray(data.features))
            try:
                outputs.check_outputs(self.declared, blobs, model, rows)
            except outputs.OutputRefused as exc:
                self.output_problems.append(f"round {ctx.round}, {ctx.organisation}: {exc}")
        return res


def _where(exc: BaseException, folder: Path) -> str:
    """The deepest line of the folder in ``exc``'s traceback."""
    here = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        try:
            rel = Path(frame.filename).resolve().relative_to(folder)
        except ValueError:
            continue
        here = f" at {rel}:{frame.lineno} ({(frame.line or '').strip()})"
    return here


@dataclass
class Run:
    result: SimulationResult | None = None
    error: BaseException | None = None
    output_problems: list[str] = field(default_factory=list)


def _run(
    cls: type,
    params: Mapping[str, Any],
    data: Mapping[str, LocalDataset],
    rounds: int,
    seed: int,
    topology: Mapping[str, Any],
    recorder: Recorder,
    declared: outputs.OutputDeclaration,
) -> Run:
    try:
        with recorder.task(cls.__init__):
            algorithm = cls(**dict(params))
        checked = CheckedAlgorithm(algorithm, recorder, declared)
        result = simulate(checked, data, rounds=rounds, seed=seed, topology=dict(topology))
        return Run(result, None, checked.output_problems)
    except Exception as exc:  # reported by the check it belongs to
        return Run(None, exc)


def differences(a: SimulationResult, b: SimulationResult) -> list[str]:
    """Where two simulations' bytes differ (the first few)."""
    out = []
    for rnd, (x, y) in enumerate(zip(a.state_digests, b.state_digests)):
        out += [f"round {rnd}: {o}'s state" for o in x if x[o] != y.get(o)]
    for rnd, (x, y) in enumerate(zip(a.message_digests, b.message_digests), start=1):
        out += [f"round {rnd}: message {s} -> {r}" for (s, r) in x if x[(s, r)] != y.get((s, r))]
    for rnd, (x, y) in enumerate(zip(a.metrics, b.metrics), start=1):
        out += [
            f"round {rnd}: {o}'s metrics"
            for o in x
            if json.dumps(x[o], sort_keys=True) != json.dumps(y.get(o), sort_keys=True)
        ]
    out += [f"{o}'s model" for o in a.models if a.models[o] != b.models.get(o)]
    return out


def check_folder(
    path: Path,
    *,
    data: Mapping[str, LocalDataset] | None = None,
    rounds: int = 3,
    seed: int = 7,
    organisations: int = 4,
    topology: Mapping[str, Any] | None = None,
    hyperparameters: Mapping[str, Any] | None = None,
) -> CheckReport:
    """Every check of the module doc on the folder ``path`` (``data``: organisation -> its rows, default
    synthetic rows of ``organisations`` members matching the declared input; ``topology`` default a
    ring, in which every member has a non-neighbour from 4 members on)."""
    folder = Path(path).resolve()
    report = CheckReport(folder)
    try:
        decl = folders.declaration(folder)
        meta = json.loads((folder / "image.json").read_text())
    except (folders.FolderError, ExecutorError) as exc:
        report.add("image.json", str(exc))
        report.not_run("image.json cannot be read")
        return report
    report.add("image.json", declaration_problems(meta))
    report.add(
        "imports",
        [
            f"{s.where(folder)} imports {s.package} (use consortia_sdk)"
            for s in folders.internal_imports(folder)
        ],
    )
    schema = decl.parameters or {}
    params = {**{k: v["default"] for k, v in schema.items() if "default" in v}, **dict(hyperparameters or {})}
    try:
        declared = outputs.parse(meta)
    except outputs.DeclarationInvalid:  # reported by the image.json check; the defaults meanwhile
        declared = outputs.OutputDeclaration()
    topology = dict(topology or {"kind": "ring", "seed": seed})
    with Recorder(folder) as recorder, folders.importable(folder):
        try:
            cls = folders.load_class(folder, decl.algorithm)
            with recorder.task(cls.__init__):
                algorithm = cls(**params)
        except Exception as exc:  # an import error, the constructor's refusal
            report.add("loads", f"{type(exc).__name__}: {exc}{_where(exc, folder)}")
            report.not_run("the algorithm does not load")
            return report
        report.add("loads", None)
        report.add("parameters rebuild", rebuild_problem(algorithm))
        try:
            with recorder.task(cls.__init__):
                defaults = cls().params()
        except Exception:  # the class needs arguments: no defaults to compare
            defaults = None
        try:
            own = algorithm.params()
        except Exception as exc:
            own = {}
            report.add("parameter schema", f"params() fails: {exc}")
        else:
            report.add(
                "parameter schema", schema_problems(schema, own, defaults) if decl.parameters else "no schema"
            )
        rows = data if data is not None else synthetic(decl.extra, organisations, seed)
        runs = []
        for _ in range(2):
            watched = {o: read_only(d, recorder) for o, d in rows.items()}
            runs.append(_run(cls, params, watched, rounds, seed, topology, recorder, declared))
    first, second = runs
    _verdicts(report, decl, first, second, recorder, folder)
    if first.result is not None:
        report.digests = {o: codec.digest(b) for o, b in sorted(first.result.models.items())}
    if first.result is not None and callable(getattr(cls, "validation_score", None)):
        report.add("validation score", _validation_problem(cls, params, first.result, rows, seed))
    return report


def _verdicts(
    report: CheckReport, decl: Any, first: Run, second: Run, recorder: Recorder, folder: Path
) -> None:
    err = first.error or second.error
    error = "" if err is None else f"{type(err).__name__}: {err}{_where(err, folder)}"
    codec_error = isinstance(err, codec.CodecError)
    violation = isinstance(err, ProtocolViolation)
    report.add("runs", error if err is not None and not (codec_error or violation) else None)
    report.add("payloads encode", error if codec_error else None)
    report.add("outputs as declared", first.output_problems)
    report.add("neighbours only", error if violation else None)
    inputs = []
    if not decl.label:
        inputs += [
            f'{f.path}:{f.line}: declares no label ("label": false) but {f.what}'
            for f in recorder.findings(LABELS)
        ]
    if isinstance(err, ValueError) and "read-only" in str(err):
        inputs.append(
            f"writes into its data{_where(err, folder)}: the data is read-only (each task reloads it)"
        )
    report.add("inputs as declared", inputs)
    if first.result is None or second.result is None:
        report.add("identical runs", "not run: a run failed")
    else:
        diffs = differences(first.result, second.result)
        more = f" and {len(diffs) - 5} more" if len(diffs) > 5 else ""
        report.add("identical runs", f"two runs differ: {', '.join(diffs[:5])}{more}" if diffs else None)
    for name, kind in (("no clock", CLOCK), ("seeded randomness", RANDOMNESS), ("no network", NETWORK)):
        report.add(name, [f.text() for f in recorder.findings(kind)])


def _validation_problem(
    cls: type,
    params: Mapping[str, Any],
    result: SimulationResult,
    data: Mapping[str, LocalDataset],
    seed: int,
) -> str | None:
    from algorithms import validation

    try:
        algorithm = cls(**dict(params))
        for org in result.consortium:
            validation.score(algorithm, result.model(org), data[org], seed)
    except Exception as exc:
        return f"validation_score fails: {type(exc).__name__}: {exc}"
    return None
