"""Building one organisation's node agent: the one way (docs/executor.md "Node agent").

Every node agent is built here -- ``consortia node run``, the agents :class:`home.platform.Platform`
runs on one machine (threads or OS processes, :func:`executor.node.supervisor.run_process`), the demo,
the benchmarks and the tests that run a consortium -- so each gets the same parts:

* where its things are (:class:`NodePlaces`): the home's layout (:meth:`NodePlaces.of_home`, each path
  overridable) or paths given one by one (:meth:`NodePlaces.given`);
* its ledger through the home's policy: :func:`home.ledger.open_ledger` (embedded file with the home's
  endorsement policy and batch timeout, or its Fabric connection profile), unless the caller hands an
  open ledger shared by several agents (:class:`~home.platform.Platform`);
* its identity and crypto from the consortium, its runtime checked, its limits;
* its artifact store (:func:`exchange.service.node_store`) with one locations resolver and this
  organisation's TLS identity; a node with no separate artifact service serves its own store itself on a
  loopback port (:class:`Node` stops it), a node of a consortium simulated in one process is served in
  memory (``hosted``);
* its state directory ``<state>/<MSP>`` and its data root;
* its fault plan: none, unless ``$CONSORTIA_FAULT_PLAN`` names one (``module:callable``, the tests'
  documented hook, :func:`fault_plan`; docs/configuration.md).

The :class:`executor.node.agent.NodeAgent` constructor itself stays explicit, for the tests that
assemble an agent from parts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from home.errors import ConsortiumNotFound, HomeError, LedgerNotFound
from home.settings import Settings, load

if TYPE_CHECKING:
    from exchange.service import ArtifactServer, HostedServices
    from executor.consent import ConsentPolicy
    from executor.node.agent import NodeAgent
    from executor.node.checkpoints import FaultPlan
    from executor.node.workers import PrewarmEntry
    from executor.runtimes.base import Limits, TaskRuntime
    from ledger.identity import Consortium
    from ledger.interface import Ledger

#: the places :meth:`NodePlaces.given` needs without a home (the node command's options)
PLACES = ("consortium", "ledger", "data", "store", "state")


@dataclass(frozen=True)
class NodePlaces:
    """Where one organisation's node keeps its things, and how it reaches the ledger.

    ``settings``: the home it comes from (None: paths given one by one); the ledger is the home's
    (:func:`~home.ledger.open_ledger`) unless ``ledger_file`` names another embedded ledger file.
    ``store_root`` holds ``<MSP>/`` stores, ``state_root`` ``<MSP>/`` agent states; ``data`` is this
    organisation's own data root (``<data>/<dataset>/dataset.npz``). ``artifact_endpoint`` is its
    artifact service's public address (the home's ``[node] artifact_endpoint``), if it has one."""

    org: str  # MSP id
    consortium: Consortium
    data: Path
    store_root: Path
    state_root: Path
    settings: Settings | None = None
    ledger_file: Path | None = None
    artifact_endpoint: str | None = None

    @property
    def max_artifact_bytes(self) -> int:
        """The largest artifact this node fetches from another organisation: the home's ``[exchange]
        max_artifact_bytes`` (without a home ``$CONSORTIA_MAX_ARTIFACT_BYTES``, else the default)."""
        if self.settings is not None:
            return self.settings.max_artifact_bytes
        from exchange.client import DEFAULT_MAX_ARTIFACT_BYTES
        from wire.env import environment

        return environment().max_artifact_bytes or DEFAULT_MAX_ARTIFACT_BYTES

    @property
    def state(self) -> Path:
        """This organisation's agent state directory."""
        return self.state_root / self.org

    @classmethod
    def of_home(
        cls,
        home: Settings | str | os.PathLike[str] | None,
        org: str | None = None,
        *,
        consortium: Consortium | str | os.PathLike[str] | None = None,
        ledger: str | os.PathLike[str] | None = None,
        data: str | os.PathLike[str] | None = None,
        store: str | os.PathLike[str] | None = None,
        state: str | os.PathLike[str] | None = None,
        artifact_endpoint: str | None = None,
    ) -> NodePlaces:
        """The places of ``org`` (name, MSP id or domain; default: the home's ``[node] organisation``) in
        ``home`` (a :class:`~home.settings.Settings` or a folder; None: ``$CONSORTIA_HOME``), each one
        overridable; ``artifact_endpoint`` defaults to the home's ``[node]`` one. :class:`HomeError` if no
        organisation is named or the consortium does not know it, :class:`ConsortiumNotFound` if there is
        no consortium."""
        settings = home if isinstance(home, Settings) else load(home)
        org = org or settings.node_setting("organisation")
        if org is None:
            raise HomeError(
                f"{settings.paths.config}: no organisation named (no --org, no [node] organisation)"
            )
        members = _consortium(consortium if consortium is not None else settings.crypto)
        msp = _msp_id(members, org)
        layout = settings.paths
        return cls(
            msp,
            members,
            Path(data) if data is not None else layout.data(msp),
            Path(store) if store is not None else layout.store_root,
            Path(state) if state is not None else layout.state_root,
            settings,
            Path(ledger) if ledger is not None else None,
            artifact_endpoint or settings.node_setting("artifact_endpoint"),
        )

    @classmethod
    def given(
        cls,
        org: str,
        *,
        consortium: Consortium | str | os.PathLike[str] | None,
        ledger: str | os.PathLike[str] | None,
        data: str | os.PathLike[str] | None,
        store: str | os.PathLike[str] | None,
        state: str | os.PathLike[str] | None,
        artifact_endpoint: str | None = None,
    ) -> NodePlaces:
        """The places given one by one, without a home (an embedded ledger file with the default
        policy); :class:`HomeError` naming every one missing (as the options ``--consortium`` ...)."""
        given = {"consortium": consortium, "ledger": ledger, "data": data, "store": store, "state": state}
        missing = [f"--{k}" for k in PLACES if given[k] is None]
        if missing:
            raise HomeError(f"without a home, {', '.join(missing)} are required")
        assert consortium is not None and ledger is not None  # checked above
        assert data is not None and store is not None and state is not None
        members = _consortium(consortium)
        return cls(
            _msp_id(members, org),
            members,
            Path(data),
            Path(store),
            Path(state),
            None,
            Path(ledger),
            artifact_endpoint,
        )

    def open_ledger(self) -> Ledger:
        """This node's ledger: the home's (:func:`home.ledger.open_ledger`: its backend, policy and batch
        timeout), or the embedded file ``ledger_file`` with the home's policy (the defaults without a
        home). Never created: a missing file is :class:`~home.errors.LedgerNotFound`; a home, or a
        ledger file given with one, that other users may open is :class:`~home.errors.NotPrivate`."""
        from home.ledger import open_ledger

        settings = self.settings
        if settings is not None and (self.ledger_file is None or settings.ledger_backend == "fabric"):
            return open_ledger(settings, self.consortium)
        from home.layout import check_private, sqlite_files
        from ledger.embedded import EmbeddedLedger

        assert self.ledger_file is not None  # NodePlaces.given requires it
        if settings is not None:  # a home: its owner's only, and so is the ledger file it is given
            check_private([settings.home])
            check_private(sqlite_files(self.ledger_file), "ledger file")
        if not self.ledger_file.is_file():  # an agent never creates a ledger (a wrong path is an error)
            raise LedgerNotFound(
                f"no ledger at {self.ledger_file}: run `consortia init` to make a consortium, or point "
                f"--ledger/--home at an existing one"
            )
        if settings is None:
            return EmbeddedLedger(self.ledger_file, self.consortium)
        return EmbeddedLedger(
            self.ledger_file, self.consortium, policy=settings.policy, batch_timeout=settings.batch_timeout
        )


def _consortium(value: Consortium | str | os.PathLike[str]) -> Consortium:
    from ledger.identity import Consortium

    if isinstance(value, Consortium):
        return value
    if not (Path(value) / Consortium.MANIFEST).exists():
        raise ConsortiumNotFound(f"no consortium at {value} (no {Path(value) / Consortium.MANIFEST})")
    return Consortium(value)


def _msp_id(consortium: Consortium, org: str) -> str:
    try:
        return consortium.organisation(org).msp_id
    except KeyError as exc:
        raise HomeError(str(exc).strip("'\"")) from None


@dataclass
class Node:
    """A built node agent (not started: every way of running it starts it) with what was opened for
    it: the artifact service of its own store (``server``, when it has no separate one) and the ledger
    (``ledger``, when it was opened for it: closed with it)."""

    agent: NodeAgent
    server: ArtifactServer | None = None
    ledger: Ledger | None = None
    closed: bool = field(default=False, init=False)

    @property
    def owns_ledger(self) -> bool:
        return self.ledger is not None

    def close(self) -> None:
        """Stop the agent's workers, its own artifact service and close its ledger (if it opened it)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.agent.close()
        finally:
            if self.server is not None:
                self.server.stop()
            if self.ledger is not None:
                self.ledger.close()


def fault_plan() -> FaultPlan:
    """The plan ``$CONSORTIA_FAULT_PLAN`` names (``module:callable``,
    :func:`executor.node.checkpoints.load_fault_plan`), else none; ``ValueError`` naming the
    specification if it makes no plan."""
    from executor.node.checkpoints import NO_FAULTS, load_fault_plan
    from wire.env import environment

    spec = environment().fault_plan
    return load_fault_plan(spec) if spec else NO_FAULTS


def build_agent(
    places: NodePlaces,
    *,
    runtime: TaskRuntime | str = "container",
    warm: bool = False,
    limits: Limits | None = None,
    prewarm: Sequence[PrewarmEntry] = (),
    ledger: Ledger | None = None,
    hosted: HostedServices | None = None,
    peer_artifacts: Mapping[str, str] | None = None,
    bundles_root: Path | None = None,
    consent: ConsentPolicy | None = None,
) -> Node:
    """``places.org``'s node agent (not started).

    ``runtime``: a runtime, or its name (``container``/``sandbox``: made and checked here,
    :class:`executor.errors.RuntimeUnavailable` if it cannot run); ``warm``, ``limits``, ``prewarm``:
    the agent's worker policy (:mod:`executor.node.workers`). ``ledger``: an open ledger shared with
    other agents (the caller closes it); by default :meth:`NodePlaces.open_ledger` opens one that the
    :class:`Node` closes. ``hosted``: the in-memory artifact services of the agents of one process
    (this store is served there too); otherwise, without ``places.artifact_endpoint``, the node serves its
    own store on a loopback port (any free one) and publishes that in its membership record when it
    starts. ``peer_artifacts``: the others' services (ORG -> https URL), overriding their membership
    records. ``bundles_root``: where sandbox bundles are cached (default: the runtime's cache).
    ``consent``: the organisation's own consent policy (docs/consent.md; default: the home's
    ``[consent]`` table, or the default policy without a home). The fault plan is :func:`fault_plan`'s."""
    from exchange.readers import LedgerReaders
    from exchange.service import ArtifactServer, node_store
    from exchange.store import ArtifactStore
    from executor.consent import ConsentPolicy
    from executor.images.resolver import ImageResolver
    from executor.node.agent import NodeAgent
    from executor.runtimes import get_runtime
    from executor.runtimes.base import Limits
    from ledger.client import ConsortiaClient

    faults = fault_plan()
    if isinstance(runtime, str):
        runtime = get_runtime(runtime)
        runtime.check()
    owns_ledger = ledger is None
    led = places.open_ledger() if ledger is None else ledger
    server: ArtifactServer | None = None
    try:
        client = ConsortiaClient(led, places.consortium.identity(places.org))
        endpoint = places.artifact_endpoint
        if endpoint is None and hosted is None:  # no separate service: serve its own store on loopback
            own = ArtifactStore(places.store_root, places.org)
            readers = LedgerReaders(client, own)
            server = ArtifactServer(("127.0.0.1", 0), own, places.consortium, readers).start()
            endpoint = server.url
        store = node_store(
            client,
            places.consortium,
            places.store_root,
            endpoint=endpoint,
            endpoints=peer_artifacts,
            hosted=hosted,
            max_artifact_bytes=places.max_artifact_bytes,
        )
        agent = NodeAgent(
            client,
            places.consortium,
            runtime,
            store,
            places.data,
            places.state,
            limits=limits or Limits(),
            images=ImageResolver(runtime, bundles_root) if bundles_root is not None else None,
            warm=warm,
            prewarm=prewarm,
            faults=faults,
            consent=consent
            if consent is not None
            else (places.settings.config.consent if places.settings is not None else ConsentPolicy()),
        )
    except BaseException:
        if server is not None:
            server.stop()
        if owns_ledger:
            led.close()
        raise
    return Node(agent, server, led if owns_ledger else None)
