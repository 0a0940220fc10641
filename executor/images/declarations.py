"""What an algorithm image declares, and the one check of a learning process against it.

An image folder (``algorithm-images/<name>/image.json``, or a user's algorithm folder, docs/sdk.md;
inside the image and covered by its digest) declares its ``algorithm``, the version of the algorithm SDK
it was written for (``"sdk": "1.0.0"``, :func:`sdk_problem`: same major version as this platform's
``consortia_sdk``, minor version at most ours) and, optionally, its ``input``::

    "input": {"features": "numeric", "label": true, "classes": [0, 1]}

``features``: the columns must be numbers; ``label``: a label column is required; ``classes``: the
label values the algorithm is built for (collaborative RF: 0 = genuine, 1 = fraud, seed 003 §V-A).
The hyper-parameters an image accepts are those of its algorithm's constructor, checked by the
algorithm's own validation (an unknown name or an out-of-range value is refused); a user's folder
also describes them (``"parameters": {name: {"type", "default", "minimum", ...}}``, checked against
the algorithm by ``consortia algorithm check``).

:func:`validate_process` is called by every way of creating a process -- the CLI
(``consortia process create``), the gateway (``POST /processes``) and the Python API
(:func:`executor.process.launch`) -- so the three refuse the same input with the same message.
The node agent checks what only it can see (its dataset folder, its labels) before a task starts
and fails the task on the ledger with the reason (``NodeAgent._preflight``).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from algorithms.step import SDK_VERSION
from algorithms.topologies import registry as topology_registry
from algorithms.topologies.base import Topology
from executor.errors import ExecutorError
from executor.images.recipe import IMAGES_DIR

DATASET_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  #: a dataset name is a folder name of the data root
DATASET_PATTERN = re.compile(DATASET_NAME)


class InvalidProcessSpec(ExecutorError, ValueError):
    """A process specification the image or the executor cannot run; ``problems`` lists every reason."""

    code = "INVALID_ARGUMENT"

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


# ---------------------------------------------------------------------------- topologies


TOPOLOGY_KINDS = topology_registry.KINDS  #: the kinds a process may name (algorithms.topologies.registry)
TOPOLOGY_KIND = "^(" + "|".join(TOPOLOGY_KINDS) + ")$"  #: the same, as a pattern (the gateway's schema)


def topology_problems(spec: Any, size: int | None = None) -> list[str]:
    """Why the topology record ``spec`` cannot run (for ``size`` organisations, if given): the image
    builds it with the same registry (:mod:`algorithms.topologies.registry`)."""
    return topology_registry.problems(spec, size)


def build_topology(spec: Mapping[str, Any], size: int) -> Topology | None:
    """The process's topology from its ledger record ``{kind, seed, ...}`` (``none``: no exchange);
    :class:`ExecutorError` if the registry cannot build it."""
    try:
        return topology_registry.build(spec, size)
    except topology_registry.TopologyError as exc:
        raise ExecutorError(str(exc)) from None


# ---------------------------------------------------------------------------- declarations

_SEMVER = re.compile(r"^(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})$")


class InvalidDeclaration(ExecutorError):
    """An ``image.json`` this platform cannot run (its SDK version, a malformed field); the message
    names the file and the field."""

    code = "INVALID_ARGUMENT"


def sdk_problem(version: Any) -> str | None:
    """Why an algorithm written for ``consortia_sdk`` ``version`` cannot run with this platform's SDK
    (:data:`algorithms.step.SDK_VERSION`), or None: the same major version, a minor version at most
    ours (a minor version only adds names, so an algorithm written for 1.0 runs on 1.3, not the
    reverse)."""
    if not isinstance(version, str) or not _SEMVER.match(version):
        return f"SDK version {version!r} is not MAJOR.MINOR.PATCH (this platform's SDK is {SDK_VERSION})"
    major, minor, _ = (int(p) for p in version.split("."))
    our_major, our_minor, _ = (int(p) for p in SDK_VERSION.split("."))
    if major != our_major:
        return (
            f"written for consortia_sdk {version}, a major version this platform (consortia_sdk "
            f"{SDK_VERSION}) cannot run"
        )
    if minor > our_minor:
        return (
            f"written for consortia_sdk {version}, newer than this platform's {SDK_VERSION}: upgrade the "
            f"platform, or write it for {our_major}.{our_minor}"
        )
    return None


@dataclass(frozen=True)
class ImageDeclaration:
    """The declaration of an image's recipe (``None`` fields: not declared).

    ``sdk``: the ``consortia_sdk`` version the algorithm was written for; ``parameters``: the
    hyper-parameter schema a folder declares (``{name: {"type", "default", "minimum", ...}}``), or None."""

    algorithm: str
    folder: Path | None = None
    name: str = ""
    features: str | None = None
    label: bool = False
    classes: tuple[Any, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    sdk: str | None = None
    parameters: Mapping[str, Mapping[str, Any]] | None = None

    @classmethod
    def from_folder(cls, folder: Path) -> ImageDeclaration:
        """The declaration of ``folder/image.json``; :class:`InvalidDeclaration` if it is not JSON, names
        no algorithm, or names an SDK version this platform cannot run (or none)."""
        where = folder / "image.json"
        try:
            meta = json.loads(where.read_text())
        except ValueError as exc:
            raise InvalidDeclaration(f"{where} is not JSON: {exc}") from None
        if not isinstance(meta, dict) or not isinstance(meta.get("algorithm"), str):
            raise InvalidDeclaration(f'{where}: "algorithm" must name the class, "<module>:<Class>"')
        if "sdk" not in meta:
            raise InvalidDeclaration(
                f'{where}: "sdk" must name the consortia_sdk version the algorithm was written for '
                f'(this platform\'s: "{SDK_VERSION}")'
            )
        problem = sdk_problem(meta["sdk"])
        if problem is not None:
            raise InvalidDeclaration(f"{where}: {problem}")
        inp = meta.get("input") or {}
        if not isinstance(inp, dict):
            raise InvalidDeclaration(f'{where}: "input" must be an object')
        classes = inp.get("classes")
        parameters = meta.get("parameters")
        if parameters is not None and not (
            isinstance(parameters, dict) and all(isinstance(v, dict) for v in parameters.values())
        ):
            raise InvalidDeclaration(
                f'{where}: "parameters" must map each name to {{"type", "default", ...}}'
            )
        return cls(
            meta["algorithm"],
            folder,
            meta.get("name", folder.name),
            inp.get("features"),
            bool(inp.get("label", False)),
            None if classes is None else tuple(classes),
            inp,
            meta["sdk"],
            parameters,
        )


def declaration(algorithm: str, images_dir: Path = IMAGES_DIR) -> ImageDeclaration:
    """The declaration of the recipe that runs ``algorithm`` (an undeclared one if none does);
    :class:`InvalidDeclaration` if that recipe's ``image.json`` cannot run here."""
    for meta in sorted(images_dir.glob("*/image.json")):
        try:
            named = json.loads(meta.read_text()).get("algorithm")
        except (OSError, ValueError, AttributeError):
            continue
        if named == algorithm:
            return ImageDeclaration.from_folder(meta.parent)
    return ImageDeclaration(algorithm)


def algorithm_class(decl: ImageDeclaration) -> type | None:
    """The algorithm class (``module:Class``), from the project or the image folder; None if absent."""
    module_name, _, cls_name = decl.algorithm.partition(":")
    if not cls_name:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        if decl.folder is None or not (decl.folder / f"{module_name}.py").is_file():
            return None
        path = decl.folder / f"{module_name}.py"
        spec = importlib.util.spec_from_file_location(f"_consortia_image_{decl.name}_{module_name}", path)
        if spec is None or spec.loader is None:
            raise ExecutorError(f"image {decl.name}: {path} cannot be loaded as a Python module") from None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return getattr(module, cls_name, None)


def hyperparameter_problems(decl: ImageDeclaration, hyperparameters: Mapping[str, Any]) -> list[str]:
    """Refusals of the algorithm's own constructor for these hyper-parameters (empty: accepted)."""
    cls = algorithm_class(decl)
    if cls is None:
        return []
    try:
        cls(**dict(hyperparameters))
    except TypeError as exc:
        msg = str(exc)
        m = re.search(r"unexpected keyword argument '([^']+)'", msg)
        if m:
            import inspect

            known = [p for p in inspect.signature(cls).parameters if p not in ("self", "params", "kwargs")]
            return [
                f"hyper-parameter {m.group(1)!r} is not accepted by {decl.algorithm}"
                + (f" (accepted: {', '.join(known)})" if known else "")
            ]
        return [f"hyper-parameters refused by {decl.algorithm}: {msg}"]
    except (ValueError, KeyError, AssertionError) as exc:
        return [f"hyper-parameters refused by {decl.algorithm}: {exc}"]
    return []


def validate_process(
    algorithm: str,
    topology: Mapping[str, Any],
    hyperparameters: Mapping[str, Any],
    dataset: str = "",
    size: int | None = None,
) -> ImageDeclaration:
    """Check a process against its image's declaration; raises :class:`InvalidProcessSpec` listing
    every problem (unknown topology or parameters, a topology not defined for ``size`` organisations,
    bad seed, hyper-parameters refused, invalid dataset name)."""
    problems: list[str] = topology_problems(topology, size)
    if dataset and not DATASET_PATTERN.fullmatch(dataset):
        problems.append(f"dataset name {dataset!r} is not valid (letters, digits, '.', '_', '-'; at most 64)")
    decl = declaration(algorithm)
    if not isinstance(hyperparameters, Mapping):
        problems.append("hyper-parameters must be an object")
    else:
        problems += hyperparameter_problems(decl, hyperparameters)
    if problems:
        raise InvalidProcessSpec(problems)
    return decl


# ---------------------------------------------------------------------------- the agent's own checks


def dataset_problem(data_dir: Path, decl: ImageDeclaration) -> str | None:
    """Why ``data_dir`` (an organisation's dataset folder) cannot feed this image, or None."""
    path = Path(data_dir) / "dataset.npz"
    if not Path(data_dir).is_dir():
        return f"dataset folder {data_dir} does not exist (import the data with `consortia data import`)"
    if not path.is_file():
        return f"dataset file {path} does not exist (import the data with `consortia data import`)"
    if decl.classes is None and not decl.label:
        return None
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as z:
            labels = z["labels"] if "labels" in z.files else None
    except (OSError, ValueError) as exc:
        return f"dataset file {path} cannot be read: {exc}"
    if labels is None:
        return f"dataset file {path} has no labels; image {decl.name} needs a label column"
    if decl.classes is not None:
        found = np.unique(labels)
        outside = [v.item() for v in found if v.item() not in decl.classes]
        if outside:
            return (
                f"labels {outside} of dataset {path} are outside the classes {list(decl.classes)} "
                f"image {decl.name} declares"
            )
    return None


def validation_problem(data_dir: Path, fraction: float, seed: int, organisation: str) -> str | None:
    """Why ``organisation``'s dataset cannot hold the process's validation slice (it would be empty or
    leave no row to train on, :func:`algorithms.validation.slice_rows`), or None."""
    from algorithms.task_runtime import load_dataset
    from algorithms.validation import ValidationSliceError, slice_rows

    try:
        slice_rows(load_dataset(Path(data_dir) / "dataset.npz"), fraction, seed, organisation)
    except (OSError, ValueError) as exc:  # ValidationSliceError is one
        prefix = "" if isinstance(exc, ValidationSliceError) else f"dataset of {organisation}: "
        return f"{prefix}{exc} (validation fraction {fraction:g} declared by the process)"
    return None
