"""Fixtures of the executor tests: a consortium, the reference algorithm, real runtimes.

Container tests start Podman themselves (scripts/install-container-engine: installs podman,
runc, bubblewrap and debootstrap if missing, starts the Docker-API socket) and build the images
once (cached under ~/.cache/consortia, so later sessions reuse them).
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from algorithms.step import LocalDataset
from algorithms.task_runtime import save_dataset

ROOT = Path(__file__).resolve().parents[2]
AVERAGE_DIR = ROOT / "algorithm-images" / "average-consensus"


@pytest.fixture(scope="session")
def average_consensus():
    """The reference algorithm module of algorithm-images/average-consensus (host import)."""
    if str(AVERAGE_DIR) not in sys.path:
        sys.path.insert(0, str(AVERAGE_DIR))
    return importlib.import_module("average_consensus")


@pytest.fixture(scope="session")
def consortium(tmp_path_factory):
    from ledger.identity import Consortium

    return Consortium.generate(tmp_path_factory.mktemp("crypto"), ["Org1", "Org2", "Org3"])


def make_dataset(seed: int, n: int = 16, d: int = 3, shift: float = 0.0) -> LocalDataset:
    rng = np.random.default_rng(seed)
    return LocalDataset(rng.normal(size=(n, d)) + shift, name=f"synthetic-{seed}")


@pytest.fixture
def data_dir(tmp_path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    save_dataset(d / "dataset.npz", make_dataset(1))
    return d


@pytest.fixture(scope="session")
def engine_url():
    """Start Podman's Docker-API socket (installing the engine if needed)."""
    proc = subprocess.run(
        [str(ROOT / "scripts" / "install-container-engine")], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    url = proc.stdout.strip().splitlines()[-1]
    os.environ["CONSORTIA_DOCKER_HOST"] = url
    return url


@pytest.fixture(scope="session")
def engine(engine_url):
    from executor.images.engine import engine_client

    client = engine_client(engine_url)
    assert client.ping()
    return client


@pytest.fixture(scope="session")
def recipe():
    from executor.images.recipe import ImageRecipe

    return ImageRecipe.named("average-consensus")


@pytest.fixture(scope="session")
def container_image(engine, recipe):
    from executor.images.engine import build_image

    return build_image(engine, recipe)


@pytest.fixture(scope="session")
def bundle(recipe):
    from executor.images.bundle import build_bundle

    return build_bundle(recipe)


def altered_recipe(tmp_path: Path, recipe):
    """A copy of ``recipe``'s folder whose algorithm module has one byte more (another digest)."""
    from executor.images.recipe import ImageRecipe

    folder = tmp_path / "altered"
    shutil.copytree(recipe.folder, folder, ignore=shutil.ignore_patterns("__pycache__"))
    mod = folder / "average_consensus.py"
    mod.write_bytes(mod.read_bytes() + b" ")  # one byte more
    return ImageRecipe.load(folder)
