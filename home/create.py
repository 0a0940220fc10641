"""Making a home with every organisation's identities: ``consortia init --orgs`` (a new consortium on
an embedded ledger) and ``consortia init --crypto --fabric-profile`` (a home on a running Fabric
network). A home for ONE organisation of an existing consortium is :mod:`home.join`."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from home.errors import HomeError
from home.layout import Layout, home_root, make_private_dir
from home.ledger import open_ledger
from home.settings import Settings, load, write_config
from ledger.identity import Consortium


def init_home(
    home: str | os.PathLike[str] | None, organisations: Iterable[str], *, force: bool = False
) -> Settings:
    """Make a new home: crypto per organisation, ``consortia.toml``, the folders and an empty ledger.

    Refuses (:class:`HomeError`) a home that already has a configuration, crypto or ledger unless
    ``force`` (which replaces all three)."""
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
    make_private_dir(layout.root)  # a home holds keys, the ledger and the indexes: its owner's only
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
    crypto_path, profile_path = Path(crypto).resolve(), Path(profile).resolve()
    if not profile_path.is_file():
        raise HomeError(f"no Fabric connection profile at {profile_path}")
    try:
        consortium = Consortium(crypto_path)
        if not consortium.msp_ids:
            raise FileNotFoundError(f"no organisations under {crypto_path}")
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise HomeError(f"{crypto_path} is not a consortium's crypto directory: {exc}") from exc
    layout = Layout(home_root(home), crypto_dir=str(crypto_path))
    if layout.config.exists() and not force:
        raise HomeError(f"{layout.root} already holds a consortium ({layout.config}); use --force")
    write_config(layout, consortium, backend="fabric", profile=profile_path)
    return load(layout.root)
