"""``consortia join --package``: the Consortia home of one member of a consortium without a centre
(docs/fabric.md "A consortium without a centre"), made on its own host in the home ``consortia org
init`` made there, from the members' public packages only.

What the home gets:

* its own identities, as its own CA issued them (already in ``crypto/``, untouched);
* each other member's public material from its package, in cryptogen's layout so that
  :class:`ledger.identity.Consortium` reads it unchanged: ``ca/``, ``tlsca/``, ``msp/{cacerts,
  tlscacerts,config.yaml}`` and its key-agreement certificate ``encryption/cert.pem``; never a key;
* ``crypto/consortium.json`` naming every member and no orderer organisation;
* ``fabric/profile.json``: its own peer and its own orderer, the TLS root named by a path relative to
  the profile (inside the home: nothing of anyone else's folder);
* ``consortia.toml``: the Fabric backend, this member's ``[organisations.<MSP>]`` and ``[node]``
  (its artifact service's endpoint and listen address, from its package).

Nothing is written until every package is read and checked and the consortium it makes is usable; a
failure on the way removes what this call wrote, so the home stays as ``org init`` left it and the
call can be retried."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from home.errors import HomeError
from home.layout import Layout, home_root
from home.settings import NodeTable, Settings, home_config, load, save
from ledger.identity import Consortium
from network.config import NetworkError
from network.organisation import OrganisationLayout
from network.package import OrganisationPackage, export_package, read_packages

STAGING = ".join-staging"


def _public_folder(pkg: OrganisationPackage, dst: Path) -> None:
    """``pkg``'s public material in cryptogen's layout under ``dst`` (its ``peerOrganizations/<domain>``)."""
    files = {
        Path("ca") / f"ca.{pkg.domain}-cert.pem": pkg.ca_cert,
        Path("tlsca") / f"tlsca.{pkg.domain}-cert.pem": pkg.tlsca_cert,
        Path("msp") / "cacerts" / f"ca.{pkg.domain}-cert.pem": pkg.ca_cert,
        Path("msp") / "tlscacerts" / f"tlsca.{pkg.domain}-cert.pem": pkg.tlsca_cert,
        Path("msp") / "config.yaml": pkg.node_ous,
        Path("encryption") / "cert.pem": pkg.certificates["encryption"],
    }
    for rel, text in files.items():
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        (dst / rel).write_text(text)


def join_with_packages(
    home: str | os.PathLike[str] | None,
    packages: list[str | os.PathLike[str]],
    *,
    channel: str = "consortia",
    chaincode: str = "consortia",
    data: str | os.PathLike[str] | None = None,
    artifacts: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> Settings:
    """Make the Consortia home of the member whose ``consortia org init`` home is ``home``, from the
    members' public ``packages`` (module docstring). Refused (:class:`HomeError`) when the home is not
    an organisation's, a package is not valid, or the home already has a ``consortia.toml`` (unless
    ``force``)."""
    root = home_root(home)
    try:
        org_layout = OrganisationLayout(root)
        org = org_layout.organisation()
        own = export_package(root)
        given = read_packages(packages)
    except NetworkError as exc:
        raise HomeError(str(exc)) from None
    msp = org.msp_id
    for p in given:
        if p.msp_id == msp and p.digest != own.digest:
            raise HomeError(f"the package of {msp} given is not this home's own ({p.digest} != {own.digest})")
    others = [p for p in given if p.msp_id != msp]
    if not others:
        raise HomeError("name the other members' packages (--package FILE, one per member)")
    layout = Layout(
        root,
        artifacts_dir=str(Path(artifacts).resolve()) if artifacts else "artifacts",
        org_data=((msp, str(Path(data).resolve())),) if data else (),
    )
    if layout.crypto != org_layout.crypto:
        raise HomeError(f"{layout.crypto} is not the organisation's crypto folder {org_layout.crypto}")
    if layout.config.exists() and not force:
        raise HomeError(f"{root} already holds a consortium ({layout.config}); use --force to replace it")

    peers = layout.crypto / "peerOrganizations"
    staging = root / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    made: list[Path] = []
    replaced: list[tuple[Path, Path]] = []  # (place, its earlier content kept in the staging folder)
    manifest_file = layout.crypto / Consortium.MANIFEST
    profile_file = root / "fabric" / "profile.json"

    def place(target: Path) -> None:
        """Make room at ``target``: an earlier join's file or folder (``--force``) is kept aside."""
        if target.exists():
            keep = staging / ".previous" / str(len(replaced))
            keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(target), str(keep))
            replaced.append((target, keep))
        made.append(target)

    try:
        for p in others:  # everything is checked and staged before anything is placed
            if p.domain == org.domain:
                raise HomeError(f"{p.msp_id} has this organisation's domain {org.domain}")
            _public_folder(p, staging / p.domain)
        for p in others:
            target = peers / p.domain
            place(target)
            shutil.move(str(staging / p.domain), str(target))
        manifest = {
            "base_domain": org.domain.partition(".")[2],
            "organisations": [
                {"name": q.organisation, "msp_id": q.msp_id, "domain": q.domain} for q in [own, *others]
            ],
        }
        place(manifest_file)
        manifest_file.write_text(json.dumps(manifest, indent=2, sort_keys=True))
        consortium = Consortium(layout.crypto)
        try:  # usable: its own identity and key, every member's CA, TLS CA and encryption certificate
            consortium.identity(msp)
            consortium.encryption_key(msp)
            consortium.membership()
            for o in consortium.organisations:
                consortium.encryption_certificate(o.msp_id)
        except (OSError, ValueError) as exc:
            raise HomeError(f"the joined home's crypto is incomplete: {exc}") from None
        profile: dict[str, Any] = {
            "channel": channel,
            "chaincode": chaincode,
            "organisation": org.name,
            "peers": [
                {
                    "msp_id": msp,
                    "address": org.address("peer"),
                    "tls_ca_file": os.path.relpath(org_layout.tlsca_cert(org), profile_file.parent),
                }
            ],
            "orderer": {
                "address": org.address("orderer"),
                "tls_ca_file": os.path.relpath(org_layout.tlsca_cert(org), profile_file.parent),
            },
        }
        profile_file.parent.mkdir(parents=True, exist_ok=True)
        place(profile_file)
        profile_file.write_text(json.dumps(profile, indent=2, sort_keys=True))
        for d in (layout.data(msp), layout.artifacts(msp), layout.gateway(msp)):
            d.mkdir(parents=True, exist_ok=True)
        node = NodeTable(
            organisation=msp, artifact_endpoint=own.endpoints["artifacts"], listen=org.address("artifacts")
        )
        config = home_config(
            layout, consortium, backend="fabric", profile=profile_file, tables=(msp,), node=node
        )
        save(layout, config)  # last: a home with consortia.toml is a finished one
    except BaseException:
        for path in reversed(made):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            elif path.exists():
                path.unlink()
        for target, keep in reversed(replaced):
            shutil.move(str(keep), str(target))
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return load(root)
