"""``consortia image build``: build, check what was built, register -- and publish to the registry
(executor.images.build)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.cli.output import EXIT_NOT_FOUND
from executor.images.build import build_and_register, register
from executor.images.reference import ImageTampered, parse_reference
from executor.images.resolver import pull_record
from ledger.client import ConsortiaClient
from ledger.embedded import EmbeddedLedger


def test_register_writes_the_digest_to_the_ledger(tmp_path, consortium, recipe, bundle):
    with EmbeddedLedger(tmp_path / "ledger.sqlite", consortium) as ledger:
        client = ConsortiaClient(ledger, consortium.identity("Org2"))
        rec = register(client, recipe, bundle, image_id="avg-bundle:1")
        assert rec.digest == bundle.digest and rec.reference == bundle.reference and rec.owner == "Org2MSP"
        assert client.get_image("avg-bundle:1").algorithm == recipe.algorithm


def test_owner_publishes_and_another_organisation_pulls_by_the_ledger_digest(
    registry_addr, consortium, tmp_path
):
    """Org1 builds the sandbox bundle and publishes it (image build --registry); Org2 reads the record
    and pulls what it pins (image pull); a record pinning another digest is refused."""
    with EmbeddedLedger(tmp_path / "ledger.sqlite", consortium) as ledger:
        owner = ConsortiaClient(ledger, consortium.identity("Org1"))
        done = build_and_register(owner, "average-consensus", "sandbox", "avg:reg", registry=registry_addr)
        ref = parse_reference(done.record.reference)
        assert ref and ref.is_bundle and ref.registry == registry_addr and done.record.digest == done.digest
        other = ConsortiaClient(ledger, consortium.identity("Org2"))
        rec = other.get_image("avg:reg")
        where, digest = pull_record(rec, bundles_root=tmp_path / "org2-bundles")
        assert digest == rec.digest and Path(where).parent == tmp_path / "org2-bundles"
        forged = owner.register_image(
            "average-consensus",
            "9",
            "average-consensus",
            "sha256:" + "0" * 64,
            rec.reference,
            image_id="forged",
        )
        with pytest.raises(ImageTampered) as caught:
            pull_record(forged, bundles_root=tmp_path / "org3-bundles")
        assert "0" * 64 in str(caught.value) and rec.digest in str(caught.value)
        assert not any((tmp_path / "org3-bundles").glob("registry-*"))


def test_cli_image_build_registry_then_image_pull(registry_addr, tmp_path, monkeypatch):
    """The documented commands: the owner's `image build --registry`, another organisation's `image pull`."""
    from typer.testing import CliRunner

    from api.cli import app

    monkeypatch.setenv("CONSORTIA_CACHE", str(tmp_path / "cache"))
    runner, home = CliRunner(), str(tmp_path / "home")
    assert runner.invoke(app, ["init", "--orgs", "Org1,Org2", "--home", home]).exit_code == 0
    r = runner.invoke(
        app, ["image", "build", "average-consensus", "--registry", registry_addr, "--home", home, "--json"]
    )
    assert r.exit_code == 0, r.stderr
    built = json.loads(r.stdout)
    assert built["reference"].startswith(f"{registry_addr}/consortia/bundles/average-consensus@sha256:")
    r = runner.invoke(app, ["image", "pull", built["id"], "--org", "Org2", "--home", home, "--json"])
    assert r.exit_code == 0, r.stderr
    pulled = json.loads(r.stdout)
    assert pulled["digest"] == built["digest"] and pulled["local"].startswith(str(tmp_path / "cache"))
    r = runner.invoke(app, ["image", "pull", "nope:1", "--org", "Org2", "--home", home, "--json"])
    assert r.exit_code == EXIT_NOT_FOUND and "image nope:1 does not exist" in r.stderr
