"""The shared test network (tests.support.fabric)."""

from __future__ import annotations

import socket

import pytest

from tests.support import fabric as support
from tests.support.fabric import shared_fabric


def test_each_checkout_gets_free_ports_kept_once_chosen(tmp_path, monkeypatch):
    monkeypatch.setenv("CONSORTIA_FABRIC_NET", str(tmp_path / "net"))
    monkeypatch.delenv("CONSORTIA_FABRIC_PORT_BASE", raising=False)
    # two ranges free now (fixed ones failed once in CI: a busy machine's outgoing connections take
    # ephemeral ports, 32768-60999, anywhere in a range)
    free = [
        base
        for base in support.PORT_BASES
        if support.ports_free(support.NetworkConfig(dispatch=support.TEST_DISPATCH, port_base=base))
    ][:2]
    assert len(free) == 2, "no two free port ranges on 127.0.0.1"
    monkeypatch.setattr(support, "PORT_BASES", free)
    first, second = free
    with socket.socket() as busy:  # take one port of the first range
        busy.bind(("127.0.0.1", first + 1001))
        busy.listen()
        cfg = support.test_config()
    assert cfg.net_dir == tmp_path / "net" and cfg.port_base == second
    assert cfg.dispatch == support.TEST_DISPATCH
    assert support.test_config().port_base == cfg.port_base  # kept in net/port_base


def test_default_directory_depends_on_the_checkout(monkeypatch):
    monkeypatch.delenv("CONSORTIA_FABRIC_NET", raising=False)
    d = support.network_dir()
    assert d.parent.name == "fabric-test" and len(d.name) == 10


@pytest.mark.fabric
def test_one_network_per_session_with_its_own_identities(fabric):
    again = shared_fabric()
    assert again is fabric
    assert fabric.network.is_up()
    assert [o.msp_id for o in fabric.consortium.organisations] == ["Org1MSP", "Org2MSP", "Org3MSP"]
    with fabric.ledger() as led:
        assert led.evaluate(fabric.consortium.identity("Org1"), "KV:whoami")


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_unavailable_fabric_fails_under_ci_and_skips_elsewhere(monkeypatch, ci, outcome):
    """CI runs the real network every time: a missing Fabric is a failure there, never a skip."""

    def unavailable():
        raise support.FabricUnavailable("Fabric binaries missing in /nowhere/bin: ['peer']")

    monkeypatch.setattr(support, "start_shared_network", unavailable)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="Fabric binaries missing"):
        shared_fabric()
