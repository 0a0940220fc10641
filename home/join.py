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

What it is handed is not trusted (the "public" folders come from other organisations; a profile names
files anywhere): it copies only **regular files**, opened without following a link (``O_NOFOLLOW``,
every folder on the way checked with ``lstat``), never a symbolic link (refused, naming it); each
public file must parse as what it is (a PEM file of certificates and nothing else, ``config.yaml`` a
YAML mapping), and none may hold a private key. Files land 0600, folders 0700. The home is built in a
staging folder inside it and moved into place only once complete and loadable: a refused join leaves
nothing behind (no half-made home, no copied file), so a corrected retry works.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from cryptography import x509

from home.errors import HomeError
from home.layout import FILE_MODE, Layout, home_root, make_private_dir
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
MAX_PUBLIC_FILE = 1 << 16  #: bytes of one public file (a certificate, a NodeOU config) join reads
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.DOTALL)


def _no_link_below(top: Path, path: Path) -> None:
    """Every folder from ``top`` (excluded) down to ``path``'s parent is a real folder, not a link."""
    for folder in reversed(path.relative_to(top).parents[:-1]):
        if not stat.S_ISDIR(os.lstat(top / folder).st_mode):
            raise HomeError(f"{top / folder} is a symbolic link or not a folder: join never follows links")


def read_regular(path: Path, what: str, limit: int | None = MAX_PUBLIC_FILE) -> bytes:
    """The bytes of ``path`` if it is a regular file (opened with ``O_NOFOLLOW``: a symbolic link is
    refused, not followed) of at most ``limit`` bytes; :class:`HomeError` otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        link = os.path.islink(path)
        raise HomeError(
            f"{what} {path} is a symbolic link: join copies regular files only and never follows a link"
            if link
            else f"{what} {path} cannot be read: {exc.strerror}"
        ) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise HomeError(f"{what} {path} is not a regular file")
        data = f.read() if limit is None else f.read(limit + 1)
        if limit is not None and len(data) > limit:
            raise HomeError(f"{what} {path} is over the {limit} bytes a public file may be")
        return data


def certificates_only(data: bytes, what: str) -> bytes:
    """``data`` if it is PEM certificates and nothing else (whitespace between them); else HomeError."""
    blocks = list(_PEM_BLOCK.finditer(data))
    rest = _PEM_BLOCK.sub(b"", data)
    if not blocks or rest.strip() or any(m.group(1) != b"CERTIFICATE" for m in blocks):
        raise HomeError(f"{what} is not a PEM file of certificates only")
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        raise HomeError(f"{what} holds a certificate that does not parse") from None
    return data


def nodeou_config(data: bytes, what: str) -> bytes:
    """``data`` if it is a YAML mapping (an MSP's NodeOU ``config.yaml``) with no key material."""
    if b"PRIVATE KEY" in data:
        raise HomeError(f"{what} holds a private key")
    try:
        parsed = yaml.safe_load(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError):
        raise HomeError(f"{what} is not YAML") from None
    if not isinstance(parsed, dict):
        raise HomeError(f"{what} is not a YAML mapping (an MSP config.yaml)")
    return data


def write_private(path: Path, data: bytes, top: Path) -> None:
    """``data`` to a new file ``path`` (0600, never through a link; folders below ``top`` 0700)."""
    for folder in reversed(path.relative_to(top).parents[:-1]):
        make_private_dir(top / folder)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def copy_public(src: Path, dst: Path, patterns: tuple[str, ...]) -> None:
    """The files of ``src`` matching ``patterns`` into ``dst``: regular files only (never a link), each
    checked to be what it is named (certificates; ``config.yaml`` YAML), never a private key."""
    for pattern in patterns:
        for f in sorted(src.glob(pattern)):
            rel = f.relative_to(src)
            _no_link_below(src, f)
            data = read_regular(f, "public file")
            check = nodeou_config if f.name == "config.yaml" else certificates_only
            write_private(dst / rel, check(data, f"{f}"), dst)


def copy_own(src: Path, dst: Path) -> None:
    """This organisation's own cryptogen folder, whole: regular files (0600) and folders (0700) only;
    a symbolic link anywhere in it is refused."""
    make_private_dir(dst)
    for parent, dirs, files in os.walk(src, followlinks=False):
        here = Path(parent)
        for name in (*dirs, *files):
            if os.path.islink(here / name):
                raise HomeError(f"{here / name} is a symbolic link: join never follows links")
        for d in dirs:
            make_private_dir(dst / (here / d).relative_to(src))
        for name in files:
            write_private(dst / (here / name).relative_to(src), read_regular(here / name, "file", None), dst)


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
        write_private(dst / folder / name, (dst / cert.relative_to(src)).read_bytes(), dst)


def _check_profile(profile: Path, msp_id: str) -> dict[str, Any]:
    try:
        prof = bounded_json.loads(read_regular(profile, "connection profile", 1 << 20), str(profile))
        peers = prof["peers"]
    except (ValueError, KeyError, TypeError) as exc:
        raise HomeError(f"{profile} is not a Fabric connection profile: {exc}") from None
    if not any(isinstance(p, dict) and p.get("msp_id") == msp_id for p in peers):
        raise HomeError(f"{profile} names no peer of {msp_id}: a joined home connects through its own peer")
    return dict(prof)


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True).encode()


def _own_profile(prof: dict[str, Any], msp_id: str, folder: Path, final: Path) -> Path:
    """The home's own connection profile (written to ``folder``, to be moved to ``final``): only this
    organisation's peer, and every TLS root it names copied beside it (certificates only, never through
    a link), so the home needs no file outside it."""
    make_private_dir(folder)

    def local(entry: dict[str, Any], name: str) -> dict[str, Any]:
        out = dict(entry)
        if entry.get("tls_ca_file"):
            source = Path(entry["tls_ca_file"])
            what = f"the profile's TLS root {source}"
            write_private(folder / name, certificates_only(read_regular(source, what), what), folder)
            out["tls_ca_file"] = str(final / name)
        return out

    own = [local(p, f"{msp_id}-peer-tls-ca.pem") for p in prof["peers"] if p.get("msp_id") == msp_id]
    out = {k: v for k, v in prof.items() if k not in ("peers", "orderer", "crypto")}
    out["peers"] = own
    if isinstance(prof.get("orderer"), dict):
        out["orderer"] = local(prof["orderer"], "orderer-tls-ca.pem")
    write_private(folder / "profile.json", _json(out), folder)
    return final / "profile.json"


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
    ``ledger`` (an embedded ledger file). Refuses (:class:`HomeError`) an existing home unless ``force``,
    and anything it is handed that is not what it should be (module doc), leaving nothing behind."""
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
    made_root = not root.exists()
    make_private_dir(root)
    stage = Path(tempfile.mkdtemp(prefix=".join-", dir=root))  # 0700; moved into place when complete
    try:
        crypto = stage / "crypto"
        peers = crypto / "peerOrganizations"
        copy_own(own_dir, peers / own_dir.name)
        orgs: list[dict[str, str]] = [{"name": name, "msp_id": f"{name}MSP", "domain": own_dir.name}]
        try:
            for n in sorted(members):
                src = Path(members[n]).resolve()
                _public_org(src, peers / src.name, PUBLIC_FILES)
                orgs.append({"name": n, "msp_id": f"{n}MSP", "domain": src.name})
            _public_org(orderer_dir, crypto / "ordererOrganizations" / orderer_dir.name, ORDERER_PUBLIC)
        except FileNotFoundError as exc:
            raise HomeError(f"missing public material: {exc}") from None
        manifest = {
            "base_domain": own_dir.name.partition(".")[2],
            "orderer_domain": orderer_dir.name,
            "organisations": orgs,
        }
        write_private(crypto / Consortium.MANIFEST, _json(manifest), crypto)
        staged = Consortium(crypto)
        try:  # the home is usable: own identity and keys, everyone's CA, TLS CA and encryption certificate
            staged.identity(msp)
            staged.encryption_key(msp)
            staged.membership()
            for o in staged.organisations:
                staged.encryption_certificate(o.msp_id)
        except (OSError, ValueError) as exc:
            raise HomeError(f"the joined home's crypto is incomplete: {exc}") from None
        if prof is not None:
            profile = _own_profile(prof, msp, stage / "fabric", root / "fabric")
        # complete: into place
        for part, target in ((crypto, layout.crypto), (stage / "fabric", root / "fabric")):
            if not part.exists():
                continue
            if target.exists():
                shutil.rmtree(target)
            os.replace(part, target)
        for d in (layout.data(msp), layout.artifacts(msp), layout.gateway(msp)):
            make_private_dir(d)
        node = NodeTable(organisation=msp, artifact_endpoint=artifact_endpoint, listen=listen or None)
        backend: Literal["embedded", "fabric"] = "fabric" if profile is not None else "embedded"
        consortium = Consortium(layout.crypto)
        save(
            layout,
            home_config(layout, consortium, backend=backend, profile=profile, tables=(msp,), node=node),
        )
    except BaseException:
        shutil.rmtree(root if made_root else stage, ignore_errors=True)
        raise
    shutil.rmtree(stage, ignore_errors=True)
    return load(root)
