"""Bring your own data: a CSV or Parquet file becomes one organisation's dataset of a Consortia home.

``consortia data import --org O --dataset NAME FILE.csv|parquet --label COLUMN [--image IMAGE]``
calls :func:`import_dataset`. Every column but the label is a feature and must be a finite number
in every row; the label column is required when the image declares one and its values must be among
the classes the image declares (``executor.images.declarations``; collaborative RF: 0 and 1). Problems are
reported by row and column (the first 20, plus how many more) and nothing is written.

What is written, all or nothing (a temporary folder beside the target, renamed into place)::

    <data root of O>/<NAME>/dataset.npz    # features (float64), labels (int64 when integral), name
    <data root of O>/<NAME>/schema.json    # feature columns in order, label column, classes, rows,
                                           # source file name and sha256 -- what `model predict` reads

The node agent of O reads ``dataset.npz`` for every process created with ``--dataset NAME``; the file
never leaves O (only the salted commitment to it reaches the ledger).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from algorithms.step import LocalDataset
from executor.errors import ExecutorError
from executor.images.declarations import DATASET_PATTERN, ImageDeclaration
from executor.images.recipe import sha256_file

MAX_REPORTED = 20
SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


class DataImportError(ExecutorError):
    """The file cannot become a dataset; ``problems`` lists what is wrong (row and column named)."""

    code = "DATA_INVALID"

    def __init__(self, message: str, problems: Sequence[str] = ()):
        self.problems = list(problems)
        shown = self.problems[:MAX_REPORTED]
        more = len(self.problems) - len(shown)
        text = (
            message + ("".join(f"\n  {p}" for p in shown)) + (f"\n  ... and {more} more" if more > 0 else "")
        )
        super().__init__(text)


@dataclass(frozen=True)
class ImportedDataset:
    name: str
    path: Path  # the dataset folder
    rows: int
    features: tuple[str, ...]
    label: str | None
    classes: tuple[Any, ...]
    source_sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.name,
            "path": str(self.path),
            "rows": self.rows,
            "features": list(self.features),
            "label": self.label,
            "classes": list(self.classes),
            "source_sha256": self.source_sha256,
        }


def read_table(source: Path):
    """A pandas DataFrame of strings (CSV) or typed columns (Parquet)."""
    import pandas as pd

    kind = SUFFIXES.get(source.suffix.lower())
    if kind is None:
        raise DataImportError(f"{source}: not a CSV or Parquet file (use .csv, .parquet or .pq)")
    if not source.is_file():
        raise DataImportError(f"{source}: no such file")
    try:
        if kind == "csv":
            return pd.read_csv(source, dtype=str, keep_default_na=False, skipinitialspace=True)
        return pd.read_parquet(source)
    except Exception as exc:  # the parser's own message names the line
        raise DataImportError(f"{source}: cannot be read as {kind}: {exc}") from None


def _numeric(frame, column: str, problems: list[str], what: str) -> np.ndarray:
    import pandas as pd

    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = np.flatnonzero(~np.isfinite(values))
    for i in bad:
        shown = raw.iloc[int(i)]
        shown = (
            "empty"
            if (
                shown is None
                or (isinstance(shown, str) and not shown.strip())
                or (isinstance(shown, float) and np.isnan(shown))
            )
            else repr(shown)
        )
        problems.append(f"row {int(i) + 1}: {what} {column!r} is {shown}, not a finite number")
    return values


def validate_table(
    frame, label: str | None, declaration: ImageDeclaration | None = None
) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """Features (n, d), labels (n,) or None, feature names; raises :class:`DataImportError`."""
    columns = [str(c) for c in frame.columns]
    frame.columns = columns
    if len(set(columns)) != len(columns):
        dup = sorted({c for c in columns if columns.count(c) > 1})
        raise DataImportError(f"duplicate column names {dup}")
    decl = declaration or ImageDeclaration("")
    if label is None and decl.label:
        raise DataImportError(f"image {decl.name} needs a label column: name it with --label")
    if label is not None and label not in columns:
        raise DataImportError(f"no label column {label!r}; the columns are {columns}")
    features = [c for c in columns if c != label]
    if not features:
        raise DataImportError("no feature columns (every column but the label is a feature)")
    if len(frame) == 0:
        raise DataImportError("the file has no rows")
    problems: list[str] = []
    X = np.column_stack([_numeric(frame, c, problems, "feature") for c in features])
    y = None
    if label is not None:
        y = _numeric(frame, label, problems, "label")
        if decl.classes is not None:
            allowed = {float(v) for v in decl.classes}
            for i in np.flatnonzero(np.isfinite(y) & ~np.isin(y, list(allowed))):
                problems.append(
                    f"row {int(i) + 1}: label {label!r} is {frame[label].iloc[int(i)]!r}, "
                    f"outside the classes {list(decl.classes)} image {decl.name} declares"
                )
    if problems:
        problems.sort(key=lambda p: int(p.split(":")[0].split()[1]))
        raise DataImportError(f"{len(problems)} problem(s); nothing was written:", problems)
    if y is not None and np.all(y == np.round(y)):
        y = y.astype(np.int64)
    return X, y, features


def read_dataset(
    source: str | os.PathLike,
    label: str | None,
    declaration: ImageDeclaration | None = None,
    name: str = "default",
    label_optional: bool = False,
) -> LocalDataset:
    """The dataset a task would read after ``consortia data import`` of ``source`` as ``name``: the same
    checks (:func:`validate_table`), then written and read back in the runtime's format, so its arrays
    and dtypes are the platform's (``consortia simulate``); nothing is kept on disk. ``label_optional``: a
    file without the ``label`` column has no labels (every column a feature)."""
    from algorithms.task_runtime import load_dataset, save_dataset

    frame = read_table(Path(source))
    if label_optional and label not in [str(c) for c in frame.columns]:
        label = None
    X, y, _ = validate_table(frame, label, declaration)
    with tempfile.TemporaryDirectory(prefix="consortia-dataset-") as tmp:
        save_dataset(Path(tmp) / "dataset.npz", LocalDataset(X, y, name=name))
        return load_dataset(Path(tmp) / "dataset.npz")


def import_dataset(
    data_root: str | os.PathLike,
    name: str,
    source: str | os.PathLike,
    label: str | None = None,
    declaration: ImageDeclaration | None = None,
    replace: bool = False,
) -> ImportedDataset:
    """Validate ``source`` and write it as dataset ``name`` under ``data_root`` (one organisation's)."""
    from algorithms.task_runtime import save_dataset

    source = Path(source)
    if not DATASET_PATTERN.fullmatch(name or ""):
        raise DataImportError(
            f"dataset name {name!r} is not valid (letters, digits, '.', '_', '-'; at most 64)"
        )
    root = Path(data_root)
    target = root / name
    if target.exists() and not replace:
        raise DataImportError(f"dataset {name!r} already exists at {target} (use --replace to replace it)")
    X, y, features = validate_table(read_table(source), label, declaration)
    digest = sha256_file(source)
    classes = tuple(np.unique(y).tolist()) if y is not None else ()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".import-{name}-", dir=root))
    try:
        save_dataset(tmp / "dataset.npz", LocalDataset(X, y, name=name))
        schema = {
            "dataset": name,
            "features": features,
            "label": label,
            "classes": list(classes),
            "rows": int(X.shape[0]),
            "source": {"file": source.name, "sha256": digest},
            "imported": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        (tmp / "schema.json").write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
        tmp.chmod(0o750)
        if target.exists():  # replace: the old one moves aside, then goes
            old = root / f".old-{name}-{os.getpid()}"
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ImportedDataset(name, target, int(X.shape[0]), tuple(features), label, classes, "sha256:" + digest)


def list_datasets(data_root: str | os.PathLike) -> list[dict[str, Any]]:
    """The datasets of one organisation (schema.json when the import wrote one)."""
    out = []
    root = Path(data_root)
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if d.name.startswith(".") or not (d / "dataset.npz").is_file():
            continue
        schema = json.loads((d / "schema.json").read_text()) if (d / "schema.json").is_file() else {}
        out.append(
            {
                "dataset": d.name,
                "path": str(d),
                "rows": schema.get("rows"),
                "label": schema.get("label"),
                "features": len(schema.get("features", [])) or None,
            }
        )
    return out
