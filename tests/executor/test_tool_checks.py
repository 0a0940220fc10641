"""Every runtime and command checks its tools before use and says what is missing and how to
install it (issue 13): the sandbox runtime without bubblewrap, the demo without bubblewrap, and
scripts/install-system-tools when a package cannot be installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from executor.errors import RuntimeUnavailable
from executor.runtimes.base import Limits
from executor.runtimes.sandbox import SandboxRuntime
from executor.runtimes.tools import ToolMissing, find_tool

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def path_without_bwrap(tmp_path, monkeypatch) -> str:
    """A PATH with python and the usual tools, but no bwrap anywhere on it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sh", "env", "id", "dirname", "cat", "mkdir"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    path = str(bin_dir)
    monkeypatch.setenv("PATH", path)
    assert shutil.which("bwrap") is None
    return path


def test_find_tool_names_the_tool_and_the_package(path_without_bwrap):
    with pytest.raises(ToolMissing) as err:
        find_tool("bwrap", "bubblewrap", "the sandbox runtime")
    msg = str(err.value)
    assert "bwrap" in msg and "apt-get install bubblewrap" in msg and "scripts/setup" in msg
    assert isinstance(err.value, RuntimeUnavailable) and err.value.code == "TOOL_MISSING"


def test_sandbox_runtime_without_bwrap_raises_a_clear_error_not_permission_error(
    tmp_path, path_without_bwrap
):
    rt = SandboxRuntime()
    assert rt.available() is False
    with pytest.raises(ToolMissing, match="apt-get install bubblewrap"):
        rt.check()
    # the warm workers' path (spawn) used to run Popen(['', ...]) -> PermissionError: ''
    with pytest.raises(ToolMissing, match="bubblewrap"):
        rt.spawn(tmp_path, [], Limits(), ["true"])
    with pytest.raises(ToolMissing, match="bubblewrap"):
        rt.run("sha256:" + "0" * 64, None, bundle_dir=tmp_path)  # type: ignore[arg-type]


def test_demo_without_bwrap_stops_at_once_with_one_line(tmp_path, path_without_bwrap):
    env = {**os.environ, "PATH": path_without_bwrap, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "api.cli", "demo", "--quick", "--out", str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - t0
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2, out
    assert out.count("\n") == 0, out  # one line, even in 80 columns
    assert "bwrap" in out and "apt-get install bubblewrap" in out, out
    assert "PermissionError" not in out
    assert elapsed < 60  # before any data or image work
    assert not (tmp_path / "out" / "ledger.sqlite").exists()


def test_install_system_tools_names_what_it_could_not_install(tmp_path):
    """Not root, no sudo, nothing installed: the last line names every missing package."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "mkdir", "cat"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    (bin_dir / "id").write_text("#!/bin/bash\necho 1000\n")
    (bin_dir / "id").chmod(0o755)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "CONSORTIA_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [str(bin_dir / "bash"), str(ROOT / "scripts" / "install-system-tools")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("[setup] could not install:"), proc.stderr
    for pkg in (
        "bubblewrap",
        "podman",
        "runc",
        "debootstrap",
        "chromium",
        "chromium-driver",
        "git",
        "xz-utils",
        "python3-venv",
    ):
        assert f" {pkg}" in last, last
    assert "not root and no password-less sudo" in last


def test_install_system_tools_does_nothing_when_everything_is_there(tmp_path):
    """On this machine (scripts/setup ran) every tool is present: no apt-get, exit 0, silent."""
    env = {**os.environ, "CONSORTIA_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [str(ROOT / "scripts" / "install-system-tools")], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and not (tmp_path / "cache" / "apt.log").exists()


def test_scripts_demo_on_a_machine_without_the_tools_stops_at_once_with_one_line(tmp_path):
    """The README's `scripts/demo` where nothing can be installed (not root, no sudo, no bwrap):
    one line naming what to install, exit 1, before any Python set-up (issue 13, "Must show")."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "mkdir", "cat", "tail", "sha256sum", "cut"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    (bin_dir / "id").write_text("#!/bin/bash\necho 1000\n")
    (bin_dir / "id").chmod(0o755)
    cache = tmp_path / "cache"
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "CONSORTIA_CACHE": str(cache)}
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(bin_dir / "bash"), str(ROOT / "scripts" / "demo"), "--quick"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("[setup] could not install:") and "bubblewrap" in lines[-1], proc.stderr
    assert "apt-get install" in lines[-1]
    assert time.monotonic() - t0 < 30
    assert not (cache / "venv").exists()  # stopped before the Python set-up
