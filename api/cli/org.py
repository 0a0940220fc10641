"""``consortia org``: one organisation of a consortium without a centre, on its own host
(docs/fabric.md "A consortium without a centre"): ``init`` (its own Fabric CA and every identity it
issues), ``export`` (its public package, the one file it hands to the others), ``revoke`` (one of its
identities, with its CA's CRL) and ``ca
start|stop|status`` (its CA, needed again for new users and revocation)."""

from __future__ import annotations

from pathlib import Path

import typer

from api.cli.output import EXIT_REFUSED, EXIT_USAGE, JsonOpt, emit, fail, say, with_output

group = typer.Typer(
    no_args_is_help=True,
    help="This organisation on its own host: its own CA and identities (init), its public package (export).",
)
ca_group = typer.Typer(no_args_is_help=True, help="This organisation's certificate authority (Fabric CA).")
group.add_typer(ca_group, name="ca")

OrgHomeOpt = typer.Option(
    None,
    "--home",
    envvar="CONSORTIA_HOME",
    help="The organisation's home on this host (default ./consortia-home).",
)


def _home(home: Path | None) -> Path:
    return (home or Path("consortia-home")).resolve()


def org_init(
    org: str = typer.Option(..., "--org", help="The organisation's name, e.g. Org2 (MSP id Org2MSP)."),
    host: str = typer.Option(
        ..., "--host", help="Its address: every node of it listens there (127.0.0.0/8)."
    ),
    home: Path | None = OrgHomeOpt,
    port_base: int = typer.Option(7050, "--port-base", help="First of its ten ports (docs/fabric.md)."),
    users: int = typer.Option(1, "--users", help="How many client identities (User1..UserN)."),
    domain: str = typer.Option("", "--domain", help="Its domain (default <name lowercased>.example.com)."),
    as_json: bool = JsonOpt,
) -> None:
    """Make this organisation's home on its own host: start its Fabric CA (a CA and a TLS CA, TLS on its
    address) and let it issue the peer, orderer, admin, user and key-agreement identities (keys 0600,
    only in this home). The CA keeps running (`consortia org ca stop` stops it)."""
    from network.ca import init_organisation
    from network.config import NetworkError
    from network.organisation import Organisation

    try:
        nodes = init_organisation(
            _home(home), Organisation(org, host, port_base=port_base, domain=domain, users=users)
        )
    except NetworkError as exc:
        fail(
            str(exc),
            EXIT_USAGE if "already holds" in str(exc) else EXIT_REFUSED,
            as_json,
            kind="init refused",
        )
    o = nodes.org
    info = {
        "organisation": o.msp_id,
        "home": str(nodes.layout.root),
        "host": o.host,
        "crypto": str(nodes.layout.org_dir(o)),
        "endpoints": o.endpoints(),
        "ca": nodes.status()["nodes"]["ca"],
    }
    if as_json:
        emit(info, True)
        return
    say(f"{o.msp_id}: identities issued by its own CA in {info['crypto']}")
    say(f"  CA running on {o.endpoints()['ca']}")
    say(f"next: consortia org export --home {nodes.layout.root} --out {o.name.lower()}.pkg")


def org_export(
    out: Path | None = typer.Option(None, "--out", help="The package file (default ./<org>.pkg)."),
    home: Path | None = OrgHomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Write this organisation's PUBLIC package: its certificates (CA, TLS CA, admin, peer and orderer
    identities and TLS certificates, key-agreement certificate), config.yaml, endpoints, and the package's
    digest. It holds no private key; hand it (and tell its digest) to the other members."""
    from network.config import NetworkError
    from network.organisation import OrganisationLayout
    from network.package import export_package

    try:
        org = OrganisationLayout(_home(home)).organisation()
        pkg = export_package(_home(home))
        path = pkg.write(out or Path(f"{org.name.lower()}.pkg"))
    except NetworkError as exc:
        fail(str(exc), EXIT_REFUSED, as_json, kind="export refused")
    info = {"organisation": pkg.msp_id, "package": str(path.resolve()), "digest": pkg.computed_digest()}
    if as_json:
        emit(info, True)
        return
    say(f"{pkg.msp_id}'s public package: {info['package']}")
    say(f"  digest {info['digest']} (tell it to the others by a channel they trust)")


def org_revoke(
    identity: str = typer.Argument(..., help="The identity's enrollment name, e.g. User2@org2.example.com."),
    reason: str = typer.Option(
        "keycompromise", "--reason", help="The revocation reason (Fabric CA's names)."
    ),
    home: Path | None = OrgHomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Revoke one of this organisation's own identities at its own CA and write the CA's new CRL; then
    'consortia governance propose revoke' puts the CRL into the channel."""
    from network.ca import revoke_identity
    from network.config import NetworkError

    try:
        crl = revoke_identity(_home(home), identity, reason)
    except NetworkError as exc:
        fail(str(exc), EXIT_REFUSED, as_json, kind="revoke refused")
    info = {"identity": identity, "crl": str(crl)}
    if as_json:
        emit(info, True)
        return
    say(f"{identity} revoked; CRL {crl}")
    say("next: consortia governance propose revoke (signed by this organisation's admin alone)")


def _ca(action: str, home: Path | None, as_json: bool) -> None:
    from network.config import NetworkError
    from network.member import MemberNodes

    try:
        nodes = MemberNodes(_home(home))
        if action == "start":
            nodes.start("ca")
        elif action == "stop":
            nodes.stop("ca")
        state = nodes.status()["nodes"]["ca"]
    except NetworkError as exc:
        fail(str(exc), EXIT_REFUSED, as_json, kind=f"ca {action} refused")
    emit({"organisation": nodes.org.msp_id, **state}, as_json, f"{nodes.org.msp_id}'s certificate authority")


def ca_start(home: Path | None = OrgHomeOpt, as_json: bool = JsonOpt) -> None:
    """Start this organisation's CA (TLS on its own address)."""
    _ca("start", home, as_json)


def ca_stop(home: Path | None = OrgHomeOpt, as_json: bool = JsonOpt) -> None:
    """Stop this organisation's CA."""
    _ca("stop", home, as_json)


def ca_status(home: Path | None = OrgHomeOpt, as_json: bool = JsonOpt) -> None:
    """Whether this organisation's CA runs, and where."""
    _ca("status", home, as_json)


group.command("init")(with_output(org_init))
group.command("export")(with_output(org_export))
group.command("revoke")(with_output(org_revoke))
for _name, _command in (("start", ca_start), ("stop", ca_stop), ("status", ca_status)):
    ca_group.command(_name)(with_output(_command))
