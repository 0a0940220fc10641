"""The warm worker's start-up (algorithms.task_worker.serve): what it imports before its first task."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from algorithms.task_worker import NOT_IN_IMAGE, packages_hidden
from tests.ci import require_module

ROOT = Path(__file__).resolve().parents[2]
COLLAB_RF = "algorithms.collab_rf.algorithm:CollaborativeRandomForest"


def test_hidden_packages_cannot_be_imported_while_hidden_and_imported_ones_stay(monkeypatch):
    sentinel = object()
    monkeypatch.setitem(sys.modules, "rich", sentinel)  # already imported: left alone
    monkeypatch.delitem(sys.modules, "pyarrow", raising=False)
    before = list(sys.meta_path)
    with packages_hidden(NOT_IN_IMAGE):
        import rich

        assert rich is sentinel
        with pytest.raises(ModuleNotFoundError):
            import pyarrow  # noqa: F401
        assert "pyarrow" not in sys.modules  # absent, not None (scikit-learn reads sys.modules["pandas"])
    assert sys.meta_path == before  # a task may import them (the VAE image's torch does)


def _serve_and_report(tmp_path: Path, algorithm: str, then: str = "") -> dict:
    """Run ``serve`` in a fresh interpreter until it has preloaded (STOP is already there), then
    ``then``; report what it imported."""
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "in" / "STOP").touch()  # serve preloads, sees STOP and returns
    script = (
        "import json, sys\n"
        "from algorithms.task_worker import serve\n"
        f"code = serve({str(tmp_path / 'in')!r}, {str(tmp_path / 'out')!r}, {str(tmp_path)!r}, {algorithm!r})\n"
        "preloaded = sorted(sys.modules)\n"
        f"{then}\n"
        "print(json.dumps({'code': code, 'preloaded': preloaded, 'then': locals().get('result')}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_serve_starts_without_packages_the_image_does_not_contain(tmp_path):
    """A sandbox worker runs on the host's environment, which has pandas and pyarrow (scikit-learn
    imports them at start-up if present); an image does not. The worker hides them before importing
    the algorithm, so its start-up costs what it costs in the image, and scikit-learn still works."""
    require_module("pandas")  # without it on the host there is nothing to hide
    got = _serve_and_report(
        tmp_path,
        COLLAB_RF,
        "from sklearn.preprocessing import StandardScaler\n"
        "result = StandardScaler().fit([[0.0], [2.0]]).mean_.tolist()  # looks for pandas frames\n"
        "import pandas  # a task may still import it",
    )
    assert got["code"] == 0 and got["then"] == [1.0]
    assert "sklearn.ensemble" in got["preloaded"]
    assert not [m for m in got["preloaded"] if m.split(".")[0] in ("pandas", "pyarrow")]


def test_serve_preloads_the_modules_an_algorithm_imports_lazily(tmp_path):
    """CollabDict GGM imports scikit-learn's graphical lasso inside its M-step: a warm worker imports
    it before the first task (``warm_imports``), not in the middle of a round (seconds, measured)."""
    from algorithms.collabdict.ggm import CollabDictGGM

    assert "sklearn.covariance" in CollabDictGGM.warm_imports
    got = _serve_and_report(tmp_path, "algorithms.collabdict.ggm:CollabDictGGM")
    assert got["code"] == 0
    assert "sklearn.covariance" in got["preloaded"]
