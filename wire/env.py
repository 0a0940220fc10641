"""Every environment variable the project reads, in one place (docs/configuration.md lists them).

Modules read :func:`environment` instead of ``os.environ``: it reads the process environment each
time it is called (tests and subcommands set variables at run time), converts each value to its
type and applies the default. A variable that is set but empty counts as unset. Variables a module
only *passes on* to a child process (``{**os.environ, ...}``) are not read here.

The home's own settings (its ``consortia.toml``) are ``ledger.config``; the ``CONSORTIA_LEDGER_*`` and
``CONSORTIA_CRYPTO`` variables below override that file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Variable:
    """One environment variable: its name, the :class:`Environment` field it fills, its meaning."""

    name: str
    field: str
    doc: str
    kind: Callable[[str], Any] = str


VARIABLES: tuple[Variable, ...] = (
    # ---- the home and the CLI
    Variable("CONSORTIA_HOME", "home", "The Consortia home (default ./consortia-home).", Path),
    Variable("CONSORTIA_ORG", "org", "The organisation the CLI acts for (default: the home's first)."),
    Variable("CONSORTIA_LEDGER_BACKEND", "ledger_backend", "Overrides consortia.toml [ledger] backend."),
    Variable("CONSORTIA_LEDGER_PATH", "ledger_path", "Overrides consortia.toml [ledger] path."),
    Variable("CONSORTIA_LEDGER_PROFILE", "ledger_profile", "Overrides consortia.toml [ledger] profile."),
    Variable("CONSORTIA_CRYPTO", "crypto", "Overrides consortia.toml [consortium] crypto."),
    # ---- caches and engines
    Variable(
        "CONSORTIA_CACHE",
        "cache",
        "Downloads, wheels, bundles, Fabric binaries (default ~/.cache/consortia).",
        Path,
    ),
    Variable(
        "CONSORTIA_DOCKER_HOST", "consortia_docker_host", "The container engine's API URL (first choice)."
    ),
    Variable("DOCKER_HOST", "docker_host", "The container engine's API URL (second choice)."),
    Variable("OPENBLAS_CORETYPE", "openblas_coretype", "OpenBLAS kernel choice, forwarded into every task."),
    Variable(
        "CONSORTIA_AGENT_KILL_AT",
        "agent_kill_at",
        "Fault injection for tests: <checkpoint>:<round> SIGKILLs the node agent there.",
    ),
    # ---- the Fabric network (ledger/fabric/network.py, ledger/fabric/testing.py)
    Variable("FABRIC_HOME", "fabric_home", "Fabric binaries (default $CONSORTIA_CACHE/fabric).", Path),
    Variable(
        "CONSORTIA_FABRIC_NET", "fabric_net", "The Fabric network directory (default: per command).", Path
    ),
    Variable(
        "CONSORTIA_FABRIC_PORT_BASE",
        "fabric_port_base",
        "First port of the Fabric network (default 7050; tests choose).",
        int,
    ),
    Variable(
        "CONSORTIA_FABRIC_ORGS", "fabric_orgs", "Organisations of `network up` (default Org1,Org2,Org3)."
    ),
    Variable(
        "CONSORTIA_FABRIC_KEEP",
        "fabric_keep",
        "1: the test fixtures leave the network running.",
        lambda v: v == "1",
    ),
    Variable(
        "CI",
        "ci",
        "true: tests that need Fabric fail instead of skipping when it is missing.",
        lambda v: v == "true",
    ),
    # ---- the chaincode service (ledger/fabric/chaincode_server.py; set by the CCaaS builder)
    Variable(
        "CONSORTIA_CHAINCODE_DISPATCH",
        "chaincode_dispatch",
        "module:function the chaincode service calls (default chaincode.dispatch:invoke).",
    ),
    Variable(
        "CHAINCODE_SERVER_ADDRESS", "chaincode_address", "host:port it listens on (default 127.0.0.1:9999)."
    ),
    Variable("CHAINCODE_ID", "chaincode_id", "The chaincode package id."),
    Variable("CHAINCODE_TLS_CERT_FILE", "chaincode_tls_cert", "Its TLS certificate (PEM)."),
    Variable("CHAINCODE_TLS_KEY_FILE", "chaincode_tls_key", "Its TLS key (PEM)."),
    Variable("CHAINCODE_TLS_CLIENT_CA_FILE", "chaincode_client_ca", "CA of the peers' client certificates."),
    Variable("CHAINCODE_LOG_LEVEL", "chaincode_log_level", "Its log level (default INFO)."),
    # ---- benchmarks
    Variable(
        "CONSORTIA_FABRIC_BENCH_NET",
        "fabric_bench_net",
        "The benchmark's Fabric network (default ~/.cache/consortia/fabric-bench).",
        Path,
    ),
    Variable(
        "CONSORTIA_FABRIC_BENCH_PORT_BASE", "fabric_bench_port_base", "Its first port (default 17050).", int
    ),
    Variable("FABRIC_BENCH_CLIENTS", "fabric_bench_clients", "Its concurrent clients (default 96).", int),
)


@dataclass(frozen=True)
class Environment:
    """The environment variables of :data:`VARIABLES`, typed (None: unset, no default)."""

    home: Path | None = None
    org: str | None = None
    ledger_backend: str | None = None
    ledger_path: str | None = None
    ledger_profile: str | None = None
    crypto: str | None = None
    cache: Path | None = None
    consortia_docker_host: str | None = None
    docker_host: str | None = None
    openblas_coretype: str | None = None
    agent_kill_at: str = ""
    fabric_home: Path | None = None
    fabric_net: Path | None = None
    fabric_port_base: int | None = None
    fabric_orgs: str = "Org1,Org2,Org3"
    fabric_keep: bool = False
    ci: bool = False
    chaincode_dispatch: str = "chaincode.dispatch:invoke"
    chaincode_address: str = "127.0.0.1:9999"
    chaincode_id: str = ""
    chaincode_tls_cert: str | None = None
    chaincode_tls_key: str | None = None
    chaincode_client_ca: str | None = None
    chaincode_log_level: str = "INFO"
    fabric_bench_net: Path | None = None
    fabric_bench_port_base: int = 17050
    fabric_bench_clients: int | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> Environment:
        """Read :data:`VARIABLES` from ``environ`` (default: the process environment)."""
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

    def numeric(self) -> dict[str, str]:
        """The variables that fix a task's numerical kernels (forwarded into every task)."""
        return {"OPENBLAS_CORETYPE": self.openblas_coretype} if self.openblas_coretype else {}


def environment(environ: Mapping[str, str] | None = None) -> Environment:
    """The project's environment variables, read now (see :class:`Environment`)."""
    return Environment.read(environ)
