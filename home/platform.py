"""Where the organisations' nodes of one machine keep their things: :class:`Platform` (a consortium
simulated on one machine -- the demo, the benchmarks, the end-to-end tests).

:func:`executor.node.supervisor.run_process` runs every organisation's node agent in a platform's
places (it is the supervisor's :class:`~executor.node.supervisor.LocalNodes`): as threads of this
process, each agent built by :func:`home.agent.build_agent`, or as OS processes, each the node command
``consortia node run`` (:meth:`Platform.agent_command`), which builds its agent the same way.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from exchange.service import HostedServices
from executor.consent import ConsentPolicy
from executor.errors import ExecutorError
from home.agent import NodePlaces, build_agent
from home.layout import CONFIG_FILE, Layout
from home.settings import load
from ledger.client import ConsortiaClient
from ledger.identity import Consortium
from ledger.interface import Ledger

if TYPE_CHECKING:
    from executor.node.agent import NodeAgent
    from executor.runtimes.base import Limits, TaskRuntime


@dataclass
class Platform:
    """Where the organisations' nodes keep their things on this machine: one ledger (embedded file
    or Fabric gateway), the consortium's identities, and per organisation a data root, an artifact
    store and an agent state directory -- in the one home layout of :class:`home.layout.Layout`
    (``root`` is a Consortia home: ``data/<MSP>``, ``artifacts/<MSP>``, ``state/<MSP>``).

    The agents it runs as threads of this process reach each other's artifacts in memory, each through
    the other's own service (``hosted``, :class:`exchange.service.HostedServices`); agents run as OS
    processes serve their stores over HTTPS (docs/artifacts.md)."""

    ledger: Ledger
    consortium: Consortium
    root: Path
    ledger_path: Path | None = None  # the embedded ledger file (for agents run as OS processes)
    bundles_roots: dict[str, Path] = field(default_factory=dict)  # per organisation (default: the cache)
    hosted: HostedServices = field(default_factory=HostedServices)  # its agent threads' artifact services

    @classmethod
    def from_home(cls, home: str | os.PathLike[str] | None = None, *, create: bool = False) -> Platform:
        """The platform of a Consortia home: its consortium, and its ledger from
        :func:`home.ledger.open_ledger` (``create``: an embedded ledger file is made if missing)."""
        from home.ledger import open_ledger

        settings = load(home)
        consortium = Consortium(settings.crypto)
        ledger = open_ledger(settings, consortium, create=create)
        embedded = settings.ledger_path if settings.ledger_backend == "embedded" else None
        return cls(ledger, consortium, settings.home, embedded)

    @property
    def layout(self) -> Layout:
        """The home layout: ``root`` is a Consortia home (its consortia.toml, if any, is honoured, e.g. an
        organisation's data folder named there)."""
        root = Path(self.root)
        return load(root).paths if (root / CONFIG_FILE).is_file() else Layout(root)

    @property
    def data_root(self) -> Path:
        return self.layout.data_root

    @property
    def store_root(self) -> Path:
        return self.layout.store_root

    @property
    def state_root(self) -> Path:
        return self.layout.state_root

    def client(self, org: str) -> ConsortiaClient:
        return ConsortiaClient(self.ledger, self.consortium.identity(org))

    def admins(self, orgs: Sequence[str] | None = None) -> dict[str, ConsortiaClient]:
        """Each organisation's admin (who approves images and accepts processes), by MSP id: on this
        machine only, where the platform acts as every organisation (the demo, tests, benchmarks)."""
        return {
            o.msp_id: ConsortiaClient(self.ledger, self.consortium.identity(o.msp_id, "Admin"))
            for o in self.consortium.organisations
            if orgs is None or o.msp_id in orgs or o.name in orgs
        }

    @property
    def consent_policy(self) -> ConsentPolicy:
        """The ``[consent]`` table of the home's consortia.toml (docs/consent.md; none: the default)."""
        root = Path(self.root)
        return load(root).config.consent if (root / CONFIG_FILE).is_file() else ConsentPolicy()

    def places(self, org: str) -> NodePlaces:
        """Where ``org``'s node keeps its things on this platform."""
        layout = self.layout
        msp = self.consortium.organisation(org).msp_id
        return NodePlaces(msp, self.consortium, layout.data(msp), layout.store_root, layout.state_root)

    def agent(
        self, org: str, runtime: TaskRuntime, warm: bool = False, limits: Limits | None = None
    ) -> NodeAgent:
        """``org``'s node agent in this platform's places (:func:`home.agent.build_agent` on the platform's
        ledger, served in memory; not started: every way of running it starts it)."""
        return build_agent(
            self.places(org),
            runtime=runtime,
            warm=warm,
            limits=limits,
            ledger=self.ledger,
            hosted=self.hosted,
            bundles_root=self.bundles_roots.get(org),
            consent=self.consent_policy,
        ).agent

    def agent_command(
        self, org: str, process_id: str, runtime: str, warm: bool = False, timeout: float = 3600.0
    ) -> list[str]:
        """The node command of ``org`` (``consortia node run``) for one process, in this platform's
        places (the agent serves its own store on a loopback port)."""
        if self.ledger_path is None:
            raise ExecutorError("agents as OS processes need the embedded ledger file (ledger_path)")
        places = self.places(org)
        cmd = [
            sys.executable,
            "-m",
            "api.cli",
            "node",
            "run",
            "--org",
            org,
            "--consortium",
            str(self.consortium.root),
            "--ledger",
            str(self.ledger_path),
            "--runtime",
            runtime,
            "--data",
            str(places.data),
            "--store",
            str(places.store_root),
            "--state",
            str(places.state_root),
            "--process",
            process_id,
            "--timeout",
            str(timeout),
        ]
        return cmd + (["--warm"] if warm else [])
