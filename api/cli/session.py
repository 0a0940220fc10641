"""One organisation's view of a Consortia home, opened once per command and always closed.

``with session(home, org) as s:`` reads the home's ``consortia.toml`` (:func:`home.settings.load`),
resolves the acting organisation (name, MSP id or domain), finds its identity and opens the ledger
through the one factory (:func:`open_home_ledger`); on leaving, the audit index and the ledger are
closed whatever happened. Paths come from the home's :class:`home.layout.Layout` only.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from api.cli.output import EXIT_NOT_FOUND, EXIT_USAGE, HomeOpt, JsonOpt, OrgOpt, UserOpt, fail, with_output


def open_home_ledger(settings: Any, consortium: Any) -> Any:
    """The ledger of the home: embedded file or Fabric network, as its configuration says
    (:func:`home.ledger.open_ledger`; never creates a ledger)."""
    from home.ledger import open_ledger

    return open_ledger(settings, consortium)


class Session:
    """The configuration, identity, ledger, audit index and gateway objects of one organisation."""

    def __init__(self, home: Path | None, org: str | None, user: str = "User1", as_json: bool = False):
        from home.errors import HomeError, LedgerNotFound
        from home.settings import load
        from ledger.identity import Consortium

        self.as_json = as_json
        self._ledger: Any = None
        self._index: Any = None
        try:
            self.settings = load(home)
        except (HomeError, ValueError) as exc:
            fail(str(exc), EXIT_USAGE, as_json, kind="bad home")
        self.layout = self.settings.paths
        if not (self.layout.crypto / Consortium.MANIFEST).exists():
            fail(
                f"no consortium at {self.settings.home} (no {self.layout.crypto / Consortium.MANIFEST}): "
                f"run `consortia init --home {self.settings.home} --orgs Org1,Org2,Org3` to make one",
                EXIT_NOT_FOUND,
                as_json,
                kind="no consortium",
            )
        self.consortium = Consortium(self.layout.crypto)
        org = org or self.settings.default_organisation or self.consortium.msp_ids[0]
        try:
            self.msp_id = self.consortium.organisation(org).msp_id
        except KeyError as exc:
            raise typer.BadParameter(str(exc).strip("'\""), param_hint="--org") from None
        self.user = user
        named = self.settings.identity_dir(self.msp_id)
        if user == "User1" and named is not None and not (named / "signcerts").is_dir():
            fail(
                f"no identity at {named} (named for {self.msp_id} in {self.layout.config})",
                EXIT_NOT_FOUND,
                as_json,
                kind="no identity",
            )
        try:  # never create a ledger by accident: a wrong --home is an error, not an empty ledger
            self._ledger = open_home_ledger(self.settings, self.consortium)
        except LedgerNotFound as exc:
            fail(str(exc), EXIT_NOT_FOUND, as_json, kind="no ledger")
        except HomeError as exc:
            fail(str(exc), EXIT_USAGE, as_json, kind="bad home")

    @property
    def ledger(self) -> Any:
        return self._ledger

    def local_admins(self, members: Sequence[str]) -> dict[str, Any]:
        """Clients of the admins of ``members`` whose identities this home holds (a one-machine home
        holds every organisation's; a joined home only its own), by MSP id: who consents for them."""
        from ledger.client import ConsortiaClient

        out = {}
        for msp in members:
            try:
                out[msp] = ConsortiaClient(self.ledger, self.consortium.identity(msp, "Admin"))
            except (KeyError, OSError, ValueError):
                continue  # not this home's to give
        return out

    @property
    def client(self) -> Any:
        from ledger.client import ConsortiaClient
        from ledger.identity import Identity

        named = self.settings.identity_dir(self.msp_id) if self.user == "User1" else None
        identity = (
            Identity.from_msp_dir(self.msp_id, named)
            if named is not None
            else self.consortium.identity(self.msp_id, self.user)
        )
        return ConsortiaClient(self.ledger, identity)

    @property
    def gateway_home(self) -> Path:
        return self.layout.gateway(self.msp_id)

    def dataset_dir(self, name: str | None) -> Path:
        """This organisation's dataset ``name`` (default ``default``): dataset.npz, schema.json."""
        return self.layout.data(self.msp_id) / (name or "default")

    @property
    def index(self) -> Any:
        if self._index is None:
            from api.index import AuditIndex
            from home.errors import NotPrivate

            try:
                self._index = AuditIndex(self.gateway_home / "index.db")
            except NotPrivate as exc:
                fail(str(exc), EXIT_USAGE, self.as_json, kind="bad home")
        return self._index

    def synced_index(self) -> Any:
        """The audit index brought up to the ledger first."""
        from api.follower import sync

        sync(self.index, self.client)
        return self.index

    def gateway(self, follow_interval: float = 0.25) -> Any:
        from api.gateway import Gateway
        from api.tokens import TokenStore
        from exchange.locations import Locations
        from exchange.store import ArtifactStore
        from exchange.tls import ClientTLS

        # the others' models come from their artifact services, found on the ledger
        locations = Locations(
            ClientTLS(self.consortium, self.msp_id),
            client=self.client,
            max_bytes=self.settings.max_artifact_bytes,
        )
        return Gateway(
            ledger=self.ledger,
            consortium=self.consortium,
            msp_id=self.msp_id,
            index=self.index,
            tokens=TokenStore(self.gateway_home / "tokens.json", self.msp_id),
            artifacts=ArtifactStore.at(self.layout.artifacts(self.msp_id), locations=locations),
            follow_interval=follow_interval,
        )

    def known(self, org: str) -> bool:
        try:
            self.consortium.organisation(org)
            return True
        except KeyError:
            return False

    def msp(self, org: str) -> str:
        """An organisation's MSP id from its name, MSP id or domain (unknown ones are left to the
        contract, which answers NOT_FOUND or FORBIDDEN itself)."""
        org = org.strip()
        return self.consortium.organisation(org).msp_id if self.known(org) else org

    def model_ref(self, model_id: str) -> str:
        """A model id ``PROCESS:ORG`` with its organisation as an MSP id: ``claims:Org2`` and
        ``claims:Org2MSP`` name the same model (an unknown organisation is left to the contract)."""
        process, sep, org = model_id.rpartition(":")
        return f"{process}:{self.msp(org)}" if sep and process else model_id

    def member(self, org: str) -> str:
        """Like :meth:`msp`, but an organisation outside the consortium is a usage error (exit 2)."""
        if not self.known(org.strip()):
            fail(
                f"{org!r} is not an organisation of this consortium "
                f"(known: {', '.join(self.consortium.msp_ids)}; a member added later is taken into this "
                f"home by `consortia join --force` with every other member's package, the newcomer's too)",
                EXIT_USAGE,
                self.as_json,
                kind="unknown organisation",
            )
        return self.msp(org)

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
        if self._ledger is not None:
            self._ledger.close()


@contextmanager
def session(
    home: Path | None, org: str | None, user: str = "User1", as_json: bool = False
) -> Iterator[Session]:
    """Open one organisation's :class:`Session` for the length of a command; always closed."""
    s = Session(home, org, user, as_json)
    try:
        yield s
    finally:
        s.close()


def journey(
    group: typer.Typer, name: str, *, user: bool | str = False
) -> Callable[[Callable[..., Any]], Any]:
    """Register ``fn(s, ...)`` as the command ``name`` of ``group``, acting in a :func:`session`.

    The command gets the options every journey shares -- ``--home``, ``--org``, (``--user`` when
    ``user``; a string: its default, e.g. ``Admin`` for the commands that consent), ``--json`` -- after ``fn``'s own arguments; ``fn`` receives the open :class:`Session`
    (``s.as_json`` is ``--json``), which is closed when the command ends, however it ends."""
    shared = [
        inspect.Parameter("home", inspect.Parameter.KEYWORD_ONLY, default=HomeOpt, annotation=Path | None),
        inspect.Parameter("org", inspect.Parameter.KEYWORD_ONLY, default=OrgOpt, annotation=str | None),
    ]
    if user:
        option = UserOpt if user is True else typer.Option(user, "--user", help=UserOpt.help)
        shared.append(
            inspect.Parameter("user", inspect.Parameter.KEYWORD_ONLY, default=option, annotation=str)
        )
    shared.append(
        inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, default=JsonOpt, annotation=bool)
    )

    def register(fn: Callable[..., Any]) -> Any:
        own = list(inspect.signature(fn, eval_str=True).parameters.values())[1:]  # without the session
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + shared

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            home, org, as_json = kwargs.pop("home"), kwargs.pop("org"), kwargs.pop("as_json")
            with session(home, org, kwargs.pop("user", "User1"), as_json=as_json) as s:
                if isinstance(kwargs.get("model_id"), str):  # PROCESS:ORG, ORG a name or an MSP id
                    kwargs["model_id"] = s.model_ref(kwargs["model_id"])
                return fn(s, **kwargs)

        command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return group.command(name)(with_output(command))

    return register
