"""A home's settings: its ``consortia.toml`` with the environment's overrides (docs/configuration.md).

:class:`HomeConfig` is the file's schema, one pydantic model per table. It is read by pydantic-settings
from two sources, highest priority first: the environment's overrides (``CONSORTIA_LEDGER_BACKEND``,
``CONSORTIA_LEDGER_PATH``, ``CONSORTIA_LEDGER_PROFILE``, ``CONSORTIA_CRYPTO``, as
:func:`wire.env.environment` reads them -- the one reader of environment variables), then the TOML
file (pydantic-settings' ``TomlConfigSettingsSource``, ``tomllib``). Every table refuses keys it does
not define, so a misspelt key or a value of the wrong type is a :class:`~home.errors.ConfigError`
naming the key and the file (or the variable), never a silently ignored setting. The same schema
validates what :func:`save` writes (with ``tomli-w``).

:func:`load` gives the :class:`Settings` of a home: its configuration resolved against the home's
folder (absolute paths, the :class:`~home.layout.Layout`, the default organisation).
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from exchange.client import DEFAULT_MAX_ARTIFACT_BYTES
from executor.consent import ConsentPolicy
from home.errors import ConfigError
from home.layout import CONFIG_FILE, FILE_MODE, Layout, home_root, make_private_dir
from ledger.errors import InvalidArgument
from ledger.rules import check_endpoint
from wire.env import VARIABLES, Environment, environment

if TYPE_CHECKING:
    from ledger.identity import Consortium

__all__ = [
    "OVERRIDES",
    "ConsortiumTable",
    "ExchangeTable",
    "HomeConfig",
    "LedgerTable",
    "NodeTable",
    "OrganisationTable",
    "PathsTable",
    "Settings",
    "home_config",
    "load",
    "save",
    "write_config",
]


class Table(BaseModel):
    """One table of ``consortia.toml``: its keys are the fields; any other key is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ConsortiumTable(Table):
    """``[consortium]``."""

    crypto: str = Field(default="crypto", description="The consortium's identities (cryptogen layout).")
    organisations: tuple[str, ...] = Field(
        default=(), description="The MSP ids of the consortium; the first is the CLI's default organisation."
    )


class LedgerTable(Table):
    """``[ledger]``."""

    backend: Literal["embedded", "fabric"] = Field(default="embedded", description="Which ledger host.")
    profile: str | None = Field(
        default=None,
        description="fabric: the connection profile (connection.json of `fabric-network/network up`).",
    )
    chaincode: str | None = Field(
        default=None, description="fabric: the chaincode name (default: the profile's)."
    )
    path: str = Field(default="ledger.db", description="embedded: the ledger file.")
    policy: str = Field(
        default="TWO",
        description="embedded: the chaincode's endorsement policy (a process's records: its members' majority).",
    )
    batch_timeout: float = Field(
        default=0.01, ge=0, description="embedded: seconds a block collects transactions."
    )


class PathsTable(Table):
    """``[paths]``: the home's folders."""

    data: str = Field(default="data", description="Datasets: <data>/<MSP>/<dataset>/dataset.npz.")
    artifacts: str = Field(default="artifacts", description="Artifact stores: <artifacts>/<MSP>.")
    state: str = Field(default="state", description="Node-agent state: <state>/<MSP>.")


class ExchangeTable(Table):
    """``[exchange]``: fetching other organisations' artifacts."""

    max_artifact_bytes: int = Field(
        default=DEFAULT_MAX_ARTIFACT_BYTES,
        gt=0,
        description="The largest artifact (message, model) this home's nodes, CLI and gateway fetch from "
        "another organisation (bytes; default 2 GiB). A transfer stops there and keeps nothing; a message "
        "is also bounded by the size its sender's signed record names.",
    )


class OrganisationTable(Table):
    """``[organisations.<MSP>]``: one organisation of the home."""

    name: str | None = Field(default=None, description="Its name (Org1 for Org1MSP).")
    identity: str | None = Field(default=None, description="The MSP folder the CLI signs with as User1.")
    data: str | None = Field(default=None, description="Its data root (overrides <paths.data>/<MSP>).")
    artifacts: str | None = Field(
        default=None, description="Informative: its store is always <paths.artifacts>/<MSP>."
    )


class NodeTable(Table):
    """``[node]``: the organisation a home made by ``consortia join`` is, and its artifact service."""

    organisation: str | None = Field(default=None, description="This home's organisation (MSP id).")
    artifact_endpoint: str | None = Field(
        default=None,
        description="https://host:port of its artifact service (published in its membership record).",
    )
    listen: str | None = Field(default=None, description="host:port where that service listens.")

    @field_validator("artifact_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:  # the Membership contract's own rule: a home never holds an endpoint it would refuse
            return check_endpoint(value, "artifact endpoint")
        except InvalidArgument as exc:
            raise ValueError(str(exc)) from None


#: The consortia.toml keys an environment variable overrides: (table, key) -> wire.env field
OVERRIDES: Mapping[tuple[str, str], str] = {
    ("ledger", "backend"): "ledger_backend",
    ("ledger", "path"): "ledger_path",
    ("ledger", "profile"): "ledger_profile",
    ("consortium", "crypto"): "crypto",
    ("exchange", "max_artifact_bytes"): "max_artifact_bytes",
}
_VARIABLE = {v.field: v.name for v in VARIABLES}


class EnvironmentOverrides(PydanticBaseSettingsSource):
    """The :data:`OVERRIDES` that are set in ``env`` (read by ``wire.env``), as nested tables."""

    def __init__(self, settings_cls: type[BaseSettings], env: Environment) -> None:
        super().__init__(settings_cls)
        self.values: dict[str, dict[str, Any]] = {}
        for (table, key), name in OVERRIDES.items():
            value = getattr(env, name)
            if value is not None:
                self.values.setdefault(table, {})[key] = value

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.values.get(field_name), field_name, True

    def __call__(self) -> dict[str, Any]:
        return dict(self.values)


class HomeConfig(BaseSettings):
    """``consortia.toml``: the schema of the file, one field per table (see each table's fields)."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, case_sensitive=True)

    consortium: ConsortiumTable = ConsortiumTable()
    ledger: LedgerTable = LedgerTable()
    paths: PathsTable = PathsTable()
    exchange: ExchangeTable = ExchangeTable()
    node: NodeTable | None = None
    organisations: dict[str, OrganisationTable] = Field(default_factory=dict)
    consent: ConsentPolicy = ConsentPolicy()
    """``[consent]``: what this home's node agents require beyond their organisation's acceptance
    and approval before a task runs (docs/consent.md)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only the values given: the process environment reaches a home through :meth:`read`
        (``wire.env``), never through pydantic-settings' own variable names."""
        return (init_settings,)

    @classmethod
    def read(cls, file: Path, env: Environment) -> HomeConfig:
        """``file`` (if it exists) with ``env``'s overrides on top; pydantic's errors as they come."""
        sources = (EnvironmentOverrides(cls, env), TomlConfigSettingsSource(cls, toml_file=file))
        return cls(_build_sources=(sources, {}))


#: each table's model, to name the keys a misspelt one may have meant (None: the top level)
_TABLES: dict[str | None, type[BaseModel]] = {
    None: HomeConfig,
    "consortium": ConsortiumTable,
    "ledger": LedgerTable,
    "paths": PathsTable,
    "exchange": ExchangeTable,
    "node": NodeTable,
    "organisations": OrganisationTable,
    "consent": ConsentPolicy,
}


def _problem(error: Mapping[str, Any], file: Path, env: Environment) -> tuple[str, str]:
    """(key, sentence) for one pydantic error about ``file`` (or the variable that overrode it)."""
    loc = tuple(error["loc"])
    table: str | None = None
    rest = loc
    if loc and loc[0] == "organisations" and len(loc) >= 3:
        table, rest = f"organisations.{loc[1]}", loc[2:]
    elif len(loc) >= 2 and loc[0] in _TABLES:
        table, rest = str(loc[0]), loc[1:]
    key = str(rest[0]) + "".join(f"[{i}]" for i in rest[1:]) if rest else ""
    dotted = f"{table}.{key}" if table else key
    if table is not None and (table, key) in OVERRIDES:
        name = OVERRIDES[(table, key)]
        if getattr(env, name) is not None:
            variable = _VARIABLE[name]
            return variable, f"${variable}={error['input']!r} (overrides [{table}] {key}): {error['msg']}"
    where = f"[{table}] {key}" if table else key
    if error["type"] == "extra_forbidden":
        kind = "table" if table is None and isinstance(error["input"], dict) else "key"
        model = _TABLES[table.partition(".")[0] if table else None]
        known = sorted(model.model_fields)
        guess = difflib.get_close_matches(key.lower(), known, n=1)
        hint = f"did you mean {guess[0]!r}?" if guess else f"known: {', '.join(known)}"
        name = f"[{key}]" if kind == "table" else where
        return dotted, f"unknown {kind} {name} in {file} ({hint})"
    return dotted, f"{where} = {error['input']!r} in {file}: {error['msg']}"


def read_config(file: Path, env: Environment | None = None) -> HomeConfig:
    """The configuration in ``file`` (none: every default) with the environment's overrides; an
    unknown key, a value of the wrong type or a file that is not TOML is a :class:`ConfigError`."""
    env = environment() if env is None else env
    try:
        return HomeConfig.read(file, env)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML: {exc}", file) from None
    except ValidationError as exc:
        problems = [_problem(e, file, env) for e in exc.errors()]
        keys = tuple(k for k, _ in problems)
        raise ConfigError("; ".join(sentence for _, sentence in problems), file, keys) from None


@dataclass(frozen=True)
class Settings:
    """A home's configuration resolved against its folder ``home`` (made by :func:`load`)."""

    home: Path
    config: HomeConfig

    @property
    def paths(self) -> Layout:
        """The home's layout, with the folders its consortia.toml names."""
        c = self.config
        return Layout(
            self.home,
            ledger_file=c.ledger.path,
            crypto_dir=c.consortium.crypto,
            data_dir=c.paths.data,
            artifacts_dir=c.paths.artifacts,
            state_dir=c.paths.state,
            org_data=tuple((m, t.data) for m, t in sorted(c.organisations.items()) if t.data),
        )

    @property
    def ledger_backend(self) -> Literal["embedded", "fabric"]:
        return self.config.ledger.backend

    @property
    def ledger_path(self) -> Path:
        """The embedded ledger file."""
        return self.paths.ledger

    @property
    def ledger_profile(self) -> Path | None:
        """fabric: the connection profile (None: not named)."""
        profile = self.config.ledger.profile
        return self.home / profile if profile else None

    @property
    def chaincode(self) -> str | None:
        return self.config.ledger.chaincode

    @property
    def policy(self) -> str:
        return self.config.ledger.policy

    @property
    def batch_timeout(self) -> float:
        return self.config.ledger.batch_timeout

    @property
    def crypto(self) -> Path:
        return self.paths.crypto

    @property
    def max_artifact_bytes(self) -> int:
        """``[exchange] max_artifact_bytes``: the largest artifact fetched from another organisation."""
        return self.config.exchange.max_artifact_bytes

    @property
    def organisations(self) -> tuple[str, ...]:
        """The consortium's MSP ids, as ``[consortium] organisations`` lists them."""
        return self.config.consortium.organisations

    @property
    def default_organisation(self) -> str | None:
        """The CLI's default organisation: the home's first."""
        return self.organisations[0] if self.organisations else None

    def identity_dir(self, msp_id: str) -> Path | None:
        """The MSP folder of ``msp_id``'s default user named by consortia.toml (None: cryptogen default)."""
        table = self.config.organisations.get(msp_id)
        return self.home / table.identity if table is not None and table.identity else None

    def node_setting(self, key: Literal["organisation", "artifact_endpoint", "listen"]) -> str | None:
        """``[node] key`` of consortia.toml (a home made by ``consortia join``), if set."""
        node = self.config.node
        return (getattr(node, key) or None) if node is not None else None


def load(home: str | os.PathLike[str] | None = None) -> Settings:
    """The settings of ``home`` (see :func:`home.layout.home_root`): its consortia.toml, if any, with
    the environment's overrides; :class:`ConfigError` for an unknown key or a mistyped value."""
    root = home_root(home)
    return Settings(root, read_config(root / CONFIG_FILE))


def home_config(
    layout: Layout,
    consortium: Consortium,
    *,
    backend: Literal["embedded", "fabric"] = "embedded",
    policy: str = "TWO",
    batch_timeout: float = 0.01,
    profile: str | os.PathLike[str] | None = None,
    tables: Collection[str] | None = None,
    node: NodeTable | None = None,
) -> HomeConfig:
    """The configuration of a home at ``layout`` whose identities are ``consortium``: ``profile``, the
    Fabric connection profile of a ``backend = "fabric"`` home; ``tables``, the MSP ids that get an
    ``[organisations.<MSP>]`` table (default all); ``node``, the ``[node]`` table."""
    organisations = {
        o.msp_id: OrganisationTable(
            name=o.name,
            identity=layout.relative(o.path / "users" / f"User1@{o.domain}" / "msp"),
            data=layout.relative(layout.data(o.msp_id)),
            artifacts=layout.relative(layout.artifacts(o.msp_id)),
        )
        for o in consortium.organisations
        if tables is None or o.msp_id in tables
    }
    return HomeConfig.model_validate(
        {
            "consortium": ConsortiumTable(crypto=layout.crypto_dir, organisations=consortium.msp_ids),
            "ledger": LedgerTable(
                backend=backend,
                profile=None if profile is None else str(Path(profile).resolve()),
                path=layout.ledger_file,
                policy=policy,
                batch_timeout=float(batch_timeout),
            ),
            "paths": PathsTable(data=layout.data_dir, artifacts=layout.artifacts_dir, state=layout.state_dir),
            "node": node,
            "organisations": organisations,
        }
    )


def save(layout: Layout, config: HomeConfig) -> Path:
    """Write ``config`` as the home's ``consortia.toml`` (tomli-w; atomically)."""
    data = config.model_dump(mode="json", exclude_none=True)
    if config.consent == ConsentPolicy():  # no [consent] table unless the home sets one
        data.pop("consent")
    text = tomli_w.dumps(data)
    header = (
        "# Consortia home configuration; every key: docs/configuration.md (home.settings.HomeConfig).\n\n"
    )
    make_private_dir(layout.root)
    tmp = layout.config.with_suffix(".toml.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
    with os.fdopen(fd, "w") as fh:
        fh.write(header + text)
    os.replace(tmp, layout.config)
    return layout.config


def write_config(layout: Layout, consortium: Consortium, **options: Any) -> Path:
    """Create each organisation's folders and write the home's ``consortia.toml`` (:func:`home_config`'s
    ``options``)."""
    make_private_dir(layout.root)
    for msp in consortium.msp_ids:
        for d in (layout.data(msp), layout.artifacts(msp), layout.gateway(msp)):
            make_private_dir(d)
    return save(layout, home_config(layout, consortium, **options))
