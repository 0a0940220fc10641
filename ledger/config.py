"""The Consortia home: its one layout and its configuration file ``consortia.toml``.

A home is made by ``consortia init --orgs Org1,Org2,Org3`` (or by ``consortia demo``, which writes
the same thing into ``demo-output/consortium``). The CLI, the gateway and the node agents started
by :class:`executor.process.Platform` all take their paths from :class:`Layout`::

    <home>/
      consortia.toml          # this configuration (written by init / demo)
      crypto/                 # the consortium's identities (cryptogen layout, ledger.identity)
      ledger.db               # the embedded ledger
      data/<MSP>/<dataset>/   # each organisation's local datasets (dataset.npz)
      artifacts/<MSP>/        # each organisation's content-addressed artifact store
      state/<MSP>/            # each organisation's node-agent state (task keys, progress)
      gateways/<MSP>/         # each organisation's gateway: audit index, API token hashes
      logs/                   # node-agent logs when agents run as OS processes

``consortia.toml``::

    [consortium]
    crypto = "crypto"
    organisations = ["Org1MSP", "Org2MSP", "Org3MSP"]   # the first is the CLI's default

    [ledger]
    backend = "embedded"          # or "fabric"
    path = "ledger.db"            # the embedded ledger file
    profile = "connection.json"   # fabric: the connection profile `fabric-network/network up` wrote
    policy = "MAJORITY"
    batch_timeout = 0.01

    [paths]
    data = "data"
    artifacts = "artifacts"
    state = "state"

    [organisations.Org1MSP]       # one table per organisation
    name = "Org1"
    identity = "crypto/peerOrganizations/org1.example.com/users/User1@org1.example.com/msp"
    data = "data/Org1MSP"
    artifacts = "artifacts/Org1MSP"

    [node]                        # a home made by `consortia join`: the organisation this home is
    organisation = "Org2MSP"      # (`consortia node run --home` needs no --org)
    artifact_endpoint = "https://127.0.2.1:8443"   # its public artifact service (membership record)
    listen = "127.0.2.1:8443"     # where that service listens

Relative paths are relative to the home. Of the per-organisation keys, ``identity`` (the MSP folder
the CLI signs with as ``User1``) and ``data`` (where that organisation's datasets are) are honoured;
``artifacts`` is informative (the store is always ``<artifacts>/<MSP>``: other organisations' agents
read messages from that layout). Environment overrides: ``CONSORTIA_HOME`` (the home,
default ``./consortia-home``), ``CONSORTIA_LEDGER_BACKEND``, ``CONSORTIA_LEDGER_PATH``,
``CONSORTIA_LEDGER_PROFILE``, ``CONSORTIA_CRYPTO`` -- read, like every environment variable the
project reads, through :func:`environment` (``wire.env``, re-exported here; docs/configuration.md).

:func:`open_ledger` is the one way to open a home's ledger: the embedded file, or a Fabric gateway
connection (``ledger.fabric.gateway.FabricLedger``) from the connection profile named in
``consortia.toml``. It never creates an embedded ledger silently: a missing file is a
:class:`LedgerNotFound` naming the path and ``consortia init``, unless ``create=True``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wire.env import Environment, environment

if TYPE_CHECKING:
    from ledger.embedded import EmbeddedLedger
    from ledger.fabric.gateway import FabricLedger

__all__ = [
    "CONFIG_FILE",
    "Environment",
    "HomeError",
    "Layout",
    "LedgerNotFound",
    "Settings",
    "config_text",
    "environment",
    "home_root",
    "init_home",
    "load",
    "open_ledger",
    "write_config",
]

CONFIG_FILE = "consortia.toml"


class HomeError(Exception):
    """A Consortia home is missing, incomplete or cannot be made."""


class LedgerNotFound(HomeError):
    """The embedded ledger file of a home does not exist (and creating it was not asked for)."""


@dataclass(frozen=True)
class Layout:
    """Where things live in a home (the single definition; see the module docstring)."""

    root: Path
    ledger_file: str = "ledger.db"
    crypto_dir: str = "crypto"
    data_dir: str = "data"
    artifacts_dir: str = "artifacts"
    state_dir: str = "state"
    org_data: tuple[tuple[str, str], ...] = ()  # [organisations.<MSP>] data = ... (overrides)

    @property
    def config(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def crypto(self) -> Path:
        return self.root / self.crypto_dir

    @property
    def ledger(self) -> Path:
        return self.root / self.ledger_file

    @property
    def data_root(self) -> Path:
        return self.root / self.data_dir

    @property
    def store_root(self) -> Path:
        return self.root / self.artifacts_dir

    @property
    def state_root(self) -> Path:
        return self.root / self.state_dir

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def data(self, msp_id: str) -> Path:
        """``msp_id``'s data root: its datasets are ``<data>/<dataset name>/dataset.npz``."""
        override = dict(self.org_data).get(msp_id)
        return self.root / override if override else self.data_root / msp_id

    def artifacts(self, msp_id: str) -> Path:
        return self.store_root / msp_id

    def gateway(self, msp_id: str) -> Path:
        return self.root / "gateways" / msp_id


@dataclass(frozen=True)
class Settings:
    """A home's ``consortia.toml`` with the environment's overrides applied (made by :func:`load`)."""

    home: Path
    ledger_backend: str = "embedded"
    ledger_path: Path = field(default=Path("ledger.db"))
    policy: str = "MAJORITY"
    batch_timeout: float = 0.01
    crypto: Path = field(default=Path("crypto"))
    organisations: tuple[str, ...] = ()
    layout: Layout | None = None
    configured: bool = False  # a consortia.toml was read
    identities: tuple[tuple[str, Path], ...] = ()  # [organisations.<MSP>] identity = <MSP folder of User1>
    ledger_profile: Path | None = None  # fabric: the connection profile (connection.json)
    chaincode: str | None = None  # fabric: the chaincode name (default: the profile's)
    node: tuple[tuple[str, str], ...] = ()  # [node] organisation, artifact_endpoint, listen (consortia join)

    def node_setting(self, key: str) -> str | None:
        """``[node] key`` of consortia.toml (``organisation``, ``artifact_endpoint``, ``listen``), if set."""
        return dict(self.node).get(key) or None

    def identity_dir(self, msp_id: str) -> Path | None:
        """The MSP folder of ``msp_id``'s default user named by consortia.toml (None: cryptogen default)."""
        return dict(self.identities).get(msp_id)

    @property
    def paths(self) -> Layout:
        return self.layout or Layout(self.home)

    @property
    def default_organisation(self) -> str | None:
        """The CLI's default organisation: the home's first."""
        return self.organisations[0] if self.organisations else None


def home_root(home: str | os.PathLike[str] | None = None) -> Path:
    """``home``, else ``$CONSORTIA_HOME``, else ``./consortia-home`` (absolute)."""
    return Path(home or environment().home or "consortia-home").resolve()


def load(home: str | os.PathLike[str] | None = None) -> Settings:
    """The settings of ``home`` (see :func:`home_root`): its consortia.toml (if any) and the overrides."""
    root = home_root(home)
    env = environment()
    data: dict[str, Any] = {}
    cfg = root / CONFIG_FILE
    if cfg.exists():
        try:
            with cfg.open("rb") as fh:
                data = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise HomeError(f"{cfg} is not valid TOML: {exc}") from None
    led = data.get("ledger", {})
    con = data.get("consortium", {})
    paths = data.get("paths", {})
    backend = env.ledger_backend or led.get("backend", "embedded")
    if backend not in ("embedded", "fabric"):
        raise ValueError(f"ledger backend must be 'embedded' or 'fabric', not {backend!r}")
    orgs = data.get("organisations", {})
    if not isinstance(orgs, dict):
        raise HomeError(f"{cfg}: [organisations] must hold one table per MSP id")
    layout = Layout(
        root,
        ledger_file=env.ledger_path or led.get("path", "ledger.db"),
        crypto_dir=env.crypto or con.get("crypto", "crypto"),
        data_dir=paths.get("data", "data"),
        artifacts_dir=paths.get("artifacts", "artifacts"),
        state_dir=paths.get("state", "state"),
        org_data=tuple((m, str(t["data"])) for m, t in sorted(orgs.items()) if t.get("data")),
    )
    profile = env.ledger_profile or led.get("profile")
    return Settings(
        home=root,
        ledger_profile=root / profile if profile else None,
        chaincode=led.get("chaincode"),
        ledger_backend=backend,
        ledger_path=layout.ledger,
        policy=led.get("policy", "MAJORITY"),
        batch_timeout=float(led.get("batch_timeout", 0.01)),
        crypto=layout.crypto,
        organisations=tuple(con.get("organisations", ())),
        layout=layout,
        configured=bool(data),
        identities=tuple(
            (m, root / str(t["identity"])) for m, t in sorted(orgs.items()) if t.get("identity")
        ),
        node=tuple((k, str(v)) for k, v in sorted(data.get("node", {}).items())),
    )


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    s = str(v).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{s}"'


def config_text(
    layout: Layout,
    consortium: Any,
    backend: str = "embedded",
    policy: str = "MAJORITY",
    batch_timeout: float = 0.01,
    profile: str | os.PathLike[str] | None = None,
    tables: Collection[str] | None = None,
    node: dict[str, str] | None = None,
) -> str:
    """The ``consortia.toml`` of a home whose identities are ``consortium`` (a ledger.identity.Consortium);
    ``profile``: the Fabric connection profile of a ``backend = "fabric"`` home; ``tables``: the MSP ids
    that get an ``[organisations.<MSP>]`` table (default all); ``node``: the ``[node]`` table."""

    def rel(p: Path) -> str:
        try:
            return str(Path(p).resolve().relative_to(layout.root.resolve()))
        except ValueError:
            return str(Path(p).resolve())

    msps = list(consortium.msp_ids)
    lines = [
        "# Consortia home configuration (ledger/config.py documents every key).",
        "",
        "[consortium]",
        f"crypto = {_toml_value(layout.crypto_dir)}",
        f"organisations = {_toml_value(msps)}",
        "",
        "[ledger]",
        f"backend = {_toml_value(backend)}",
        *([f"profile = {_toml_value(str(Path(profile).resolve()))}"] if profile is not None else []),
        f"path = {_toml_value(layout.ledger_file)}",
        f"policy = {_toml_value(policy)}",
        f"batch_timeout = {_toml_value(float(batch_timeout))}",
        "",
        "[paths]",
        f"data = {_toml_value(layout.data_dir)}",
        f"artifacts = {_toml_value(layout.artifacts_dir)}",
        f"state = {_toml_value(layout.state_dir)}",
        "",
    ]
    if node:
        lines += ["[node]", *(f"{k} = {_toml_value(v)}" for k, v in node.items()), ""]
    for o in consortium.organisations:
        if tables is not None and o.msp_id not in tables:
            continue
        identity = o.path / "users" / f"User1@{o.domain}" / "msp"
        lines += [
            f"[organisations.{o.msp_id}]",
            f"name = {_toml_value(o.name)}",
            f"identity = {_toml_value(rel(identity))}",
            f"data = {_toml_value(rel(layout.data(o.msp_id)))}",
            f"artifacts = {_toml_value(rel(layout.artifacts(o.msp_id)))}",
            "",
        ]
    return "\n".join(lines)


def write_config(layout: Layout, consortium: Any, **kwargs: Any) -> Path:
    """Write ``consortia.toml`` (atomically) and create each organisation's folders."""
    layout.root.mkdir(parents=True, exist_ok=True)
    for msp in consortium.msp_ids:
        for d in (layout.data(msp), layout.artifacts(msp), layout.gateway(msp)):
            d.mkdir(parents=True, exist_ok=True)
    tmp = layout.config.with_suffix(".toml.tmp")
    tmp.write_text(config_text(layout, consortium, **kwargs))
    os.replace(tmp, layout.config)
    return layout.config


def init_home(
    home: str | os.PathLike[str] | None, organisations: Iterable[str], *, force: bool = False
) -> Settings:
    """Make a new home: crypto per organisation, ``consortia.toml``, the folders and an empty ledger.

    Refuses (:class:`HomeError`) a home that already has a configuration, crypto or ledger unless
    ``force`` (which replaces all three)."""
    import shutil

    from ledger.identity import Consortium

    names = [o.strip() for o in organisations if o.strip()]
    if not names:
        raise HomeError("name at least one organisation, e.g. --orgs Org1,Org2,Org3")
    if len(set(names)) != len(names):
        raise HomeError(f"organisation names must be distinct, got {names}")
    for n in names:
        if not n.isalnum():
            raise HomeError(f"organisation names must be letters and digits only, got {n!r}")
        if n.endswith("MSP"):
            raise HomeError(f"name organisations without the MSP suffix (it is added), got {n!r}")
    layout = Layout(home_root(home))
    existing = [p for p in (layout.config, layout.crypto, layout.ledger) if p.exists()]
    if existing and not force:
        raise HomeError(
            f"{layout.root} already holds a consortium ({', '.join(str(p) for p in existing)}); "
            f"use another --home or --force to replace it"
        )
    for p in existing:
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    consortium = Consortium.generate(layout.crypto, names)
    write_config(layout, consortium)
    settings = load(layout.root)
    open_ledger(settings, consortium, create=True).close()
    return settings


def join_home(
    home: str | os.PathLike[str] | None,
    crypto: str | os.PathLike[str],
    profile: str | os.PathLike[str],
    *,
    force: bool = False,
) -> Settings:
    """Make a home on an existing Fabric network: its identities (``crypto``, the cryptogen layout the
    network was made from) and its connection profile (``connection.json`` of ``fabric-network/network
    up``). Nothing is generated and no ledger is created; the profile must exist and the connection is
    opened on first use. Refuses (:class:`HomeError`) a home that already has a configuration unless
    ``force``."""
    from ledger.identity import Consortium

    layout_root = home_root(home)
    crypto_path, profile_path = Path(crypto).resolve(), Path(profile).resolve()
    if not profile_path.is_file():
        raise HomeError(f"no Fabric connection profile at {profile_path}")
    try:
        consortium = Consortium(crypto_path)
        if not consortium.msp_ids:
            raise FileNotFoundError(f"no organisations under {crypto_path}")
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise HomeError(f"{crypto_path} is not a consortium's crypto directory: {exc}") from exc
    layout = Layout(layout_root, crypto_dir=str(crypto_path))
    if layout.config.exists() and not force:
        raise HomeError(f"{layout.root} already holds a consortium ({layout.config}); use --force")
    write_config(layout, consortium, backend="fabric", profile=profile_path)
    return load(layout.root)


def open_ledger(
    config_or_home: Settings | Layout | str | os.PathLike[str] | None,
    consortium: Any = None,
    *,
    create: bool = False,
) -> EmbeddedLedger | FabricLedger:
    """The ledger of a home: the one factory (CLI, gateway, node agents, Platform).

    ``config_or_home`` is a :class:`Settings`, a :class:`Layout`, or a home directory (None:
    ``$CONSORTIA_HOME``), read with :func:`load`. ``consortium`` (a ``ledger.identity.Consortium``,
    default: the home's ``crypto``) holds the identities the embedded ledger checks signatures with.

    ``backend = "embedded"``: an ``EmbeddedLedger`` on the home's ledger file; a missing file is
    :class:`LedgerNotFound` unless ``create`` (``consortia init`` creates it). ``backend = "fabric"``:
    a ``FabricLedger`` from ``[ledger] profile`` (the ``connection.json`` of ``fabric-network/network
    up``); a missing profile is :class:`LedgerNotFound` (``create`` does not make a network).
    """
    if isinstance(config_or_home, Settings):
        settings = config_or_home
    elif isinstance(config_or_home, Layout):
        settings = load(config_or_home.root)
    else:
        settings = load(config_or_home)
    if settings.ledger_backend == "fabric":
        profile = settings.ledger_profile
        if profile is None:
            raise HomeError(
                f'{settings.paths.config}: backend = "fabric" needs [ledger] profile = <connection.json>'
            )
        if not profile.is_file():
            raise LedgerNotFound(
                f"no Fabric connection profile at {profile}: start the network with "
                f"`fabric-network/network up` (it writes connection.json) or fix [ledger] profile"
            )
        from ledger.fabric.gateway import FabricLedger

        return FabricLedger.from_profile(profile, settings.chaincode)
    from ledger.embedded import EmbeddedLedger

    path = settings.ledger_path
    if not path.exists() and not create:
        raise LedgerNotFound(
            f"no ledger at {path}: run `consortia init --home {settings.home} --orgs ...` "
            f"to make a consortium there (or point --home at an existing one)"
        )
    if consortium is None:
        from ledger.identity import Consortium

        consortium = Consortium(settings.crypto)
    if any(not (o.path / "peers").is_dir() for o in consortium.organisations):  # a `consortia join` home
        raise HomeError(
            f"{settings.home}: an embedded ledger endorses for every organisation in one process "
            f"and needs every peer's key; this home holds only its own (use a Fabric profile)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    return EmbeddedLedger(path, consortium, policy=settings.policy, batch_timeout=settings.batch_timeout)
