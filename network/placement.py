"""The placement of the native network: the address each organisation's peer and chaincode service
listen on, and the orderer's (docs/fabric.md "Placement"). Every organisation is a "host" of its
own: on one machine, a loopback address of its own (``127.0.1.1``, ``127.0.2.1``, ...).

``fabric-network/network up --hosts Org1=127.0.1.1,Org2=127.0.2.1,Org3=127.0.3.1,orderer=127.0.0.1``
gives it; anything not named stays on :data:`DEFAULT_HOST`. Only IPv4 loopback addresses
(127.0.0.0/8) are accepted: the network never listens on an interface other machines can reach."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
ORDERER = "orderer"  #: the placement key of the orderer
_LOOPBACK = ipaddress.ip_network("127.0.0.0/8")


class PlacementError(ValueError):
    """A placement that cannot be used: a non-loopback address, an unknown organisation, bad syntax."""


def check_address(address: str, what: str = "address") -> str:
    """``address`` if it is an IPv4 loopback address (127.0.0.0/8), else :class:`PlacementError`."""
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        raise PlacementError(
            f"{what}: {address!r} is not an IP address (loopback 127.0.0.0/8 only)"
        ) from None
    if ip.version != 4 or ip not in _LOOPBACK:
        raise PlacementError(
            f"{what}: {address} is not a loopback address; the network listens on 127.0.0.0/8 only"
        )
    return str(ip)


def parse_hosts(spec: str) -> dict[str, str]:
    """``"Org1=127.0.1.1,Org2=127.0.2.1,orderer=127.0.0.1"`` -> ``{"Org1": "127.0.1.1", ...}``;
    every address checked by :func:`check_address`, every name given once."""
    hosts: dict[str, str] = {}
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name, sep, address = (p.strip() for p in item.partition("="))
        if not sep or not name or not address:
            raise PlacementError(f"--hosts: {item!r} is not NAME=ADDRESS (e.g. Org1=127.0.1.1)")
        if name in hosts:
            raise PlacementError(f"--hosts: {name} is placed twice")
        hosts[name] = check_address(address, f"--hosts {name}")
    return hosts


def check_hosts(hosts: Mapping[str, str], organisations: Iterable[str]) -> dict[str, str]:
    """``hosts`` checked against the network's organisations (plus ``orderer``) and loopback-only."""
    known = [*organisations, ORDERER]
    unknown = sorted(set(hosts) - set(known))
    if unknown:
        raise PlacementError(f"placement names {unknown}, not organisations of this network: {known}")
    return {name: check_address(addr, f"placement of {name}") for name, addr in hosts.items()}


def placement_spec(hosts: Mapping[str, str]) -> str:
    """The ``--hosts`` form of a placement (inverse of :func:`parse_hosts`)."""
    return ",".join(f"{name}={addr}" for name, addr in hosts.items())


def recorded_hosts(net_dir: Path) -> dict[str, str]:
    """The placement a network directory was made with (``state.json``), ``{}`` if none."""
    try:
        placed = json.loads((Path(net_dir) / "state.json").read_text()).get("placement") or {}
    except (FileNotFoundError, ValueError):
        return {}
    return {str(k): str(v) for k, v in placed.items()}


def recorded_organisations(net_dir: Path) -> tuple[str, ...]:
    """The organisations a network directory was made with, in their order (the names its recorded
    placement gives an address, ``orderer`` aside), ``()`` if none is recorded."""
    return tuple(name for name in recorded_hosts(net_dir) if name != ORDERER)


def recorded_isolation(net_dir: Path) -> bool:
    """Whether a network directory's nodes were started in views of their own (``state.json``)."""
    try:
        return bool(json.loads((Path(net_dir) / "state.json").read_text()).get("isolate"))
    except (FileNotFoundError, ValueError):
        return False
