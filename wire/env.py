"""Every environment variable the project reads, in one place (docs/configuration.md lists them).

Modules read :func:`environment` instead of ``os.environ``: it reads the process environment each
time it is called (tests and subcommands set variables at run time), converts each value to its
type and applies the default. A variable that is set but empty counts as unset. Variables a module
only *passes on* to a child process (``{**os.environ, ...}``) are not read here; the numeric profile's
variables, which the numeric libraries read themselves, are declared by :mod:`algorithms.numeric_profile`
and read through :func:`values`.

The home's own settings (its ``consortia.toml``) are ``home.settings``; the ``CONSORTIA_LEDGER_*`` and
``CONSORTIA_CRYPTO`` variables below override that file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


def _flag(on: str) -> Callable[[str], bool]:
    def parse(value: str) -> bool:
        return value == on

    parse.__name__ = "flag"
    return parse


def _var(name: str, doc: str, kind: Callable[[str], Any] = str, default: Any = None) -> Any:
    """An :class:`Environment` field read from ``$name`` (``kind`` converts the text)."""
    return field(default=default, metadata={"env": name, "doc": doc, "kind": kind})


@dataclass(frozen=True)
class Environment:
    """The environment variables the project reads, typed (None: unset and no default)."""

    # ---- the home and the CLI
    home: Path | None = _var("CONSORTIA_HOME", "The Consortia home (default ./consortia-home).", Path)
    org: str | None = _var("CONSORTIA_ORG", "The organisation the CLI acts for (default: the home's first).")
    ledger_backend: str | None = _var(
        "CONSORTIA_LEDGER_BACKEND", "Overrides consortia.toml [ledger] backend."
    )
    ledger_path: str | None = _var("CONSORTIA_LEDGER_PATH", "Overrides consortia.toml [ledger] path.")
    ledger_profile: str | None = _var(
        "CONSORTIA_LEDGER_PROFILE", "Overrides consortia.toml [ledger] profile."
    )
    crypto: str | None = _var("CONSORTIA_CRYPTO", "Overrides consortia.toml [consortium] crypto.")
    max_artifact_bytes: int | None = _var(
        "CONSORTIA_MAX_ARTIFACT_BYTES", "Overrides consortia.toml [exchange] max_artifact_bytes.", int
    )
    # ---- caches and engines
    cache: Path | None = _var(
        "CONSORTIA_CACHE", "Downloads, wheels, bundles, Fabric binaries (default ~/.cache/consortia).", Path
    )
    consortia_docker_host: str | None = _var(
        "CONSORTIA_DOCKER_HOST", "The container engine's API URL (first choice)."
    )
    docker_host: str | None = _var("DOCKER_HOST", "The container engine's API URL (second choice).")
    registry_ca: str | None = _var(
        "CONSORTIA_REGISTRY_CA",
        "The image registry's CA certificate (default: /etc/containers/certs.d/<host:port>/ca.crt).",
    )
    numeric_profile: str | None = _var(
        "CONSORTIA_NUMERIC_PROFILE",
        "The numeric profile the simulator computes under (default x86-64-v2/1; 'host': this machine's "
        "own kernels, digests that match this machine only).",
    )
    task_scratch: str | None = _var(
        "CONSORTIA_TASK_SCRATCH",
        "Where task directories live (default: a memory filesystem with 1 GiB free, else the agent's "
        "state directory; 'state' forces the latter).",
    )
    xdg_runtime_dir: str | None = _var(
        "XDG_RUNTIME_DIR",
        "The user's runtime directory (a memory filesystem): first choice for task directories.",
    )
    fault_plan: str | None = _var(
        "CONSORTIA_FAULT_PLAN",
        "Tests only: module:callable making the node command's fault plan (executor.node.checkpoints).",
    )
    # ---- the Fabric network (network/, tests/support/fabric.py)
    fabric_home: Path | None = _var("FABRIC_HOME", "Fabric binaries (default $CONSORTIA_CACHE/fabric).", Path)
    fabric_net: Path | None = _var(
        "CONSORTIA_FABRIC_NET", "The Fabric network directory (default: per command).", Path
    )
    fabric_port_base: int | None = _var(
        "CONSORTIA_FABRIC_PORT_BASE", "First port of the Fabric network (default 7050; tests choose).", int
    )
    fabric_orgs: str = _var(
        "CONSORTIA_FABRIC_ORGS",
        "Organisations of `network up` (default Org1,Org2,Org3).",
        default="Org1,Org2,Org3",
    )
    fabric_keep: bool = _var(
        "CONSORTIA_FABRIC_KEEP", "1: the test fixtures leave the network running.", _flag("1"), False
    )
    ci: bool = _var(
        "CI",
        "true: a test that needs something missing (Fabric, the image registry, bubblewrap, a module, "
        "a dataset's registry package) fails instead of skipping.",
        _flag("true"),
        False,
    )
    # ---- the chaincode service (ledger/fabric/chaincode_server.py; set by the CCaaS builder)
    chaincode_dispatch: str = _var(
        "CONSORTIA_CHAINCODE_DISPATCH",
        "module:function the chaincode service calls (default chaincode.dispatch:invoke).",
        default="chaincode.dispatch:invoke",
    )
    chaincode_address: str = _var(
        "CHAINCODE_SERVER_ADDRESS",
        "host:port it listens on (default 127.0.0.1:9999).",
        default="127.0.0.1:9999",
    )
    chaincode_id: str = _var("CHAINCODE_ID", "The chaincode package id.", default="")
    chaincode_tls_cert: str | None = _var("CHAINCODE_TLS_CERT_FILE", "Its TLS certificate (PEM).")
    chaincode_tls_key: str | None = _var("CHAINCODE_TLS_KEY_FILE", "Its TLS key (PEM).")
    chaincode_client_ca: str | None = _var(
        "CHAINCODE_TLS_CLIENT_CA_FILE", "CA of the peers' client certificates."
    )
    chaincode_msp_id: str = _var(
        "CORE_PEER_LOCALMSPID",
        "The MSP id of the organisation whose peers it serves (as fabric-chaincode-go's shim.GetMSPID).",
        default="",
    )
    chaincode_log_level: str = _var("CHAINCODE_LOG_LEVEL", "Its log level (default INFO).", default="INFO")
    # ---- benchmarks
    fabric_bench_net: Path | None = _var(
        "CONSORTIA_FABRIC_BENCH_NET",
        "The benchmark's Fabric network (default ~/.cache/consortia/fabric-bench).",
        Path,
    )
    fabric_bench_port_base: int = _var(
        "CONSORTIA_FABRIC_BENCH_PORT_BASE", "Its first port (default 17050).", int, 17050
    )
    fabric_bench_clients: int | None = _var(
        "FABRIC_BENCH_CLIENTS", "Its concurrent clients (default 96).", int
    )

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> Environment:
        """Read every field's variable from ``environ`` (default: the process environment)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for var in VARIABLES:
            raw = env.get(var.name)
            if raw:
                try:
                    values[var.field] = var.kind(raw)
                except ValueError:
                    raise ValueError(f"${var.name}={raw!r} is not a valid {var.kind.__name__}") from None
        return cls(**values)

    # ---- derived values: each default written once
    @property
    def cache_root(self) -> Path:
        """``$CONSORTIA_CACHE`` (default ``~/.cache/consortia``)."""
        return self.cache or Path.home() / ".cache" / "consortia"

    @property
    def fabric_binaries(self) -> Path:
        """``$FABRIC_HOME`` (default ``<cache>/fabric``)."""
        return self.fabric_home or self.cache_root / "fabric"

    @property
    def engine_url(self) -> str | None:
        """The container engine: ``$CONSORTIA_DOCKER_HOST``, else ``$DOCKER_HOST`` (None: neither)."""
        return self.consortia_docker_host or self.docker_host


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, the :class:`Environment` field it fills, its meaning."""

    name: str
    field: str
    doc: str
    kind: Callable[[str], Any] = str


#: every variable, in the order of :class:`Environment`'s fields
VARIABLES: tuple[Variable, ...] = tuple(
    Variable(f.metadata["env"], f.name, f.metadata["doc"], f.metadata["kind"]) for f in fields(Environment)
)


def environment(environ: Mapping[str, str] | None = None) -> Environment:
    """The project's environment variables, read now (see :class:`Environment`)."""
    return Environment.read(environ)


def values(names: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The raw text of variables another module declares, read now (unset and empty ones left out):
    the numeric profile's (``OPENBLAS_CORETYPE``, ``NPY_ENABLE_CPU_FEATURES``, ``GLIBC_TUNABLES`` ...),
    which :mod:`algorithms.numeric_profile` sets and checks as the libraries themselves read them."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in names if env.get(name)}
