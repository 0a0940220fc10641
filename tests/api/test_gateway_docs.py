"""The gateway's documentation pages work offline and every request leaves one access-log line
(issue 16, item 7): /docs (Swagger UI) and /redoc (ReDoc) load their scripts and styles from the
gateway itself (the pinned ``fastapi-offline`` package's files), and the structured access log
promised in docs/api.md is written on ``consortia.gateway.access``."""

from __future__ import annotations

import json
import logging
import re

import pytest

ACCESS = "consortia.gateway.access"


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_reference_only_local_assets(gateways, page):
    _, client, _ = gateways["Org1MSP"]
    r = client.get(page, headers={"Authorization": ""})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "http://" not in r.text and "https://" not in r.text and "cdn" not in r.text.lower()
    assets = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    scripts = [a for a in assets if a.endswith(".js")]
    assert scripts, f"{page} loads no script"
    for url in assets:
        assert url.startswith("/") and not url.startswith("//"), url
        asset = client.get(url)
        assert asset.status_code == 200, url
        kind = asset.headers["content-type"]
        expected = {".js": "javascript", ".css": "text/css", ".png": "image/png"}[url[url.rindex(".") :]]
        assert expected in kind, (url, kind)
        assert len(asset.content) > 1000, url
    assert "/openapi.json" in r.text


def _access_lines(caplog) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == ACCESS]


def test_access_log_one_structured_line_per_request(gateways, caplog):
    _, client, token = gateways["Org2MSP"]
    caplog.set_level(logging.INFO, logger=ACCESS)
    r = client.get("/api/v1/whoami", headers={"X-Request-ID": "audit-42"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "audit-42"
    (line,) = _access_lines(caplog)
    assert line["method"] == "GET" and line["path"] == "/api/v1/whoami" and line["status"] == 200
    assert line["organisation"] == "Org2MSP" and line["identity"] == "User1@Org2MSP"
    assert line["request_id"] == "audit-42"
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    assert token not in caplog.text

    caplog.clear()
    r = client.get("/api/v1/images", headers={"Authorization": "Bearer cst_Org2MSP_" + "x" * 43})
    assert r.status_code == 401
    (line,) = _access_lines(caplog)
    assert line["status"] == 401 and line["identity"] == "-"
    assert (
        re.fullmatch(r"[0-9a-f]{32}", line["request_id"]) and r.headers["x-request-id"] == line["request_id"]
    )

    caplog.clear()
    r = client.post("/api/v1/images", content=b"{" * 2_000_000, headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    (line,) = _access_lines(caplog)
    assert line["status"] == 413 and line["method"] == "POST"
    # a request id that is not a plain token is not echoed into the log
    caplog.clear()
    client.get("/api/v1/health", headers={"X-Request-ID": "evil\nline"})
    (line,) = _access_lines(caplog)
    assert line["request_id"] != "evil\nline"


def test_served_gateway_prints_its_access_lines_to_stderr():
    """Under ``consortia serve`` nothing configures logging but uvicorn's own loggers: the gateway
    gives its access logger a stderr handler then (and only then)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}

    code = (
        "import logging, json\n"
        "from api.gateway import access_log\n"
        "access_log.ensure_handler(); access_log.ensure_handler()\n"
        "access_log.log.info(json.dumps({'event': 'request', 'status': 200}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, env=env
    )
    assert out.stderr.strip().splitlines() == ['{"event": "request", "status": 200}']
