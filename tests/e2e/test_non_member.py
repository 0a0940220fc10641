"""What a non-member organisation can read of a learning process on the embedded host (issue 32;
docs/confidentiality.md "What a non-member can read, measured"): a DPSDA process with a privacy budget
among Org1 and Org2 of a 3-organisation channel, its confidential values as Org1 reads them turned into
needles (:mod:`audit.exposure`), and a byte search of Org3's view (the ledger file and Org3's private
store) and of Org1's view (the ledger file and Org1's private store: the positive control).

``PRIVATE_KINDS`` holds the kinds a process keeps in its members' private collections: none of their
values may be in Org3's files. Every other kind is still public: the test asserts that Org3's files hold
every value of it (the leak as it stands, stated). When a kind moves into the collections, it moves into
``PRIVATE_KINDS`` and nothing else here changes."""

from __future__ import annotations

import pytest

from audit.exposure import KINDS, files_of, process_needles, search
from executor.node.supervisor import run_process
from executor.runtimes.sandbox import SandboxRuntime
from ledger.embedded.store import private_store_path
from tests.e2e.conftest import dpsda_case
from tests.e2e.test_process import start

#: the kinds kept in the members' private collections (the rest is still in every block)
PRIVATE_KINDS: frozenset[str] = frozenset(
    {"hyperparameters", "privacy_budget", "metrics", "epsilon", "data_commitments", "recipients", "model"}
)
MEMBERS = ("Org1MSP", "Org2MSP")


@pytest.fixture(scope="module")
def finished(tmp_path_factory, consortium):
    """The process run to completion; its needles and each organisation's view searched."""
    from home.platform import Platform
    from ledger.embedded import EmbeddedLedger

    root = tmp_path_factory.mktemp("non-member")
    path = root / "ledger.sqlite"
    platform = Platform(EmbeddedLedger(path, consortium), consortium, root, ledger_path=path)
    try:
        case = dpsda_case(MEMBERS, budget=5.0, rounds=3)
        client, _ = start(platform, case, "p-nm", orgs=MEMBERS)
        out = run_process(platform, "p-nm", SandboxRuntime, orgs=MEMBERS)
        assert out.status == "completed", (out.reason, out.agent_errors)
        models = [m for m in client.list_models() if m.process_id == "p-nm"]
        needles = process_needles(client.get_process("p-nm"), client.query_executions("p-nm"), models)
    finally:
        platform.ledger.close()  # the WAL is checkpointed into the file
    views = {
        msp: search(files_of([path, private_store_path(path, msp)]), needles)
        for msp in ("Org1MSP", "Org3MSP")
    }
    return needles, views


def test_every_kind_has_needles(finished):
    needles, _ = finished
    counts = needles.count_by_kind()
    assert all(counts[k] > 0 for k in KINDS), (counts, needles.skipped_by_reason())
    # too short or shared values are skipped, each with its reason
    assert all(s.reason for s in needles.skipped)


def test_a_members_files_hold_every_value(finished):
    """The positive control: the needles are right, so a count of zero elsewhere means something."""
    needles, views = finished
    assert views["Org1MSP"].hits_by_kind() == needles.count_by_kind()


@pytest.mark.parametrize("kind", KINDS)
def test_what_the_non_members_files_hold(finished, kind):
    needles, views = finished
    got = views["Org3MSP"].hits_by_kind()[kind]
    if kind in PRIVATE_KINDS:
        assert got == 0, views["Org3MSP"].found[kind]
    else:  # still public: every value of it is in Org3's files
        assert got == needles.count_by_kind()[kind] > 0
