"""``consortia image build NAME``: build, digest checked against what was built, register -- one step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from executor.images.bundle import build_bundle
from executor.images.recipe import IMAGES_DIR, ImageRecipe

runner = CliRunner()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CONSORTIA_CACHE", str(tmp_path / "cache"))  # never touch the shared bundles
    root = tmp_path / "home"
    assert runner.invoke(app, ["init", "--orgs", "Org1,Org2", "--home", str(root)]).exit_code == 0
    return root


def build(home, *args, code=0):
    r = runner.invoke(app, ["image", "build", *args, "--home", str(home), "--json"])
    assert r.exit_code == code, (r.stdout, r.stderr)
    return r


def test_build_registers_the_digest_that_was_built(home, tmp_path):
    out = json.loads(build(home, "average-consensus").stdout)
    expected = build_bundle(ImageRecipe.named("average-consensus"))
    assert out["digest"] == expected.digest and out["reference"] == expected.reference
    assert out["id"] == "average-consensus:1.0.0" and out["owner"] == "Org1MSP" and out["registered"] is True
    got = json.loads(runner.invoke(app, ["image", "get", out["id"], "--home", str(home), "--json"]).stdout)
    assert got["digest"] == expected.digest and got["algorithm"] == "average_consensus:AverageConsensus"
    assert json.loads(build(home, "average-consensus").stdout)["registered"] is False  # idempotent
    # a recipe given as a path, registered by another organisation under another id
    shutil.copytree(IMAGES_DIR / "average-consensus", tmp_path / "mine")
    (tmp_path / "mine" / "average_consensus.py").write_text(
        (tmp_path / "mine" / "average_consensus.py").read_text() + "\n# my change\n"
    )
    r = build(home, str(tmp_path / "mine"), code=1)  # same id, other digest: refused
    assert "is registered with digest" in r.stderr and "--id" in r.stderr
    mine = json.loads(build(home, str(tmp_path / "mine"), "--id", "avg-mine:1", "--org", "Org2").stdout)
    assert mine["digest"] != out["digest"] and mine["owner"] == "Org2MSP"


def test_an_altered_cached_bundle_is_refused_not_registered(home):
    built = build_bundle(ImageRecipe.named("average-consensus"))
    target = Path(built.location) / "image" / "average_consensus.py"
    target.chmod(0o644)
    target.write_text(target.read_text() + "\n# tampered\n")
    r = build(home, "average-consensus", code=1)
    assert "was altered" in r.stderr and "average_consensus.py" in r.stderr
    listed = json.loads(runner.invoke(app, ["image", "list", "--home", str(home), "--json"]).stdout)
    assert listed == []


def test_unknown_recipe_is_a_usage_error(home):
    r = build(home, "no-such-image", code=2)
    assert "no image recipe 'no-such-image'" in r.stderr and "collab-rf" in r.stderr


def test_a_user_algorithm_folder_builds_and_registers_under_its_tag(home, tmp_path):
    from tests.support.own_algorithm import write_folder

    folder = write_folder(tmp_path / "outside", "sklearn")
    out = json.loads(build(home, str(folder), "--tag", "ridge:1").stdout)
    expected = build_bundle(ImageRecipe.load(folder))
    assert out["id"] == "ridge:1" and out["digest"] == expected.digest and out["registered"] is True
    assert out["algorithm"] == "ridge_consensus:RidgeConsensus"
    # a requirement without its hash: refused, naming it, and nothing registered
    bad = write_folder(tmp_path / "bad", "sklearn", requirements="toolz==1.2.0\n")
    r = build(home, str(bad), "--tag", "bad:1", code=1)
    assert "'toolz==1.2.0' has no --hash" in r.stderr
    listed = json.loads(runner.invoke(app, ["image", "list", "--home", str(home), "--json"]).stdout)
    assert [i["id"] for i in listed] == ["ridge:1"]
    # an installed file of the cached bundle altered: refused (it is not the wheel's), not registered
    target = Path(expected.location) / "site" / "toolz" / "itertoolz.py"
    target.chmod(0o644)
    target.write_text(target.read_text() + "\n# swapped\n")
    r = build(home, str(folder), "--tag", "ridge:2", code=1)
    assert "was altered: site/toolz/itertoolz.py differs from the wheel toolz-1.2.0" in r.stderr
    listed = json.loads(runner.invoke(app, ["image", "list", "--home", str(home), "--json"]).stdout)
    assert [i["id"] for i in listed] == ["ridge:1"]
