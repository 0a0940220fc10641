"""The web provenance explorer in a real headless Chromium (Debian's chromium + chromium-driver,
installed on first use by ``scripts/install-browser``, idempotent), on a completed process. Screenshots are kept as test
artefacts in ``$CONSORTIA_TEST_ARTIFACTS/explorer`` (default ``~/.cache/consortia/test-artifacts``)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.api.conftest import make_gateway
from tests.api.live import LiveServer

CHROMEDRIVER = "/usr/bin/chromedriver"
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = (
    Path(os.environ.get("CONSORTIA_TEST_ARTIFACTS", Path.home() / ".cache" / "consortia" / "test-artifacts"))
    / "explorer"
)


@pytest.fixture(scope="module")
def browser():
    import subprocess

    proc = subprocess.run(
        [str(ROOT / "scripts" / "install-browser")], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert Path(CHROMEDRIVER).exists() and shutil.which("chromium")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1100",
        "--no-first-run",
        "--disable-extensions",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def live(world, tmp_path_factory):
    from api.gateway import create_app

    gw = make_gateway(world, "Org2MSP", tmp_path_factory.mktemp("gw-web"))
    token = gw.tokens.issue("User1")
    with LiveServer(create_app(gw)) as server:
        yield server, token
    gw.index.close()


def shot(driver, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 5000
    return path


def test_explorer_shows_timeline_plots_matrix_lineage_and_verifies(browser, live, world):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    server, token = live
    wait = WebDriverWait(browser, 20)
    browser.get(server.url + "/")
    wait.until(EC.visibility_of_element_located((By.ID, "token")))
    browser.find_element(By.ID, "token").send_keys("cst_Org2MSP_" + "x" * 43)
    browser.find_element(By.CSS_SELECTOR, "#login button").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "login-error"), "UNAUTHENTICATED"))
    box = browser.find_element(By.ID, "token")
    box.clear()
    box.send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#login button").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "whoami"), "Org2MSP"))

    # process view: timeline of 3 rounds x 3 organisations, all completed
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, '#processes a[data-id="proc-0"]'))).click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#timeline rect.cell")))
    cells = browser.find_elements(By.CSS_SELECTOR, "#timeline rect.cell")
    assert len(cells) == 9 and all("status-completed" in c.get_attribute("class") for c in cells)
    series = browser.find_elements(By.CSS_SELECTOR, "#convergence path.series")
    assert sorted(s.get_attribute("data-org") for s in series) == ["Org1MSP", "Org2MSP", "Org3MSP"]
    assert browser.find_elements(By.CSS_SELECTOR, "#privacy line.budget")
    rows = browser.find_elements(By.CSS_SELECTOR, "#matrix table tr")
    assert len(rows) == 4  # header + one row per model
    assert [td.text for td in rows[1].find_elements(By.TAG_NAME, "td")] == ["2", "2", "2"]
    cells[4].click()  # round 2 of Org2MSP
    wait.until(EC.text_to_be_present_in_element((By.ID, "execution-detail"), "round 2"))
    shot(browser, "process-timeline")

    # model view: lineage graph and verification against the ledger
    browser.find_element(By.CSS_SELECTOR, '#models a[data-id="proc-0:Org1MSP"]').click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#lineage circle.node")))
    nodes = browser.find_elements(By.CSS_SELECTOR, "#lineage circle.node")
    assert len(nodes) == 6
    assert (
        browser.find_element(By.CSS_SELECTOR, "#lineage circle.root").get_attribute("data-id")
        == "proc-0/3/Org1MSP"
    )
    assert len(browser.find_elements(By.CSS_SELECTOR, "#lineage line.edge")) == 6
    browser.find_element(By.ID, "verify").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "verify-result"), "verified"))
    shot(browser, "model-lineage")
    logs = [
        e
        for e in browser.get_log("browser")
        if e.get("level") == "SEVERE" and "401" not in e.get("message", "")
    ]
    assert not logs, logs


@pytest.fixture(scope="module")
def live_executed(executed, tmp_path_factory):
    from api.gateway import create_app

    gw = make_gateway(executed, "Org1MSP", tmp_path_factory.mktemp("gw-web-exec"))
    token = gw.tokens.issue("User1")
    with LiveServer(create_app(gw)) as server:
        yield server, token
    gw.index.close()


def test_explorer_on_a_process_run_by_the_executor(browser, live_executed, executed):
    import json

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    server, token = live_executed
    wait = WebDriverWait(browser, 20)
    browser.execute_script("sessionStorage.clear()") if browser.current_url.startswith("http") else None
    browser.get(server.url + "/explorer/")
    box = wait.until(EC.visibility_of_element_located((By.ID, "token")))
    box.clear()
    box.send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#login button").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "whoami"), "Org1MSP"))
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, '#processes a[data-id="p-exec"]'))).click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#timeline rect.cell")))
    cells = browser.find_elements(By.CSS_SELECTOR, "#timeline rect.cell")
    assert len(cells) == 9 and all("status-completed" in c.get_attribute("class") for c in cells)
    records = json.loads(
        executed.ledger.evaluate(
            executed.consortium.identity("Org1MSP"),
            "ExecutionRecord:query",
            json.dumps({"process_id": "p-exec"}),
        )
    )
    if any(set(r["result"]["metrics"]) - {"epsilon_spent"} for r in records):
        assert len(browser.find_elements(By.CSS_SELECTOR, "#convergence path.series")) == 3
    shot(browser, "executed-process-timeline")
    browser.find_element(By.CSS_SELECTOR, '#models a[data-id="p-exec:Org1MSP"]').click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#lineage circle.node")))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#lineage circle.node")) > 3
    browser.find_element(By.ID, "verify").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "verify-result"), "verified"))
    shot(browser, "executed-model-lineage")


@pytest.fixture(scope="module")
def demo_gateway(tmp_path_factory):
    """``consortia demo --quick`` (the README's main job), then Bank2's gateway on its ledger."""
    from rich.console import Console

    from api.demo import run_demo
    from api.gateway import Gateway, create_app
    from api.index import AuditIndex
    from api.tokens import TokenStore
    from exchange.store import ArtifactStore
    from ledger.embedded import EmbeddedLedger
    from ledger.identity import Consortium

    out = tmp_path_factory.mktemp("demo")
    assert run_demo(out=out, quick=True, console=Console(quiet=True)) == 0
    work = out / "consortium"
    consortium = Consortium(work / "crypto")
    from home.settings import load

    led = EmbeddedLedger(load(work).ledger_path, consortium)  # the demo's consortium is a Consortia home
    home = tmp_path_factory.mktemp("gw-demo")
    gw = Gateway(
        led,
        consortium,
        "Bank2MSP",
        AuditIndex(home / "index.db"),
        TokenStore(home / "tokens.json", "Bank2MSP"),
        ArtifactStore.at(home / "artifacts"),
    )
    token = gw.tokens.issue("User1")
    with LiveServer(create_app(gw)) as server:
        yield server, token, json.loads((out / "report.json").read_text()), led, consortium
    gw.index.close()
    led.close()


def test_explorer_on_the_completed_demo_process(browser, demo_gateway):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    from executor.process import estimator_origins
    from ledger.client import ConsortiaClient

    server, token, report, led, consortium = demo_gateway
    wait = WebDriverWait(browser, 30)
    browser.get(server.url + "/explorer/")
    box = wait.until(EC.visibility_of_element_located((By.ID, "token")))
    box.clear()
    box.send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#login button").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "whoami"), "Bank2MSP"))
    wait.until(
        EC.element_to_be_clickable((By.CSS_SELECTOR, '#processes a[data-id="demo-collab-rf"]'))
    ).click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#timeline rect.cell")))
    orgs, matrix = estimator_origins(ConsortiaClient(led, consortium.identity("Bank2MSP")), "demo-collab-rf")
    cells = browser.find_elements(By.CSS_SELECTOR, "#timeline rect.cell")
    process = json.loads(
        led.evaluate(consortium.identity("Bank2MSP"), "LearningProcess:get", "demo-collab-rf")
    )
    assert len(cells) == process["rounds"] * len(orgs)
    assert all("status-completed" in c.get_attribute("class") for c in cells)
    rows = browser.find_elements(By.CSS_SELECTOR, "#matrix table tr")[1:]
    shown = [[int(td.text) for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]
    assert shown == matrix and sum(map(sum, shown)) > 0  # the estimator-origin matrix of the ledger
    from selenium.webdriver.support.ui import Select

    metric = Select(browser.find_element(By.ID, "metric"))
    assert metric.first_selected_option.text == "n_estimators"  # a meaningful default, not the action code
    metric.select_by_visible_text("n_shared")
    wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#convergence h3"), "n_shared per round"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#convergence path.series")) == len(orgs)
    shot(browser, "demo-process")
    browser.find_element(By.CSS_SELECTOR, '#models a[data-id="demo-collab-rf:Bank1MSP"]').click()
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#lineage circle.node")))
    assert (
        browser.find_element(By.CSS_SELECTOR, "#lineage circle.root")
        .get_attribute("data-id")
        .endswith("/Bank1MSP")
    )
    browser.find_element(By.ID, "verify").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "verify-result"), "verified"))
    shot(browser, "demo-model-lineage")
