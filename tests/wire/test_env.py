"""The one reader of environment variables (wire.env): typed, read at call time, all documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wire.env import VARIABLES, Environment, environment, values

ROOT = Path(__file__).resolve().parents[2]


def test_unset_variables_take_their_defaults():
    env = environment({})
    assert env == Environment()
    assert env.cache_root == Path.home() / ".cache" / "consortia"
    assert env.fabric_binaries == env.cache_root / "fabric"
    assert env.engine_url is None and env.numeric_profile is None
    assert env.chaincode_dispatch == "chaincode.dispatch:invoke" and env.fabric_bench_port_base == 17050


def test_variables_are_typed_and_empty_means_unset(tmp_path):
    env = environment(
        {
            "CONSORTIA_CACHE": str(tmp_path),
            "CONSORTIA_FABRIC_PORT_BASE": "20050",
            "CONSORTIA_FABRIC_KEEP": "1",
            "CI": "true",
            "DOCKER_HOST": "unix:///d.sock",
            "CONSORTIA_HOME": "",
            "CONSORTIA_NUMERIC_PROFILE": "host",
        }
    )
    assert env.cache_root == tmp_path and env.fabric_binaries == tmp_path / "fabric"
    assert env.fabric_port_base == 20050 and env.fabric_keep and env.ci
    assert env.engine_url == "unix:///d.sock" and env.home is None
    assert env.numeric_profile == "host"
    assert environment({"CONSORTIA_DOCKER_HOST": "a", "DOCKER_HOST": "b"}).engine_url == "a"
    assert not environment({"CI": "1", "CONSORTIA_FABRIC_KEEP": "yes"}).ci


def test_values_reads_the_raw_text_of_declared_variables():
    """The numeric profile's variables (algorithms.numeric_profile) as the libraries read them."""
    given = {"OPENBLAS_CORETYPE": "Nehalem", "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-FMA", "MKL_CBWR": ""}
    assert values(["OPENBLAS_CORETYPE", "GLIBC_TUNABLES", "MKL_CBWR", "UNSET"], given) == {
        "OPENBLAS_CORETYPE": "Nehalem",
        "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-FMA",
    }


def test_a_malformed_number_names_the_variable():
    with pytest.raises(ValueError, match="CONSORTIA_FABRIC_PORT_BASE"):
        environment({"CONSORTIA_FABRIC_PORT_BASE": "seven"})


def test_the_process_environment_is_read_at_call_time(monkeypatch, tmp_path):
    monkeypatch.setenv("CONSORTIA_CACHE", str(tmp_path))
    assert environment().cache_root == tmp_path
    monkeypatch.delenv("CONSORTIA_CACHE")
    assert environment().cache == None  # noqa: E711


def test_every_variable_is_a_field_and_documented():
    fields = set(Environment.__dataclass_fields__)
    assert {v.field for v in VARIABLES} == fields and len(VARIABLES) == len(fields)
    documented = set(re.findall(r"^\| `([A-Z_]+)`", (ROOT / "docs" / "configuration.md").read_text(), re.M))
    assert {v.name for v in VARIABLES} <= documented


def test_no_module_reads_os_environ_directly():
    """Only wire/env.py reads variables; the rest pass the environment on to children at most."""
    allowed = {"wire/env.py", "api/cli.py", "api/gateway.py"}
    offenders = []
    for pkg in (
        "wire",
        "chaincode",
        "ledger",
        "exchange",
        "executor",
        "algorithms",
        "network",
        "audit",
        "home",
        "api",
        "benchmarks",
    ):
        for p in (ROOT / pkg).rglob("*.py"):
            rel = p.relative_to(ROOT).as_posix()
            text = p.read_text()
            if rel not in allowed and re.search(r"os\.environ(\.get|\[)|os\.getenv", text):
                offenders.append(rel)
    assert offenders == []
