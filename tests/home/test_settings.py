"""A home's settings (home.settings: consortia.toml through pydantic-settings, with the environment's
overrides read by wire.env) and the ledger factory (home.ledger.open_ledger)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from home.create import init_home, join_home
from home.errors import ConfigError, HomeError, LedgerNotFound
from home.layout import Layout
from home.ledger import open_ledger
from home.settings import HomeConfig, NodeTable, home_config, load, save
from ledger.identity import Consortium


def test_environment_overrides_the_home_file(monkeypatch, tmp_path):
    monkeypatch.setenv("CONSORTIA_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("CONSORTIA_LEDGER_PATH", "other.db")
    s = load()
    assert s.home == tmp_path / "h" and s.ledger_path == tmp_path / "h" / "other.db"


def test_open_ledger_takes_settings_layout_or_home_and_never_creates_silently(tmp_path):
    home = tmp_path / "h"
    settings = init_home(home, ["A", "B"])
    for source in (settings, Layout(home), home, str(home)):
        open_ledger(source).close()
    settings.ledger_path.unlink()
    with pytest.raises(LedgerNotFound, match="consortia init"):
        open_ledger(home)
    open_ledger(home, create=True).close()
    assert settings.ledger_path.exists()


def test_open_ledger_fabric_needs_the_profile_named_in_the_home(tmp_path):
    home = tmp_path / "h"
    init_home(home, ["A"])
    cfg = home / "consortia.toml"
    cfg.write_text(cfg.read_text().replace('backend = "embedded"', 'backend = "fabric"'))
    with pytest.raises(HomeError, match="profile"):
        open_ledger(home)
    cfg.write_text(cfg.read_text().replace("[ledger]", '[ledger]\nprofile = "connection.json"'))
    assert load(home).ledger_profile == home / "connection.json"
    with pytest.raises(LedgerNotFound, match="connection.json"):
        open_ledger(home, create=True)


def test_join_home_writes_a_fabric_home_on_existing_identities_and_refuses_what_is_missing(tmp_path):
    made = init_home(tmp_path / "network", ["A", "B"])  # stands for the network's cryptogen output
    profile = tmp_path / "connection.json"
    with pytest.raises(HomeError, match="no Fabric connection profile"):
        join_home(tmp_path / "h", made.crypto, profile)
    profile.write_text("{}")
    with pytest.raises(HomeError, match="not a consortium's crypto directory"):
        join_home(tmp_path / "h", tmp_path / "nowhere", profile)
    settings = join_home(tmp_path / "h", made.crypto, profile)
    assert settings.ledger_backend == "fabric" and settings.ledger_profile == profile.resolve()
    assert (
        list(settings.organisations) == ["AMSP", "BMSP"]
        and Path(settings.crypto) == Path(made.crypto).resolve()
    )
    assert not settings.ledger_path.exists()  # nothing created: the network holds the ledger
    with pytest.raises(HomeError, match="already holds"):
        join_home(tmp_path / "h", made.crypto, profile)


@pytest.fixture
def home(tmp_path) -> Path:
    init_home(tmp_path / "h", ["A", "B"])
    return tmp_path / "h"


def _edit(home: Path, old: str, new: str) -> Path:
    cfg = home / "consortia.toml"
    text = cfg.read_text()
    assert old in text
    cfg.write_text(text.replace(old, new))
    return cfg


@pytest.mark.parametrize(
    "old, new, key, words",
    [
        ('backend = "embedded"', 'backnd = "embedded"', "ledger.backnd", "unknown key [ledger] backnd"),
        ('state = "state"', 'state_dir = "state"', "paths.state_dir", "did you mean 'state'?"),
        ('name = "A"', 'nmae = "A"', "organisations.AMSP.nmae", "unknown key [organisations.AMSP] nmae"),
        ("[ledger]", "[ledgers]", "ledgers", "unknown table [ledgers]"),
        ("[consortium]", 'home = "/elsewhere"\n[consortium]', "home", "unknown key home"),
    ],
)
def test_an_unknown_key_is_reported_with_the_key_and_the_file(home, old, new, key, words):
    cfg = _edit(home, old, new)
    with pytest.raises(ConfigError) as caught:
        load(home)
    assert caught.value.keys == (key,) and caught.value.file == cfg
    assert words in str(caught.value) and str(cfg) in str(caught.value)


@pytest.mark.parametrize(
    "old, new, key, words",
    [
        ("batch_timeout = 0.01", 'batch_timeout = "soon"', "ledger.batch_timeout", "valid number"),
        ("batch_timeout = 0.01", "batch_timeout = -1.0", "ledger.batch_timeout", "greater than or equal"),
        ('backend = "embedded"', 'backend = "sqlite"', "ledger.backend", "'embedded' or 'fabric'"),
        ('crypto = "crypto"', "crypto = 7", "consortium.crypto", "valid string"),
        ('name = "A"', "name = [1, 2]", "organisations.AMSP.name", "valid string"),
    ],
)
def test_a_mistyped_value_is_reported_with_the_key_and_the_file(home, old, new, key, words):
    cfg = _edit(home, old, new)
    with pytest.raises(ConfigError) as caught:
        load(home)
    assert caught.value.keys == (key,) and caught.value.file == cfg
    assert words in str(caught.value) and str(cfg) in str(caught.value)
    with pytest.raises(ConfigError):  # every door that reads the home refuses it the same way
        open_ledger(home)


def test_a_node_table_with_an_endpoint_the_contract_would_refuse_is_reported(home):
    cfg = home / "consortia.toml"
    cfg.write_text(cfg.read_text() + '\n[node]\norganisation = "AMSP"\nartifact_endpoint = "http://a:1"\n')
    with pytest.raises(ConfigError, match="https://host:port") as caught:
        load(home)
    assert caught.value.keys == ("node.artifact_endpoint",)


def test_a_file_that_is_not_toml_names_the_file(home):
    (home / "consortia.toml").write_text("[ledger\nbackend = 1\n")
    with pytest.raises(ConfigError, match="is not valid TOML") as caught:
        load(home)
    assert caught.value.file == home / "consortia.toml"


def test_a_bad_environment_override_names_the_variable(home, monkeypatch):
    monkeypatch.setenv("CONSORTIA_LEDGER_BACKEND", "sqlite")
    with pytest.raises(ConfigError, match=r"\$CONSORTIA_LEDGER_BACKEND='sqlite'") as caught:
        load(home)
    assert caught.value.keys == ("CONSORTIA_LEDGER_BACKEND",)
    monkeypatch.setenv("CONSORTIA_LEDGER_BACKEND", "fabric")
    monkeypatch.setenv("CONSORTIA_LEDGER_PROFILE", "net/connection.json")
    monkeypatch.setenv("CONSORTIA_CRYPTO", "/elsewhere/crypto")
    s = load(home)
    assert s.ledger_backend == "fabric" and s.ledger_profile == home / "net" / "connection.json"
    assert s.crypto == Path("/elsewhere/crypto")
    assert s.ledger_path == home / "ledger.db"  # what no variable overrides comes from the file


def test_only_wire_env_variables_reach_the_home(home, monkeypatch):
    """pydantic-settings' own environment source is off: a variable named like a table is ignored."""
    monkeypatch.setenv("LEDGER", '{"backend": "fabric"}')
    monkeypatch.setenv("ledger", '{"backend": "fabric"}')
    assert load(home).ledger_backend == "embedded"
    assert HomeConfig().ledger.backend == "embedded"


def test_the_written_file_reads_back_the_same(tmp_path):
    consortium = Consortium.generate(tmp_path / "crypto", ["A", "B"])
    layout = Layout(tmp_path, crypto_dir="crypto", data_dir="datasets")
    node = NodeTable(organisation="AMSP", artifact_endpoint="https://127.0.1.1:8443/")
    written = home_config(layout, consortium, backend="fabric", profile=tmp_path / "c.json", node=node)
    save(layout, written)
    raw = tomllib.loads(layout.config.read_text())
    assert raw["node"] == {"organisation": "AMSP", "artifact_endpoint": "https://127.0.1.1:8443"}
    assert raw["ledger"]["profile"] == str(tmp_path / "c.json") and "chaincode" not in raw["ledger"]
    assert raw["organisations"]["BMSP"]["data"] == "datasets/BMSP"
    settings = load(tmp_path)
    assert settings.config == written
    assert settings.paths.data("BMSP") == tmp_path / "datasets" / "BMSP"
    assert settings.identity_dir("AMSP") == (
        tmp_path / "crypto/peerOrganizations/a.example.com/users/User1@a.example.com/msp"
    )
    assert settings.node_setting("artifact_endpoint") == "https://127.0.1.1:8443"
    assert settings.node_setting("listen") is None


def test_a_home_without_a_file_takes_every_default(tmp_path):
    s = load(tmp_path / "nothing-here")
    assert s.config == HomeConfig() and s.ledger_backend == "embedded" and s.organisations == ()
    assert s.paths == Layout(tmp_path / "nothing-here")


def test_the_largest_artifact_fetched_is_a_home_setting(monkeypatch, tmp_path):
    """``[exchange] max_artifact_bytes`` (issue 33 item 3): 2 GiB by default, set in consortia.toml,
    overridden by $CONSORTIA_MAX_ARTIFACT_BYTES, refused when not a positive integer."""
    from exchange.client import DEFAULT_MAX_ARTIFACT_BYTES

    home = tmp_path / "h"
    home.mkdir()
    assert load(home).max_artifact_bytes == DEFAULT_MAX_ARTIFACT_BYTES == 2 << 30
    (home / "consortia.toml").write_text("[exchange]\nmax_artifact_bytes = 1048576\n")
    assert load(home).max_artifact_bytes == 1 << 20
    monkeypatch.setenv("CONSORTIA_MAX_ARTIFACT_BYTES", "4096")
    assert load(home).max_artifact_bytes == 4096
    monkeypatch.delenv("CONSORTIA_MAX_ARTIFACT_BYTES")
    for bad in ("0", '"big"', "-1"):
        (home / "consortia.toml").write_text(f"[exchange]\nmax_artifact_bytes = {bad}\n")
        with pytest.raises(ConfigError, match=r"\[exchange\] max_artifact_bytes"):
            load(home)
    (home / "consortia.toml").write_text("[exchange]\nmax_artefact_bytes = 1\n")
    with pytest.raises(ConfigError, match="did you mean 'max_artifact_bytes'"):
        load(home)
