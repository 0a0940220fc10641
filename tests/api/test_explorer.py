"""The explorer for auditors (issue 16, item 8): signer and signature-validity per execution checked
by the gateway, events with time and actor, human-readable record changes (``api.explorer_routes``),
and every explorer view in a real headless Chromium -- legends, axes, badges, round labels present,
no console error, screenshots that are not blank (saved under ``$CONSORTIA_TEST_ARTIFACTS/explorer``)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from tests.api.conftest import make_gateway
from tests.api.test_web import ARTIFACTS, browser, live  # noqa: F401  (headless Chromium, Org2 gateway)

WEB = Path(__file__).resolve().parents[2] / "api" / "web"


@pytest.fixture(scope="module")
def org2(world, tmp_path_factory):
    from fastapi.testclient import TestClient

    from api.gateway import create_app

    gw = make_gateway(world, "Org2MSP", tmp_path_factory.mktemp("gw-explorer"))
    token = gw.tokens.issue("User1")
    with TestClient(create_app(gw)) as tc:
        tc.headers["Authorization"] = f"Bearer {token}"
        yield tc
    gw.index.close()


def test_signatures_events_and_changes(org2, world):
    r = org2.get("/api/v1/processes/proc-0/signatures")
    assert r.status_code == 200, r.text
    body = r.json()
    sigs = body["executions"]
    assert len(sigs) == 9 and all(s["valid"] is True and s["tx_valid"] is True for s in sigs)
    assert {s["signer"] for s in sigs if s["organisation"] == "Org2MSP"} == {
        "User1@org2.example.com (Org2MSP)"
    }
    events = body["events"]
    assert events and all(e["time"].endswith("Z") and e["actor"] for e in events)
    created = [e for e in events if e["name"] == "TaskCreated" and e["subject"].endswith("/Org3MSP")]
    assert created and all(e["actor"] == "User1@org3.example.com (Org3MSP)" for e in created)

    versions = org2.get("/api/v1/processes/proc-0/executions/2/Org2MSP/changes").json()
    assert [v["actor"] for v in versions] == ["User1@org2.example.com (Org2MSP)", "Org2MSP"]
    texts = [c["text"] for c in versions[1]["changes"]]
    assert texts[0] == "status: running → completed" and texts[1].startswith("result signed: state sha256:")
    process = [c["text"] for v in org2.get("/api/v1/processes/proc-0/changes").json() for c in v["changes"]]
    assert "status: created → running" in process and "status: running → completed" in process
    assert org2.get("/api/v1/models/proc-0:Org1MSP/changes").json()[0]["changes"][0]["text"] == "created"
    assert org2.get("/api/v1/processes/nope/signatures").status_code == 404


def test_a_tampered_result_is_shown_invalid_and_diffs_read_as_text(world):
    from api.explorer_routes import describe_changes, execution_signature

    c = world.clients["Org1MSP"]
    process = c.get_process("proc-0").to_dict()
    rec = c.get_execution("proc-0", 2, "Org1MSP").to_dict()
    assert execution_signature(rec, process, lambda tx: True)["valid"] is True
    bad = copy.deepcopy(rec)
    bad["result"]["metrics"]["loss"] = 0.0
    out = execution_signature(bad, process, lambda tx: True)
    assert out["valid"] is False and "does not verify" in out["detail"]

    before = {"access": ["Org1MSP", "Org2MSP"], "status": "a", "tx_id": "1", "m": {"x": {"y": 1.0}}}
    after = {"access": ["Org1MSP", "Org3MSP"], "status": "b", "tx_id": "2", "m": {"x": {"y": 2.0}}}
    assert [d["text"] for d in describe_changes(before, after)] == [
        "status: a → b",
        "access: + Org3MSP, − Org2MSP",
        "m.x.y: 1.0 → 2.0",
    ]
    deep: dict = {}
    for _ in range(900):  # as deep as a pathological record the contracts once accepted
        deep = {"d": deep}
    assert describe_changes({"h": 1}, {"h": deep})[0]["text"].endswith("…")


def test_explorer_files_load_nothing_external():
    for f in WEB.iterdir():
        urls = {
            u for u in re.findall(r"https?://[^\s\"')]+", f.read_text()) if "www.w3.org/2000/svg" not in u
        }
        assert not urls, (f.name, urls)


def _not_blank(path: Path) -> None:
    from PIL import Image

    with Image.open(path) as img:
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is None or len(colours) > 20, f"{path} is (nearly) a single colour"
    assert colours is None or max(n for n, _ in colours) < 0.97 * sum(n for n, _ in colours)


def _shots(driver, view: str, cards: tuple[str, ...]) -> None:
    """The viewport, then each card on its own (scrolled into view), each checked not blank."""
    from selenium.webdriver.common.by import By

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"auditor-{view}.png"))
    _not_blank(ARTIFACTS / f"auditor-{view}.png")
    for card in cards:
        path = ARTIFACTS / f"auditor-{view}-{card}.png"
        driver.find_element(By.ID, card).screenshot(str(path))
        _not_blank(path)


def test_every_view_explains_itself_in_chromium(browser, live):  # noqa: F811  (fixtures)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    server, token = live
    wait = WebDriverWait(browser, 20)
    browser.get(server.url + "/explorer/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(server.url + "/explorer/")
    box = wait.until(EC.visibility_of_element_located((By.ID, "token")))
    box.send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#login button").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "whoami"), "Org2MSP"))
    text = lambda css: browser.find_element(By.CSS_SELECTOR, css).text  # noqa: E731
    every = lambda css: [e.text for e in browser.find_elements(By.CSS_SELECTOR, css)]  # noqa: E731

    # process view
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, '#processes a[data-id="proc-0"]'))).click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#signatures .badge")))
    legend = text("#timeline-legend")
    assert all(w in legend for w in ("completed", "running", "failed", "no record"))
    assert every("#timeline .x-title") == ["round"] and every("#timeline .x-tick") == ["1", "2", "3"]
    assert text("#convergence h3").startswith("Convergence: loss per round")
    assert every("#convergence .x-title") == ["round"] and every("#convergence .y-title") == ["loss"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#convergence .y-tick")) >= 2
    assert all(o in text("#convergence .legend") for o in ("Org1MSP", "Org2MSP", "Org3MSP"))
    assert "budget ε = 3" in text("#privacy .legend") and every("#privacy .y-title") == ["rigorous ε"]
    assert text("#privacy h3").startswith("Privacy: rigorous ε charged by the ledger")
    facts = text("#process-facts")  # the ledger's rigorous ε first: spent of budget, δ, the cap
    assert re.search(
        r"rigorous ε [0-9.]+ of 3 spent \(δ = 0, node scope, basic accounting; consortium cap", facts
    )
    assert every("#signatures .badge") == ["signature valid", "transaction valid"] * 9
    assert "User1@org3.example.com (Org3MSP)" in text("#signatures")
    rows = browser.find_elements(By.CSS_SELECTOR, "#events tr")[1:]
    assert rows and all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", r.text) for r in rows)
    assert "User1@org1.example.com (Org1MSP)" in text("#events")  # the process creator
    assert "status: created → running" in text("#process-history")
    browser.find_element(By.CSS_SELECTOR, '#timeline rect[data-round="2"][data-org="Org2MSP"]').click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#execution-history")))
    detail = text("#execution-detail")
    assert "signature valid" in detail and "signed by User1@org2.example.com (Org2MSP)" in detail
    assert "status: running → completed" in detail and "message from Org1MSP" in detail
    _shots(
        browser, "process", ("timeline", "convergence", "privacy", "signatures", "events", "process-history")
    )

    # model view
    browser.find_element(By.CSS_SELECTOR, '#models a[data-id="proc-0:Org1MSP"]').click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#lineage circle.node")))
    assert every("#lineage .round-label") == ["1", "2", "3"] and every("#lineage .x-title") == ["round"]
    lineage_legend = text("#lineage-legend")
    assert (
        "message" in lineage_legend and "state" in lineage_legend and "produced this model" in lineage_legend
    )
    assert "created" in text("#model-history")
    browser.find_element(By.ID, "verify").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "verify-result"), "verified"))
    _shots(browser, "model", ("model-facts", "lineage", "model-history"))

    # membership view: this gateway's ledger is the embedded one, which has no configuration blocks
    # (the view over a Fabric channel's blocks: tests/deploy/test_governance.py)
    browser.find_element(By.CSS_SELECTOR, 'a[href="#membership"]').click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#membership .hint")))
    assert text("#membership .hint") == (
        "No membership history: NOT_FOUND: this gateway's ledger is not a Fabric channel: "
        "it has no configuration blocks"
    )
    logs = [  # the membership view's 404 is the answer it shows, not an error of the page
        e
        for e in browser.get_log("browser")
        if e.get("level") == "SEVERE" and "/api/v1/membership/history" not in e.get("message", "")
    ]
    assert not logs, logs
