"""``consortia join``: a Consortia home for ONE organisation of an existing consortium (issue 12, item 1).

``consortia init`` makes every organisation's crypto on one machine; on a real deployment each
organisation holds only its own keys. :func:`join_organisation` makes the home of one organisation
from

* its own MSP material: its ``peerOrganizations/<domain>`` folder as cryptogen wrote it (CA, TLS CA,
  peer, users, key-agreement pair, with their private keys) -- copied whole;
* every other organisation's **public** material only: from its ``peerOrganizations/<domain>`` folder
  (or an export of it) the certificates ``msp/cacerts/*.pem`` and ``msp/tlscacerts/*.pem`` (placed also
  where cryptogen puts them, ``ca/ca.<domain>-cert.pem`` and ``tlsca/tlsca.<domain>-cert.pem``, so
  :class:`ledger.identity.Consortium` reads them unchanged), ``msp/config.yaml`` and its key-agreement
  certificate ``encryption/cert.pem`` (needed to seal messages and models to it); never a key;
* the orderer organisation's public certificates (its CA, TLS CA and the orderer's signing and TLS CA
  certificates);
* a ledger connection: a Fabric connection profile naming this organisation's own peer (the real
  case; copied to ``fabric/profile.json`` with only that peer and its TLS roots copied beside it, so
  the home needs no file outside itself), or an embedded ledger file (only usable where the process opening it holds every endorsing
  peer's identity -- an embedded ledger endorses for all organisations in one process);
* its data root, its artifact store, and the public endpoint (and listen address) of its artifact
  service, written to the ``[node]`` table of ``consortia.toml``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from home.errors import HomeError
from home.layout import Layout, home_root
from home.settings import NodeTable, Settings, home_config, load, save
from ledger.errors import InvalidArgument
from ledger.identity import Consortium
from ledger.rules import check_endpoint
from wire import bounded_json

#: files of another organisation's folder a joined home takes (relative paths; globs)
PUBLIC_FILES = ("msp/cacerts/*.pem", "msp/tlscacerts/*.pem", "msp/config.yaml", "encryption/cert.pem")
ORDERER_PUBLIC = (
    "msp/cacerts/*.pem",
    "msp/tlscacerts/*.pem",
    "msp/config.yaml",
    "orderers/*/msp/signcerts/*.pem",
    "orderers/*/msp/cacerts/*.pem",
    "orderers/*/tls/ca.crt",
)


def _is_private(path: Path) -> bool:
    return (
        path.name == "priv_sk" or path.name.endswith(("key.pem", ".key", "_sk")) or "keystore" in path.parts
    )


def copy_public(src: Path, dst: Path, patterns: tuple[str, ...]) -> None:
    """The files of ``src`` matching ``patterns`` into ``dst``, never a private key among them."""
    for pattern in patterns:
        for f in sorted(src.glob(pattern)):
            if f.is_file() and not _is_private(f.relative_to(src)):
                target = dst / f.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, target)


def _single(folder: Path, what: str) -> Path:
    pems = sorted(folder.glob("*.pem"))
    if len(pems) != 1:
        raise HomeError(f"{folder} must hold exactly one {what} certificate (*.pem), found {len(pems)}")
    return pems[0]


def _public_org(src: Path, dst: Path, patterns: tuple[str, ...]) -> None:
    """Copy ``src``'s public certificates to ``dst`` and place its CA and TLS CA certificates where
    cryptogen puts them (``ca/ca.<domain>-cert.pem``, ``tlsca/tlsca.<domain>-cert.pem``)."""
    domain = src.name
    ca = _single(src / "msp" / "cacerts", f"{domain} CA")
    tlsca = _single(src / "msp" / "tlscacerts", f"{domain} TLS CA")
    copy_public(src, dst, patterns)
    for cert, folder, name in (
        (ca, "ca", f"ca.{domain}-cert.pem"),
        (tlsca, "tlsca", f"tlsca.{domain}-cert.pem"),
    ):
        (dst / folder).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cert, dst / folder / name)


def _check_profile(profile: Path, msp_id: str) -> dict[str, Any]:
    try:
        prof = bounded_json.loads(profile.read_text(), str(profile))
        peers = prof["peers"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HomeError(f"{profile} is not a Fabric connection profile: {exc}") from None
    if not any(isinstance(p, dict) and p.get("msp_id") == msp_id for p in peers):
        raise HomeError(f"{profile} names no peer of {msp_id}: a joined home connects through its own peer")
    return dict(prof)


def _own_profile(prof: dict[str, Any], msp_id: str, folder: Path) -> Path:
    """The home's own connection profile (``fabric/profile.json``): only this organisation's peer, and
    every TLS root it names copied into ``folder`` beside it, so the home needs no file outside it."""
    folder.mkdir(parents=True, exist_ok=True)

    def local(entry: dict[str, Any], name: str) -> dict[str, Any]:
        out = dict(entry)
        if entry.get("tls_ca_file"):
            try:
                shutil.copyfile(entry["tls_ca_file"], folder / name)
            except OSError as exc:
                raise HomeError(
                    f"the profile's TLS root {entry['tls_ca_file']} cannot be read: {exc}"
                ) from None
            out["tls_ca_file"] = str(folder / name)
        return out

    own = [local(p, f"{msp_id}-peer-tls-ca.pem") for p in prof["peers"] if p.get("msp_id") == msp_id]
    out = {k: v for k, v in prof.items() if k not in ("peers", "orderer", "crypto")}
    out["peers"] = own
    if isinstance(prof.get("orderer"), dict):
        out["orderer"] = local(prof["orderer"], "orderer-tls-ca.pem")
    path = folder / "profile.json"
    path.write_text(json.dumps(out, indent=2, sort_keys=True))
    return path


def join_organisation(
    home: str | os.PathLike[str] | None,
    name: str,
    own: str | os.PathLike[str],
    members: Mapping[str, str | os.PathLike[str]],
    orderer: str | os.PathLike[str],
    artifact_endpoint: str,
    *,
    profile: str | os.PathLike[str] | None = None,
    ledger: str | os.PathLike[str] | None = None,
    data: str | os.PathLike[str] | None = None,
    artifacts: str | os.PathLike[str] | None = None,
    listen: str = "",
    force: bool = False,
) -> Settings:
    """Make ``home`` for organisation ``name`` (e.g. ``Org2``; MSP id ``Org2MSP``) whose cryptogen folder
    is ``own``; ``members`` maps every other organisation's name to its (public) folder, named by its
    domain; ``orderer`` is the orderer organisation's folder. Exactly one of ``profile`` (Fabric) and
    ``ledger`` (an embedded ledger file). Refuses (:class:`HomeError`) an existing home unless ``force``."""
    root = home_root(home)
    own_dir, orderer_dir = Path(own).resolve(), Path(orderer).resolve()
    if (profile is None) == (ledger is None):
        raise HomeError("a joined home takes one ledger connection: --fabric-profile or --ledger")
    msp = f"{name}MSP"
    try:
        artifact_endpoint = check_endpoint(artifact_endpoint, "artifact endpoint")
    except InvalidArgument as exc:
        raise HomeError(str(exc)) from None
    layout = Layout(
        root,
        ledger_file=str(Path(ledger).resolve()) if ledger is not None else "ledger.db",
        artifacts_dir=str(Path(artifacts).resolve()) if artifacts else "artifacts",
        org_data=((msp, str(Path(data).resolve())),) if data else (),
    )
    if (layout.config.exists() or layout.crypto.exists()) and not force:
        raise HomeError(f"{root} already holds a consortium ({layout.config}); use another --home or --force")
    names = [name, *sorted(members)]
    for n in names:
        if not n.isalnum() or n.endswith("MSP"):
            raise HomeError(f"organisation names are letters and digits without the MSP suffix, got {n!r}")
    if len(set(names)) != len(names):
        raise HomeError(f"organisation names must be distinct, got {names}")
    user = own_dir / "users" / f"User1@{own_dir.name}" / "msp" / "keystore" / "priv_sk"
    if not user.is_file() or not (own_dir / "encryption" / "key.pem").is_file():
        raise HomeError(f"{own_dir} is not {name}'s own cryptogen folder with its keys (no {user})")
    prof = _check_profile(Path(profile).resolve(), msp) if profile is not None else None
    if layout.crypto.exists():
        shutil.rmtree(layout.crypto)
    peers = layout.crypto / "peerOrganizations"
    shutil.copytree(own_dir, peers / own_dir.name)
    orgs: list[dict[str, str]] = [{"name": name, "msp_id": f"{name}MSP", "domain": own_dir.name}]
    try:
        for n in sorted(members):
            src = Path(members[n]).resolve()
            _public_org(src, peers / src.name, PUBLIC_FILES)
            orgs.append({"name": n, "msp_id": f"{n}MSP", "domain": src.name})
        _public_org(orderer_dir, layout.crypto / "ordererOrganizations" / orderer_dir.name, ORDERER_PUBLIC)
    except FileNotFoundError as exc:
        raise HomeError(f"missing public material: {exc}") from None
    manifest = {
        "base_domain": own_dir.name.partition(".")[2],
        "orderer_domain": orderer_dir.name,
        "organisations": orgs,
    }
    (layout.crypto / Consortium.MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    consortium = Consortium(layout.crypto)
    try:  # the home is usable: own identity and keys, everyone's CA, TLS CA and encryption certificate
        consortium.identity(msp)
        consortium.encryption_key(msp)
        consortium.membership()
        for o in consortium.organisations:
            consortium.encryption_certificate(o.msp_id)
    except (OSError, ValueError) as exc:
        raise HomeError(f"the joined home's crypto is incomplete: {exc}") from None
    for d in (layout.data(msp), layout.artifacts(msp), layout.gateway(msp)):
        d.mkdir(parents=True, exist_ok=True)
    if prof is not None:
        profile = _own_profile(prof, msp, root / "fabric")
    node = NodeTable(organisation=msp, artifact_endpoint=artifact_endpoint, listen=listen or None)
    backend: Literal["embedded", "fabric"] = "fabric" if profile is not None else "embedded"
    save(layout, home_config(layout, consortium, backend=backend, profile=profile, tables=(msp,), node=node))
    return load(root)
