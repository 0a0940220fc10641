"""``consortia algorithm new NAME --template sklearn|torch``: a working algorithm folder (docs/sdk.md).

The folder is the layout every algorithm image is built from (docs/sdk.md "An algorithm folder")::

    <folder>/image.json             name, version, "algorithm": "<module>:<Class>", "sdk", numeric profile,
                                    runtimes, base, input, parameters (the hyper-parameter schema), outputs
    <folder>/<module>.py            the algorithm, importing consortia_sdk only (plus numpy, scikit-learn, torch)
    <folder>/requirements.txt       extra requirements, pinned with hashes (empty: the base has them all)
    <folder>/README.md
    <folder>/tests/test_<module>.py it learns on synthetic data; two runs give the same bytes

The files come from ``templates/<template>/`` and ``templates/common/`` (``string.Template`` text).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from algorithms.numeric_profile import PROFILE
from algorithms.step import SDK_VERSION

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")  #: an image name: lower-case words and dashes
MAX_NAME = 48


class ScaffoldError(ValueError):
    """The folder cannot be written (bad name, unknown template, existing folder); nothing was written."""


_ARRAY = {"type": "ndarray", "dtypes": ["<f8"], "ndim": [1]}
_ANY_ARRAY = {"type": "ndarray", "dtypes": ["<f8"], "ndim": [1, 2]}


@dataclass(frozen=True)
class TemplateKind:
    """What differs between the templates: the base image, its packages, the hyper-parameter schema, the
    payloads' declared schema."""

    summary: str
    base: str
    base_packages: str
    parameters: dict[str, dict[str, Any]]
    payload: dict[str, Any]


TEMPLATES: dict[str, TemplateKind] = {
    "sklearn": TemplateKind(
        summary="Collaborative logistic regression: scikit-learn's SGDClassifier (log loss) on each "
        "organisation's rows, coefficients averaged with the neighbours' every round.",
        base="python",
        base_packages="numpy, scipy and scikit-learn (the platform's pinned versions)",
        parameters={
            "epochs": {
                "type": "integer",
                "default": 5,
                "minimum": 1,
                "description": "local SGD epochs per round",
            },
            "learning_rate": {
                "type": "number",
                "default": 0.05,
                "exclusive_minimum": 0,
                "description": "constant SGD step size",
            },
            "alpha": {"type": "number", "default": 0.0001, "minimum": 0, "description": "L2 penalty"},
        },
        payload={
            "type": "object",
            "required": ["coef", "intercept"],
            "properties": {"coef": _ARRAY, "intercept": _ARRAY},
        },
    ),
    "torch": TemplateKind(
        summary="A small PyTorch network (one hidden layer) trained with local epochs of SGD on each "
        "organisation's rows, weights averaged with the neighbours' every round (federated averaging on "
        "the complete graph).",
        base="torch",
        base_packages="torch (CPU) besides numpy, scipy and scikit-learn (the platform's pinned versions)",
        parameters={
            "hidden": {"type": "integer", "default": 16, "minimum": 1, "description": "hidden units"},
            "epochs": {
                "type": "integer",
                "default": 5,
                "minimum": 1,
                "description": "local epochs per round",
            },
            "batch_size": {"type": "integer", "default": 16, "minimum": 1, "description": "mini-batch rows"},
            "learning_rate": {
                "type": "number",
                "default": 0.1,
                "exclusive_minimum": 0,
                "description": "SGD step size",
            },
        },
        payload={
            "type": "object",
            "required": ["weights"],
            "properties": {"weights": {"type": "object", "additional": _ANY_ARRAY}},
        },
    ),
}


@dataclass(frozen=True)
class Scaffold:
    """What ``algorithm new`` wrote."""

    folder: Path
    name: str
    module: str
    cls: str
    template: str
    files: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "name": self.name,
            "algorithm": f"{self.module}:{self.cls}",
            "template": self.template,
            "sdk": SDK_VERSION,
            "files": list(self.files),
        }


def names(name: str) -> tuple[str, str]:
    """(module, class) of an algorithm called ``name``: ``my-model`` -> (``my_model``, ``MyModel``);
    :class:`ScaffoldError` if ``name`` is not an image name or its module would shadow an installed one."""
    if not NAME_PATTERN.fullmatch(name or "") or len(name) > MAX_NAME:
        raise ScaffoldError(
            f"algorithm name {name!r} must be lower-case letters and digits in words joined by '-', "
            f"starting with a letter, at most {MAX_NAME} characters (e.g. fraud-mlp)"
        )
    module = name.replace("-", "_")
    if module in sys.stdlib_module_names or importlib.util.find_spec(module) is not None:
        raise ScaffoldError(
            f"algorithm name {name!r} would make a module {module!r} that hides the installed module of that "
            "name; choose another name"
        )
    return module, "".join(part.capitalize() for part in name.split("-"))


def image_json(name: str, module: str, cls: str, kind: TemplateKind) -> dict[str, Any]:
    """The folder's image.json (module doc)."""
    bound = {"max_bytes": 1 << 20, "schema": kind.payload}
    return {
        "name": name,
        "version": "0.1.0",
        "algorithm": f"{module}:{cls}",
        "sdk": SDK_VERSION,
        "numeric_profile": PROFILE.id,
        "description": kind.summary,
        # the torch base has no container image (executor.images.recipe.TORCH_CONTAINER_REFUSED)
        "runtimes": ["sandbox"] if kind.base == "torch" else ["container", "sandbox"],
        "base": kind.base,
        "input": {"features": "numeric", "label": True, "classes": [0, 1]},
        "parameters": kind.parameters,
        "outputs": {"message": bound, "model": bound, "raw_rows": False},
    }


def new_folder(name: str, template: str, parent: Path) -> Scaffold:
    """Write the algorithm folder ``parent/name`` from ``template`` (all files, or nothing: a folder that
    exists is refused)."""
    module, cls = names(name)
    if template not in TEMPLATES:
        raise ScaffoldError(f"unknown template {template!r} (known: {', '.join(sorted(TEMPLATES))})")
    kind = TEMPLATES[template]
    folder = Path(parent).expanduser().resolve() / name
    if folder.exists():
        raise ScaffoldError(f"{folder} already exists; choose another name or --dir")
    values = {
        "name": name,
        "module": module,
        "cls": cls,
        "sdk": SDK_VERSION,
        "base": kind.base,
        "base_packages": kind.base_packages,
        "summary": kind.summary,
    }

    def render(source: str) -> str:
        return Template((TEMPLATES_DIR / source).read_text()).substitute(values)

    files = {
        "image.json": json.dumps(image_json(name, module, cls, kind), indent=2) + "\n",
        f"{module}.py": render(f"{template}/algorithm.py.tmpl"),
        "requirements.txt": render("common/requirements.txt.tmpl"),
        "README.md": render("common/README.md.tmpl"),
        f"tests/test_{module}.py": render("common/test_algorithm.py.tmpl"),
    }
    (folder / "tests").mkdir(parents=True)
    for rel, text in files.items():
        (folder / rel).write_text(text)
    return Scaffold(folder, name, module, cls, template, tuple(files))
