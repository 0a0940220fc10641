"""The CCaaS external builder (fabric-network/builders/ccaas/bin/{detect,build,release})."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

BIN = Path(__file__).resolve().parents[2] / "fabric-network" / "builders" / "ccaas" / "bin"


def run(verb: str, *args: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / verb), *map(str, args)],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], **(env or {})},
    )


@pytest.fixture
def package(tmp_path):
    src, meta = tmp_path / "src", tmp_path / "meta"
    src.mkdir()
    meta.mkdir()
    (meta / "metadata.json").write_text(json.dumps({"type": "CCaaS", "label": "cc_1"}))
    (src / "connection.json").write_text(
        json.dumps({"address": "127.0.0.1:{{.ccport}}", "dial_timeout": "10s", "tls_required": False})
    )
    (src / "META-INF" / "statedb").mkdir(parents=True)
    (src / "META-INF" / "statedb" / "index.json").write_text("{}")
    return src, meta


def test_detect_accepts_ccaas_only(package, tmp_path):
    src, meta = package
    assert run("detect", src, meta).returncode == 0
    (meta / "metadata.json").write_text(json.dumps({"type": "golang"}))
    assert run("detect", src, meta).returncode == 1


def test_build_renders_template_and_release_places_connection(package, tmp_path):
    src, meta = package
    out, rel = tmp_path / "out", tmp_path / "rel"
    r = run("build", src, meta, out, env={"CHAINCODE_AS_A_SERVICE_BUILDER_CONFIG": '{"ccport": "9999"}'})
    assert r.returncode == 0, r.stderr
    conn = json.loads((out / "connection.json").read_text())
    assert conn == {"address": "127.0.0.1:9999", "dial_timeout": "10s", "tls_required": False}
    assert run("release", out, rel).returncode == 0
    assert json.loads((rel / "chaincode" / "server" / "connection.json").read_text()) == conn
    assert (rel / "statedb" / "index.json").is_file()


def test_build_fails_clearly_on_missing_template_value(package, tmp_path):
    src, meta = package
    r = run("build", src, meta, tmp_path / "out", env={"CHAINCODE_AS_A_SERVICE_BUILDER_CONFIG": "{}"})
    assert (
        r.returncode == 1 and "ccport" in r.stderr
    )  # the KeyError naming the value, not a half-written build


def test_usage_error_without_arguments():
    assert run("build").returncode == 2
