"""``consortia image``: build, register, list, get, revoke, approve algorithm images."""

from __future__ import annotations

import contextlib
from pathlib import Path

import typer

from api.cli.output import (
    EXIT_REFUSED,
    EXIT_USAGE,
    HomeOpt,
    JsonOpt,
    OrgOpt,
    check_digest,
    emit,
    err_console,
    fail,
    guarded,
)
from api.cli.session import session

group = typer.Typer(
    no_args_is_help=True, help="Algorithm images: build, register, list, get, revoke, approve."
)


@group.command("register")
def image_register(
    name: str = typer.Argument(..., help="The image name."),
    version: str = typer.Argument(..., help="The image version."),
    digest: str = typer.Option(..., help="sha256:<64 hex> of the image."),
    algorithm: str = typer.Option(..., help="The algorithm the image runs."),
    reference: str = typer.Option("", help="Where the image can be pulled or built from."),
    description: str = typer.Option("", help="A free-text description."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Register an algorithm image built elsewhere (owner = your organisation); see also `image build`."""
    check_digest(digest, as_json, "--digest")
    with session(home, org, as_json=as_json) as s:
        rec = guarded(
            lambda: s.client.register_image(
                name, version, algorithm, digest, reference, description=description
            ),
            as_json,
        )
        emit(rec, as_json, "image registered")


@group.command("build")
def image_build(
    name: str = typer.Argument(..., help="A folder of algorithm-images/ (e.g. collab-rf) or a path."),
    runtime: str = typer.Option("sandbox", help="sandbox (bubblewrap bundle) or container (Podman)."),
    image_id: str | None = typer.Option(None, "--id", help="Image id (default NAME:VERSION of image.json)."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Build an algorithm image, check its digest against what was built, and register it."""
    from executor.errors import ExecutorError
    from executor.image_build import build_and_register

    with session(home, org, as_json=as_json) as s:
        spinner = (
            err_console.status(f"building {name} ({runtime})...", spinner="dots")
            if not as_json
            else contextlib.nullcontext()
        )
        try:
            with spinner:
                done = guarded(lambda: build_and_register(s.client, name, runtime, image_id), as_json)
        except ExecutorError as exc:
            fail(
                str(exc),
                EXIT_USAGE if "no image recipe" in str(exc) else EXIT_REFUSED,
                as_json,
                kind=exc.code,
            )
        emit(
            done.to_dict(),
            as_json,
            "image built and registered" if done.registered else "image already registered",
        )


@group.command("list")
def image_list(home: Path | None = HomeOpt, org: str = OrgOpt, as_json: bool = JsonOpt) -> None:
    """Every registered algorithm image."""
    with session(home, org, as_json=as_json) as s:
        emit(
            guarded(s.client.list_images, as_json),
            as_json,
            "images",
            ["id", "owner", "status", "digest", "created"],
        )


@group.command("get")
def image_get(
    image_id: str = typer.Argument(..., help="The image id (NAME:VERSION)."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """One image record: digest, algorithm, owner, status, approvals."""
    with session(home, org, as_json=as_json) as s:
        emit(guarded(lambda: s.client.get_image(image_id), as_json), as_json, f"image {image_id}")


@group.command("revoke")
def image_revoke(
    image_id: str = typer.Argument(..., help="The image id (NAME:VERSION)."),
    reason: str = typer.Option("", help="Why it is revoked."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Revoke your image: no new process can pin it."""
    with session(home, org, as_json=as_json) as s:
        emit(guarded(lambda: s.client.revoke_image(image_id, reason), as_json), as_json, "image revoked")


@group.command("approve")
def image_approve(
    image_id: str = typer.Argument(..., help="The image id (NAME:VERSION)."),
    digest: str = typer.Option(..., help="The digest you inspected."),
    home: Path | None = HomeOpt,
    org: str = OrgOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Approve an image for your organisation, naming the digest you inspected."""
    check_digest(digest, as_json, "--digest")
    with session(home, org, as_json=as_json) as s:
        emit(guarded(lambda: s.client.approve_image(image_id, digest), as_json), as_json, "image approved")
