"""``consortia network``: its choices and defaults are the network package's own (the command line
names them without importing the package, to start fast)."""

from __future__ import annotations

import typer.main

from api.cli import app
from api.cli.network import Consensus, JoiningNode, MemberNode


def test_choices_are_the_network_packages():
    from network.channel import CONSENSUS
    from network.member import NODES

    assert tuple(c.value for c in Consensus) == CONSENSUS
    assert tuple(n.value for n in MemberNode) == NODES
    assert {n.value for n in JoiningNode} == {"orderer", "peer"}


def test_chaincode_defaults_are_the_definitions():
    from network.member import ChaincodeDefinition

    d = ChaincodeDefinition()
    group = typer.main.get_command(app).commands["network"].commands["chaincode"]  # type: ignore[attr-defined]
    for action in ("approve", "commit", "status"):
        defaults = {p.name: p.default for p in group.commands[action].params}
        assert (defaults["channel"], defaults["name"], defaults["version"], defaults["sequence"]) == (
            d.channel,
            d.name,
            d.version,
            d.sequence,
        ), action
        assert defaults["signature_policy"] == d.endorsement_policy
