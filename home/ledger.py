"""Opening a home's ledger: :func:`open_ledger`, the one factory (CLI, gateway, node agents, Platform)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from home.errors import HomeError, LedgerNotFound
from home.layout import Layout, check_private, make_private_dir, sqlite_files
from home.settings import Settings, load

if TYPE_CHECKING:
    from ledger.embedded import EmbeddedLedger
    from ledger.fabric.gateway import FabricLedger
    from ledger.identity import Consortium


def open_ledger(
    config_or_home: Settings | Layout | str | os.PathLike[str] | None,
    consortium: Consortium | None = None,
    *,
    create: bool = False,
) -> EmbeddedLedger | FabricLedger:
    """The ledger of a home.

    ``config_or_home`` is a :class:`~home.settings.Settings`, a :class:`~home.layout.Layout`, or a home
    directory (None: ``$CONSORTIA_HOME``), read with :func:`~home.settings.load`. ``consortium`` (a
    ``ledger.identity.Consortium``, default: the home's ``crypto``) holds the identities the embedded
    ledger checks signatures with.

    ``backend = "embedded"``: an ``EmbeddedLedger`` on the home's ledger file; a missing file is
    :class:`~home.errors.LedgerNotFound` unless ``create`` (``consortia init`` creates it).
    ``backend = "fabric"``: a ``FabricLedger`` from ``[ledger] profile`` (the ``connection.json`` of
    ``fabric-network/network up``); a missing profile is :class:`~home.errors.LedgerNotFound`
    (``create`` does not make a network).

    The home must be private to its owner (0700), and so must an existing ledger file and its WAL and
    shared-memory files (0600): :class:`~home.errors.NotPrivate` otherwise (refused, not repaired:
    :func:`~home.layout.check_private`). A new ledger file is created 0600.
    """
    if isinstance(config_or_home, Settings):
        settings = config_or_home
    elif isinstance(config_or_home, Layout):
        settings = load(config_or_home.root)
    else:
        settings = load(config_or_home)
    check_private([settings.home])
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
    check_private(sqlite_files(path), "ledger file")
    if not path.parent.exists():
        make_private_dir(path.parent)
    return EmbeddedLedger(path, consortium, policy=settings.policy, batch_timeout=settings.batch_timeout)
