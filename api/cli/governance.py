"""``consortia governance``: the consortium governs its membership (:mod:`network.governance`,
docs/governance.md). Every command runs on one member's own host with its own home (``--home``,
default ``$CONSORTIA_HOME``); only update and signature files travel between members::

    governance propose add-org --package NEWCOMER.pkg [--out UPDATE]   an update from the newcomer's package
    governance propose remove-org ORG [--out UPDATE]                   an update removing a member
    governance propose revoke [--crl FILE] [--out UPDATE]              this member's CRL into its own MSP
    governance sign UPDATE [--out SIGNATURE]                           this member's admin signs
    governance status UPDATE [--signature S ...]                       who signed, which policies are met
    governance submit UPDATE --signature S ... [--force]               to its own orderer, once met
    governance history                                                 the membership's configuration blocks

Every command takes ``-o table|wide|json`` (``--json``); a refused step (policies not met, a bad
signature, Fabric's refusal) is exit 1, a bad option 2, with one line on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from api.cli.output import EXIT_REFUSED, JsonOpt, emit, fail, say, with_output

group = typer.Typer(
    no_args_is_help=True,
    help="The consortium governs its membership: propose, sign, status, submit, history.",
)
propose_group = typer.Typer(no_args_is_help=True, help="Propose a channel configuration update.")
group.add_typer(propose_group, name="propose")

HomeOpt = typer.Option(
    None, "--home", envvar="CONSORTIA_HOME", help="This organisation's home (default ./consortia-home)."
)
ChannelOpt = typer.Option("consortia", "--channel", help="The channel.")
SignaturesOpt = typer.Option([], "--signature", help="A signature file (repeat).")


def _home(home: Path | None) -> Path:
    return (home or Path("consortia-home")).resolve()


def _step(as_json: bool, run: Any) -> Any:
    from network.config import NetworkError

    try:
        return run()
    except NetworkError as exc:
        fail(str(exc), EXIT_REFUSED, as_json, kind=type(exc).__name__)


def _proposed(
    action: str,
    channel: str,
    out: Path | None,
    home: Path | None,
    as_json: bool,
    **what: Any,
) -> None:
    from network.governance import propose
    from network.member import MemberNodes

    def run() -> dict[str, Any]:
        nodes = MemberNodes(_home(home))
        proposal = propose(nodes, channel, action, **what)
        path = proposal.write(out or Path(f"{action}-{proposal.subject}.update"))
        return {
            "update": str(path.resolve()),
            "update_digest": proposal.digest,
            "channel": channel,
            "action": action,
            "organisation": proposal.subject,
            "description": proposal.description,
            "package_digest": proposal.package_digest,
            "base_config_block": proposal.base_number,
        }

    info = _step(as_json, run)
    if as_json:
        emit(info, True)
        return
    say(f"{info['description']}")
    say(
        f"update {info['update']} ({info['update_digest']}): each admin signs it with 'consortia governance sign'"
    )


OutOpt = typer.Option(None, "--out", help="The update file (default ./<action>-<MSP>.update).")


def propose_add_org(
    package: Path = typer.Option(
        ..., "--package", help="The newcomer's public package (consortia org export)."
    ),
    channel: str = ChannelOpt,
    out: Path | None = OutOpt,
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Add an organisation: its application and orderer organisation and its orderer as a consenter."""
    from network.config import NetworkError
    from network.package import OrganisationPackage

    try:
        pkg = OrganisationPackage.read(package)
    except NetworkError as exc:
        fail(str(exc), EXIT_REFUSED, as_json, kind="package refused")
    _proposed("add-org", channel, out, home, as_json, package=pkg)


def propose_remove_org(
    organisation: str = typer.Argument(..., help="The member to remove (Org4 or Org4MSP)."),
    channel: str = ChannelOpt,
    out: Path | None = OutOpt,
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Remove a member: its organisations and its consenter."""
    _proposed("remove-org", channel, out, home, as_json, organisation=organisation)


def propose_revoke(
    crl: Path | None = typer.Option(
        None,
        "--crl",
        help="The CRL of this organisation's CA (default: the last 'consortia org revoke' made).",
    ),
    channel: str = ChannelOpt,
    out: Path | None = OutOpt,
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Put this organisation's CRL into its own MSP: the identities it lists are refused."""
    from network.organisation import OrganisationLayout

    path = crl or OrganisationLayout(_home(home)).crl
    if not path.is_file():
        fail(
            f"no CRL at {path}: run 'consortia org revoke IDENTITY' first",
            EXIT_REFUSED,
            as_json,
            kind="no CRL",
        )
    _proposed("revoke", channel, out, home, as_json, crl_pem=path.read_text())


def sign(
    update: Path = typer.Argument(..., help="The update file."),
    out: Path | None = typer.Option(None, "--out", help="The signature file (default ./<update>.<MSP>.sig)."),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Sign the update with this organisation's own admin key, after checking it applies to the
    configuration its own orderer delivers; what it changes is computed from the update itself."""
    from network.governance import Configtxlator, ConfigUpdateProposal, config_of_block, update_changes
    from network.governance import sign as sign_update
    from network.member import MemberNodes

    def run() -> dict[str, Any]:
        nodes = MemberNodes(_home(home))
        proposal = ConfigUpdateProposal.read(update)
        signature = sign_update(nodes, proposal)
        path = signature.write(out or update.with_name(f"{update.name}.{nodes.org.msp_id}.sig"))
        tx = Configtxlator(nodes.fabric_home)
        changes = update_changes(tx, proposal, config_of_block(tx, proposal.base_block))
        return {
            "signature": str(path.resolve()),
            "organisation": nodes.org.msp_id,
            "update_digest": proposal.digest,
            "changes": changes,
        }

    info = _step(as_json, run)
    if as_json:
        emit(info, True)
        return
    say(
        f"{info['organisation']} signed {info['update_digest']}: {info['signature']} (send it to the submitter)"
    )
    say(f"  the update: {info['changes']}")


def _signatures(paths: list[Path]) -> list[Any]:
    from network.governance import ConfigSignatureFile

    return [ConfigSignatureFile.read(p) for p in paths]


def status(
    update: Path = typer.Argument(..., help="The update file."),
    signature: list[Path] = SignaturesOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Which members signed, which policies the update must meet, whether they are met, what is missing."""
    from network.governance import Configtxlator, ConfigUpdateProposal, update_status

    def run() -> dict[str, Any]:
        proposal = ConfigUpdateProposal.read(update)
        return update_status(proposal, _signatures(signature), Configtxlator()).to_json()

    info = _step(as_json, run)
    if as_json:
        emit(info, True)
        return
    emit(
        [{"policy": p, "met": v["met"], "detail": v["detail"]} for p, v in info["policies"].items()],
        False,
        f"{info['action']} {info['organisation']}: signed by {', '.join(info['signed']) or 'none'}",
    )
    for msp, why in info["invalid"].items():
        say(f"  refused signature of {msp}: {why}")
    say("ready to submit" if info["ready"] else f"not ready: {info['missing']}")


def submit(
    update: Path = typer.Argument(..., help="The update file."),
    signature: list[Path] = SignaturesOpt,
    force: bool = typer.Option(
        False, "--force", help="Send even though the policies are not met here (Fabric judges)."
    ),
    home: Path | None = HomeOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Submit the signed update to this organisation's own orderer once the channel's policies are met."""
    from network.governance import ConfigUpdateProposal
    from network.governance import submit as submit_update
    from network.member import MemberNodes

    def run() -> dict[str, Any]:
        proposal = ConfigUpdateProposal.read(update)
        return submit_update(MemberNodes(_home(home)), proposal, _signatures(signature), force=force)

    info = _step(as_json, run)
    if as_json:
        emit(info, True)
        return
    say(
        f"{info['action']} {info['organisation']}: configuration block {info['config_block']}; "
        f"members {', '.join(info['members'])}"
    )


def history(channel: str = ChannelOpt, home: Path | None = HomeOpt, as_json: bool = JsonOpt) -> None:
    """The channel's configuration blocks: members, consenters and revocations each one changed."""
    from network.governance import history as membership_history
    from network.member import MemberNodes

    def run() -> list[dict[str, Any]]:
        return [c.to_json() for c in membership_history(MemberNodes(_home(home)), channel)]

    rows = _step(as_json, run)
    emit(
        rows,
        as_json,
        f"membership of channel {channel}",
        columns=[
            "block",
            "time",
            "members",
            "added",
            "removed",
            "consenters_added",
            "consenters_removed",
            "revoked",
        ],
    )


propose_group.command("add-org")(with_output(propose_add_org))
propose_group.command("remove-org")(with_output(propose_remove_org))
propose_group.command("revoke")(with_output(propose_revoke))
for _command, _name in ((sign, "sign"), (status, "status"), (submit, "submit"), (history, "history")):
    group.command(_name)(with_output(_command))
