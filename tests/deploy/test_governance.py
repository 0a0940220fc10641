"""The consortium governs its membership, on real Fabric and real Fabric CA (issue 27, item 3;
docs/governance.md).

Four members on SmartBFT, each on a host of its own (tests/deploy/test_members.py's layout), and a fifth
organisation that made its own identities with its own CA. Only the newcomer's public package, the
update file, the signature files and blocks cross between hosts:

* Org1 proposes adding Org5 from its package; Org2 and Org3 sign: ``status`` says the MAJORITY Admins
  policies are not met and who is missing, ``submit`` refuses and sends nothing, and the same update
  forced through with two signatures is refused by Fabric itself; Org4's signature (3 of 4) makes it
  pass;
* the newcomer joins its orderer from the configuration block that made it a member (its orderer
  catches up) and its peer from the genesis block, approves the chaincode definition and publishes its
  membership record, endorsed by a majority of the five;
* the newcomer runs a 3-round collaborative-RF process with Org1 and Org2, bit-identical to the
  simulator;
* Org5 revokes one of its own identities with its CA's CRL, put into its MSP by an update signed by its
  admin alone: a transaction by that identity is refused, by its other identity it commits;
* Org2 proposes removing Org5 again, 3 of the 5 admins sign: Org5's transactions are then refused while
  the others' commit;
* ``governance history`` (and the gateway's ``membership/history``, and the explorer's membership view in
  headless Chromium) shows the four configuration blocks."""

from __future__ import annotations

import itertools
import json
import shutil
import time

import pytest

from tests.api.test_web import browser  # noqa: F401  (headless Chromium)
from tests.deploy.test_members import BFT_ORGS, _commit_everything, _members, _publish_membership

pytestmark = [pytest.mark.fabric, pytest.mark.timeout(2400)]
FIRST = 31  # hosts 127.0.31.1 ... 127.0.35.1


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    """The four founders on BFT with the chaincode committed and their homes joined; Org5 made (with two
    users) on a host of its own, its package handed to the founders and theirs to it."""
    from benchmarks.members import MemberHost, ports_free

    members = _members(tmp_path_factory.mktemp("governance"), BFT_ORGS, first=FIRST)
    try:
        members.init()
        members.create_channel("Org1")
        members.start_and_join()
        _commit_everything(members, ["Org1", "Org2", "Org3"], "Org1", ["Org4"])
        members.join_homes()
        org1 = members.hosts["Org1"]
        new = MemberHost(
            "Org5", FIRST + 4, members.root / "hosts" / "Org5", org1.port_base, org1.fabric_home, members.root
        )
        assert ports_free(new.address, new.port_base)
        new.run(
            "org",
            *("init", "--org", "Org5", "--host", new.address, "--home", str(new.home)),
            *("--port-base", str(new.port_base), "--users", "2"),
        )
        new.run("org", "export", "--home", str(new.home), "--out", str(new.package))
        for h in list(members.hosts.values()):
            shutil.copyfile(new.package, h.inbox / new.package.name)
            shutil.copyfile(h.package, new.inbox / h.package.name)
        members.hosts["Org5"] = new  # closed with the others
        yield members
    finally:
        print("governance timings", json.dumps(members.timings))
        members.close()


def _governance(h, *args: str, code: int = 0):
    return h.run("governance", *args, "--home", str(h.home), code=code)


_GATEWAY_PORTS = itertools.count(10)


def _publish_as(host, user: str) -> tuple[bool, str]:
    """A changed membership record (a gateway port not used before: a new transaction, not a read
    of the same record) submitted by ``user`` of ``host``'s organisation: (committed, error)."""
    port = next(_GATEWAY_PORTS)
    code = f"""
import json
from exchange.locations import publish_own_membership
from home.ledger import open_ledger
from home.settings import load
from ledger.client import ConsortiaClient
from ledger.errors import LedgerError
from ledger.identity import Consortium
s = load({str(host.home)!r})
cons = Consortium(s.crypto)
led = open_ledger(s, cons)
try:
    client = ConsortiaClient(led, cons.identity({host.msp!r}, {user!r}))
    try:
        rec = publish_own_membership(client, cons, s.node_setting("artifact_endpoint"), "https://{host.address}:{port}")
        print(json.dumps({{"ok": True, "version": rec.version}}))
    except LedgerError as exc:
        print(json.dumps({{"ok": False, "error": str(exc)}}))
finally:
    led.close()
"""
    got = host.python(code, timeout=180)
    assert got.returncode == 0, got.stderr[-3000:]
    out = json.loads(got.stdout.strip().splitlines()[-1])
    return bool(out["ok"]), str(out.get("error", ""))


def test_an_organisation_is_added_by_three_of_four_admins_not_by_two(consortium):
    hosts = consortium.hosts
    org1, newcomer = hosts["Org1"], hosts["Org5"]
    update = org1.out / "add-org5.update"
    proposed = _governance(
        org1, "propose", "add-org", "--package", str(org1.inbox / "org5.pkg"), "--out", str(update)
    )
    assert proposed["organisation"] == "Org5MSP"
    assert proposed["package_digest"] == json.loads(newcomer.package.read_text())["digest"]
    signatures = {}
    for org in ("Org2", "Org3", "Org4"):  # each admin on its own host, with its own key
        h = hosts[org]
        shutil.copyfile(update, h.inbox / update.name)
        signed = _governance(h, "sign", str(h.inbox / update.name), "--out", str(h.out / f"{org}.sig"))
        assert signed["changes"]["added"] == ["Org5MSP"]
        assert signed["changes"]["consenters_added"] == [f"{newcomer.address}:{newcomer.port_base}"]
        signatures[org] = org1.inbox / f"{org}.sig"
        shutil.copyfile(h.out / f"{org}.sig", signatures[org])
    for f in (update, *signatures.values()):  # what travelled: no key
        assert b"PRIVATE KEY" not in f.read_bytes()
    two = [a for org in ("Org2", "Org3") for a in ("--signature", str(signatures[org]))]
    status = org1.run("governance", "status", str(update), *two)
    assert status["signed"] == ["Org2MSP", "Org3MSP"] and not status["ready"]
    assert status["policies"]["/Channel/Application/Admins"]["met"] is False
    assert status["policies"]["/Channel/Orderer/Admins"]["met"] is False
    assert "not yet by Org1MSP, Org4MSP" in status["missing"]
    refused = _governance(org1, "submit", str(update), *two, code=1)
    assert "not submitted" in refused["message"]
    # the same two signatures sent anyway: Fabric's own policy check refuses them
    forced = _governance(org1, "submit", str(update), *two, "--force", code=1)
    assert "Fabric refused the update" in forced["message"], forced
    assert "policy" in forced["message"].lower(), forced
    print("Fabric's refusal of two signatures:", forced["message"])
    three = [*two, "--signature", str(signatures["Org4"])]
    assert org1.run("governance", "status", str(update), *three)["ready"] is True
    done = _governance(org1, "submit", str(update), *three)
    assert done["members"] == [f"Org{i}MSP" for i in range(1, 6)]
    consortium.config_block = done["config_block"]


def _until(step, seconds: float = 180):
    deadline = time.monotonic() + seconds
    while True:
        try:
            return step()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


def test_the_newcomer_joins_catches_up_and_its_transaction_commits(consortium):
    hosts = consortium.hosts
    org1, new = hosts["Org1"], hosts["Org5"]
    org1.network("channel", "fetch", "config", "--out", str(org1.out / "config.block"))
    shutil.copyfile(org1.out / "config.block", new.inbox / "config.block")
    shutil.copyfile(org1.inbox / "consortia.block", new.inbox / "consortia.block")
    others = [
        a
        for p in sorted(new.inbox.glob("*.pkg"))
        if p.name != new.package.name
        for a in ("--package", str(p))
    ]
    blocks = [
        "--block",
        str(new.inbox / "consortia.block"),
        "--config-block",
        str(new.inbox / "config.block"),
    ]
    for node in ("orderer", "peer"):
        new.network("node", "start", node)
        new.network("channel", "join", *blocks, *others, "--node", node)
    assert new.network("node", "status")["channels"] == {"consortia": ["orderer", "peer"]}
    # its orderer caught up: it delivers the configuration block that made Org5 a member
    fetched = _until(lambda: new.network("channel", "fetch", "config", "--out", str(new.root / "cfg.block")))
    assert fetched["block"] == consortium.config_block

    def committed_on_its_peer() -> None:  # its peer caught up too: the definition committed before it came
        status = new.network("chaincode", "status")
        assert (status["committed"] or {}).get("sequence") == 1, status

    _until(committed_on_its_peer)
    consortium.approve("Org5")
    new.run("join", "--home", str(new.home), *others)
    got = _publish_membership(new, deadline_s=240)
    assert got["msp"] == "Org5MSP" and got["version"] >= 1 and "Org5MSP" in got["members"]
    ok, error = _publish_as(new, "User2")  # its second user, before any revocation
    assert ok, error


def test_the_newcomer_runs_a_process_with_two_founders(consortium):
    """Org1 and Org2 take Org5's package into their homes (``join --force`` with every member's package);
    Org5, Org1 and Org2 each start their artifact service and node agent on their own host; Org1 builds
    the collaborative-RF image into the registry on its host and creates a 3-round process of the three, each
    admin consents on its own host; the process (its records endorsed by 2 of its 3 members, key-level)
    completes, watched from the newcomer's host, bit-identical to the simulator."""
    import dataclasses
    import uuid

    from benchmarks.consortium import mismatches
    from tests.e2e.conftest import collab_rf_case
    from tests.e2e.test_process import simulated

    hosts = consortium.hosts
    trio = {o: hosts[o] for o in ("Org1", "Org2", "Org5")}
    members = tuple(h.msp for h in trio.values())
    case = collab_rf_case(members)
    # the smallest useful run: three rounds, FIT, SHARE, GET
    case = dataclasses.replace(
        case, rounds=3, params={**case.params, "schedule": case.params["schedule"][:3]}
    )
    consortium.registry.up()
    for org in ("Org1", "Org2"):  # the founders' homes take the newcomer's package (README, step 4)
        h = trio[org]
        h.run("join", "--home", str(h.home), *consortium._packages(h, others_only=True), "--force")
    for h in trio.values():
        h.save_dataset(case.datasets[h.msp], "train")
        h.start_artifact_service()
        h.start_agent()
    org1 = trio["Org1"]
    image_id = f"collab-rf:g{uuid.uuid4().hex[:6]}"
    built = org1.consortia(
        "image", "build", "collab-rf", "--id", image_id, "--registry", consortium.registry.address
    )
    assert built["digest"].startswith("sha256:"), built
    pid = f"rf5-{uuid.uuid4().hex[:6]}"
    args = (pid, image_id, members, case.topology, case.rounds, "train", case.params, list(trio.values()))
    started = org1.create_process(*args)  # the image's owner creates it; each member consents on its host
    assert started["status"] == "running", started
    watched = trio["Org5"].consortia("process", "watch", pid, "--timeout", "900", timeout=1000)
    assert watched["status"] == "completed", (watched, {o: h.log("agent")[-1500:] for o, h in trio.items()})
    client = trio["Org5"].ledger_client()
    try:
        policy = client.process_endorsement(pid)
        assert (policy.organisations, policy.required) == (tuple(sorted(members)), 2)
        wrong = mismatches(client, trio, pid, simulated(case, members), case.rounds)
    finally:
        client.ledger.close()
    assert wrong == [], wrong
    for h in trio.values():  # the agents stop before Org5's identities change
        h.stop_all()


def test_an_identity_revoked_by_crl_is_refused_while_the_others_work(consortium):
    new = consortium.hosts["Org5"]
    new.run("org", "ca", "start", "--home", str(new.home))
    revoked = new.run("org", "revoke", "User2@org5.example.com", "--home", str(new.home))
    assert "BEGIN X509 CRL" in open(revoked["crl"]).read()
    update = new.out / "revoke.update"
    _governance(new, "propose", "revoke", "--out", str(update))
    signature = new.out / "revoke.sig"
    _governance(new, "sign", str(update), "--out", str(signature))
    status = new.run("governance", "status", str(update), "--signature", str(signature))
    assert status["ready"] is True and status["signed"] == ["Org5MSP"]  # its own admin alone
    assert sorted(status["policies"]) == [
        "/Channel/Application/Org5MSP/Admins",
        "/Channel/Orderer/Org5MSP/Admins",
    ]
    _governance(new, "submit", str(update), "--signature", str(signature))
    for _ in range(6):  # submit waited for its orderer; the peers apply the block within seconds
        ok, error = _publish_as(new, "User2")
        if not ok:
            break
        time.sleep(5)
    assert not ok and error, "a revoked identity's transaction still commits 30 s after the update"
    print("revoked identity refused:", error)
    assert not _publish_as(new, "User2")[0]  # and stays refused
    for _ in range(3):  # the new configuration reaches the peers within seconds
        ok, error = _publish_as(new, "User1")
        if ok:
            break
        time.sleep(5)
    assert ok, error


def test_a_member_is_removed_the_same_way(consortium):
    hosts = consortium.hosts
    org2 = hosts["Org2"]
    update = org2.out / "remove-org5.update"
    _governance(org2, "propose", "remove-org", "Org5", "--out", str(update))
    signatures = []
    for org in ("Org1", "Org3", "Org4"):  # 3 of the 5 members' admins: a majority
        h = hosts[org]
        shutil.copyfile(update, h.inbox / update.name)
        signed = _governance(h, "sign", str(h.inbox / update.name), "--out", str(h.out / f"remove-{org}.sig"))
        assert signed["changes"]["removed"] == ["Org5MSP"]
        signatures += ["--signature", str(org2.inbox / f"remove-{org}.sig")]
        shutil.copyfile(h.out / f"remove-{org}.sig", org2.inbox / f"remove-{org}.sig")
    status = org2.run("governance", "status", str(update), *signatures[:4])
    assert not status["ready"] and "2 of 5" in status["policies"]["/Channel/Application/Admins"]["detail"]
    done = _governance(org2, "submit", str(update), *signatures)
    assert done["members"] == [f"Org{i}MSP" for i in range(1, 5)]
    consortium.removal_block = done["config_block"]
    for _ in range(6):  # no longer a member: refused once the peers applied the block
        ok, error = _publish_as(hosts["Org5"], "User1")
        if not ok:
            break
        time.sleep(5)
    assert not ok and error, "a removed member's transaction still commits 30 s after the update"
    print("removed member refused:", error)
    got = _publish_membership(hosts["Org1"])  # the others go on (endorsed by 3 of the 4)
    assert got["msp"] == "Org1MSP" and "Org5MSP" in got["members"]  # its record stays on the ledger


def _gateway(host) -> str:
    """``host``'s own gateway started, and a token of its own: the token."""
    from benchmarks.deployment import free_port, listening, wait_for

    host.start_gateway(free_port(host.address))
    token = host.consortia("token", "issue")["token"]
    wait_for(lambda: listening([host.procs["gateway"].pid]), 60, f"{host.name} gateway")
    return str(token)


def _gateway_history(host, token: str) -> list:
    """``GET /api/v1/membership/history`` from ``host``'s own gateway."""
    import urllib.request

    req = urllib.request.Request(
        host.gateway_url + "/api/v1/membership/history", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def _explorer_membership(browser, host, token: str) -> list[list[str]]:
    """The rows of the explorer's membership view (headless Chromium) on ``host``'s gateway."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 60)
    browser.get(host.gateway_url + "/explorer/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(host.gateway_url + "/explorer/")
    wait.until(EC.visibility_of_element_located((By.ID, "token"))).send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#login button").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "whoami"), host.msp))
    browser.find_element(By.CSS_SELECTOR, 'a[href="#membership"]').click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#membership table.membership")))
    rows = browser.find_elements(By.CSS_SELECTOR, "#membership table.membership tr")[1:]
    logs = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert not logs, logs
    return [[td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]


def test_membership_history_shows_each_configuration_block(consortium, browser):  # noqa: F811  (fixture)
    org2 = consortium.hosts["Org2"]
    history = _governance(org2, "history")
    token = _gateway(org2)
    assert _gateway_history(org2, token) == history  # the gateway reads the same blocks
    rows = _explorer_membership(browser, org2, token)  # and the explorer shows them
    assert [int(r[0]) for r in rows] == [h["block"] for h in history]
    assert [r[2] for r in rows] == [", ".join(h["members"]) for h in history]
    assert rows[0][3] == ", ".join(f"+ Org{i}MSP" for i in range(1, 5))
    added = next(r for r in rows if r[0] == str(consortium.config_block))
    assert (
        added[3] == "+ Org5MSP"
        and added[4] == f"+ {consortium.hosts['Org5'].address}:{consortium.hosts['Org5'].port_base}"
    )
    assert [r[5] for r in rows if r[5] != "—"] == ["Org5MSP: 1 serial"]
    assert rows[-1][3] == "− Org5MSP"
    assert [h["block"] for h in history][0] == 0
    assert (
        history[0]["members"] == [f"Org{i}MSP" for i in range(1, 5)]
        and history[0]["added"] == history[0]["members"]
    )
    added = [h for h in history if h["added"] == ["Org5MSP"]]
    assert len(added) == 1 and added[0]["block"] == consortium.config_block
    assert added[0]["consenters_added"] == [
        f"{consortium.hosts['Org5'].address}:{consortium.hosts['Org5'].port_base}"
    ]
    revoked = [h for h in history if h["revoked"]]
    assert len(revoked) == 1 and list(revoked[0]["revoked"]) == ["Org5MSP"]
    assert len(revoked[0]["revoked"]["Org5MSP"]) == 1  # one serial: User2's
    last = history[-1]
    assert last["block"] == consortium.removal_block and last["removed"] == ["Org5MSP"]
    assert last["members"] == [f"Org{i}MSP" for i in range(1, 5)] and len(last["consenters"]) == 4
