"""``consortia image``: build, register, list, get, revoke, approve (and revoke approvals of) algorithm images."""

from __future__ import annotations

import contextlib

import typer

from api.cli.output import EXIT_REFUSED, EXIT_USAGE, check_digest, emit, err_console, fail, guarded
from api.cli.session import Session, journey

group = typer.Typer(
    no_args_is_help=True, help="Algorithm images: build, register, list, get, revoke, approve."
)
ImageArg = typer.Argument(..., help="The image id (NAME:VERSION).")


@journey(group, "register")
def image_register(
    s: Session,
    name: str = typer.Argument(..., help="The image name."),
    version: str = typer.Argument(..., help="The image version."),
    digest: str = typer.Option(..., help="sha256:<64 hex> of the image."),
    algorithm: str = typer.Option(..., help="The algorithm the image runs."),
    reference: str = typer.Option("", help="Where the image can be pulled or built from."),
    description: str = typer.Option("", help="A free-text description."),
) -> None:
    """Register an algorithm image built elsewhere (owner = your organisation); see also `image build`."""
    check_digest(digest, s.as_json, "--digest")
    rec = guarded(
        lambda: s.client.register_image(name, version, algorithm, digest, reference, description=description),
        s.as_json,
    )
    emit(rec, s.as_json, "image registered")


@journey(group, "build")
def image_build(
    s: Session,
    name: str = typer.Argument(
        ...,
        help="A folder of algorithm-images/ (e.g. collab-rf), or the path of a recipe or of your algorithm folder.",
    ),
    runtime: str = typer.Option("sandbox", help="sandbox (bubblewrap bundle) or container (Podman)."),
    image_id: str | None = typer.Option(
        None, "--id", "--tag", help="Image id NAME:VERSION (default: name and version of image.json)."
    ),
    registry: str | None = typer.Option(
        None, help="host:port of the consortium's registry: push there, register the reference by digest."
    ),
) -> None:
    """Build an algorithm image (a built-in recipe, or your algorithm folder with its hash-pinned
    requirements installed offline), check its digest against what was built, (push it,) and register it."""
    from executor.errors import ExecutorError
    from executor.images.build import build_and_register

    spinner = (
        err_console.status(f"building {name} ({runtime})...", spinner="dots")
        if not s.as_json
        else contextlib.nullcontext()
    )
    try:
        with spinner:
            done = guarded(
                lambda: build_and_register(s.client, name, runtime, image_id, registry=registry), s.as_json
            )
    except ExecutorError as exc:
        code = EXIT_USAGE if "no image recipe" in str(exc) else EXIT_REFUSED
        fail(str(exc), code, s.as_json, kind=exc.code)
    emit(
        done.to_dict(),
        s.as_json,
        "image built and registered" if done.registered else "image already registered",
    )


@journey(group, "pull")
def image_pull(s: Session, image_id: str = ImageArg) -> None:
    """Fetch an image (or sandbox bundle) from the registry by the digest its ledger record pins, and
    verify it: refused (IMAGE_TAMPERED) unless what arrives is exactly the pinned image."""
    from executor.errors import ExecutorError
    from executor.images.resolver import pull_record

    rec = guarded(lambda: s.client.get_image(image_id), s.as_json)
    try:
        where, digest = pull_record(rec)
    except ExecutorError as exc:
        fail(str(exc), EXIT_REFUSED, s.as_json, kind=exc.code)
    emit(
        {"id": rec.id, "reference": rec.reference, "digest": digest, "local": where},
        s.as_json,
        "image pulled",
    )


@journey(group, "list")
def image_list(s: Session) -> None:
    """Every registered algorithm image."""
    emit(
        guarded(s.client.list_images, s.as_json),
        s.as_json,
        "images",
        ["id", "owner", "status", "digest", "created"],
    )


@journey(group, "get")
def image_get(s: Session, image_id: str = ImageArg) -> None:
    """One image record: digest, algorithm, owner, status, approvals."""
    emit(guarded(lambda: s.client.get_image(image_id), s.as_json), s.as_json, f"image {image_id}")


@journey(group, "revoke")
def image_revoke(
    s: Session, image_id: str = ImageArg, reason: str = typer.Option("", help="Why it is revoked.")
) -> None:
    """Revoke your image: no new process can pin it."""
    emit(guarded(lambda: s.client.revoke_image(image_id, reason), s.as_json), s.as_json, "image revoked")


@journey(group, "approve", user="Admin")
def image_approve(
    s: Session,
    image_id: str = ImageArg,
    digest: str = typer.Option(..., help="The exact digest you inspected."),
    dataset: list[str] | None = typer.Option(
        None, "--dataset", help="Approve it only for this dataset (repeatable; default: every dataset)."
    ),
    expires: str | None = typer.Option(None, help="Until when (ISO-8601 with a time zone, e.g. ...Z)."),
) -> None:
    """Approve an image for use on your organisation's data, naming the exact digest you inspected
    (signed by your admin, or a role your membership record names; docs/consent.md). Approving again
    replaces your approval."""
    check_digest(digest, s.as_json, "--digest")
    rec = guarded(
        lambda: s.client.approve_image(image_id, digest, datasets=dataset or None, expires=expires), s.as_json
    )
    emit(rec, s.as_json, "image approved")


@journey(group, "revoke-approval", user="Admin")
def image_revoke_approval(
    s: Session, image_id: str = ImageArg, reason: str = typer.Option("", help="Why it is withdrawn.")
) -> None:
    """Withdraw your organisation's approval of an image: no new task of yours runs it."""
    rec = guarded(lambda: s.client.revoke_image_approval(image_id, reason), s.as_json)
    emit(rec, s.as_json, "image approval revoked")
