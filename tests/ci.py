"""The one place that decides whether a test that lacks something on this machine is skipped or fails.

A developer's machine may lack the Fabric binaries, the image registry (``docker-registry``),
bubblewrap, a module, or the registry package that holds a dataset: the test is skipped, with the
reason. Under ``CI=true`` (``.ci/run``) it fails instead: ``scripts/setup`` and the tests' own
install scripts provide all of them there, so a skip would report a check that never ran.
"""

from __future__ import annotations

import importlib
import shutil
from types import ModuleType
from typing import NoReturn

import pytest

from wire.env import environment


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the calling test for ``reason`` (something missing), or fail it under ``CI=true``."""
    if environment().ci:
        pytest.fail(
            f"{reason} (CI=true: this test must run; scripts/setup installs what it needs)", pytrace=False
        )
    # reported at the test's own location, as a skip mark is (pytest.skip() would name this file)
    raise pytest.skip.Exception(reason, _use_item_location=True)


def require_program(name: str, purpose: str) -> str:
    """The path of the program ``name`` on PATH; else skip (or fail under ``CI=true``)."""
    path = shutil.which(name)
    if path is None:
        skip_or_fail(f"{purpose} needs {name}, which is not on PATH")
    return path


def require_module(name: str) -> ModuleType:
    """The module ``name``, imported; else skip (or fail under ``CI=true``)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        skip_or_fail(f"module {name} is not installed: {exc}")
