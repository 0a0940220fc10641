"""``consortia demo --quick`` (api.demo.run_demo): completes, every check passes, and the report it
writes says so with figures taken from the ledger."""

from __future__ import annotations

import io
import json
import re

from rich.console import Console

from api.demo import run_demo


def test_unknown_backend_or_runtime_is_refused(tmp_path):
    assert run_demo(tmp_path, quick=True, backend="nowhere", console=Console(quiet=True)) == 2
    assert run_demo(tmp_path, quick=True, runtime="inprocess", console=Console(quiet=True)) == 2


def test_quick_demo_completes_verified_and_writes_its_report(tmp_path):
    screen = io.StringIO()
    assert run_demo(tmp_path, quick=True, console=Console(file=screen, width=80)) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    orgs = report["organisations"]
    # its tables show whole ids and digests, even on a narrow terminal (they can be copied)
    printed, written = screen.getvalue(), (tmp_path / "report.md").read_text()
    assert "…" not in printed
    for o in orgs:
        p = report["provenance"][o]
        for whole in (o, f"{report['process_id']}:{o}", p["model"], p["data_commitments"][0]):
            assert whole in printed and whole in written
    assert len(orgs) == 3 and report["bit_identical_to_simulator"] is True
    # every member's consent is shown before the process starts (issue 33)
    assert "consent (from the ledger)" in printed and "terms digest accepted by every member:" in printed
    assert re.search(r"accepted by every member:\nsha256:[0-9a-f]{64}\n", printed)
    assert printed.count("accepted") >= len(orgs) + 1 and "(admin)" in printed
    assert all(report["verification"][o]["ok"] for o in orgs)
    # uneven split of real data; every organisation ran every round with the pinned image
    sizes = [report["split"][o][0] for o in orgs]
    assert len(set(sizes)) == len(sizes)
    for o in orgs:
        p = report["provenance"][o]
        assert p["records"] == report["rounds"] and p["image_digest"] == [report["image"]["digest"]]
        assert len(p["data_commitments"]) == 1  # one dataset per organisation
    assert len({report["provenance"][o]["data_commitments"][0] for o in orgs}) == len(orgs)
    # the origin matrix counts each model's estimators: row sums = model sizes on the ledger
    assert [sum(r) for r in report["estimator_origins"]] == [
        report["provenance"][o]["estimators"] for o in orgs
    ]
    assert all(0.0 <= report["quality"][k][o]["bacc"] <= 1.0 for k in ("audited", "alone") for o in orgs)
    # what collaboration bought each member, from its signed result (equal to the simulator's: checked in
    # bit_identical_to_simulator), printed and written
    assert report["validation_fraction"] == 0.2 and sorted(report["gains"]) == sorted(orgs)
    assert "what collaboration bought each member" in printed and "What collaboration bought" in written
    for o, g in report["gains"].items():
        assert g["gain"] == g["collaborative"] - g["isolated"] and g["negative"] == (g["gain"] < 0)
        assert f"{g['gain']:+.3f}" in printed and g["rows"] >= 1
    for name in ("report.md", "quality.png", "estimator_origins.png"):
        assert (tmp_path / name).stat().st_size > 0
    # the demo's consortium is a Consortia home: the CLI opens it with --home alone, acting (by
    # default) for the home's first organisation, and sees the completed process
    from typer.testing import CliRunner

    from api.cli import app

    result = CliRunner().invoke(app, ["process", "list", "--home", str(tmp_path / "consortium"), "--json"])
    assert result.exit_code == 0, result.stderr
    listed = json.loads(result.stdout)
    assert [(p["id"], p["status"], p["creator"]) for p in listed] == [
        (report["process_id"], "completed", orgs[0])
    ]


def test_demo_help_offers_only_what_run_demo_accepts():
    """The README and `--help` must not advertise an option the code rejects (issue 13)."""
    from typer.testing import CliRunner

    from api.cli import app

    out = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "200"}).output
    assert "--runtime" in out and "sandbox" in out and "container" in out
    assert "inprocess" not in out
