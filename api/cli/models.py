"""``consortia model``: list, get (download), export, predict, grant, revoke, verify final models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from api.cli.output import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    JsonOpt,
    emit,
    err_console,
    fail,
    guarded,
    plain,
    report,
    store_failure,
    with_output,
    without_key,
)
from api.cli.session import Session, journey

if TYPE_CHECKING:
    from ledger.client import MemberGain

group = typer.Typer(
    no_args_is_help=True,
    help="Final models: list, get (download), export, predict, grant, revoke, verify "
    "(lineage: `provenance model`).",
)
ModelArg = typer.Argument(..., help="The model id (PROCESS:ORG, ORG a name or an MSP id).")
OrganisationArg = typer.Argument(..., help="The organisation (name or MSP id).")


ONE_CLASS = "; the slice holds one class only, so it measures that class alone"


def warn_if_worse(model_id: str, gain: MemberGain | None) -> None:
    """Tell the member on stderr, before its model is shown or written, that collaboration made it worse
    than the model it would have got alone (a negative gain on its own validation slice)."""
    if gain is None or not gain.negative:
        return
    err_console.print(
        f"warning: model {model_id} is WORSE than training alone on {gain.organisation}'s own validation "
        f"slice: {gain.metric} {gain.isolated:.4g} alone -> {gain.collaborative:.4g} together "
        f"({gain.gain:+.4g}, {gain.rows} rows{ONE_CLASS if gain.metric == 'one_class_accuracy' else ''}). "
        f"Check it before you use it (`consortia process get {model_id.rsplit(':', 1)[0]}` shows every "
        "member's gain; docs/models.md says how far to trust the figure).",
        markup=False,
        highlight=False,
    )


@journey(group, "list")
def model_list(s: Session) -> None:
    """Models whose access list includes your organisation."""
    models = [without_key(m) for m in guarded(s.client.list_models, s.as_json)]
    emit(models, s.as_json, "models", ["id", "owner", "process_id", "digest", "access"])


@journey(group, "get")
def model_get(
    s: Session,
    model_id: str = ModelArg,
    out: Path | None = typer.Option(None, help="Download the model payload to this file."),
) -> None:
    """Show a model with what collaboration bought its owner (its metric alone and together on its own
    validation slice); with --out, download it (access checked, digests verified). A model worse than
    training alone is announced on stderr before it is written."""
    from api.gateway import open_model_payload
    from exchange.errors import ArtifactError

    model = guarded(lambda: s.client.get_model(model_id), s.as_json)
    gain = guarded(lambda: s.client.model_gain(model), s.as_json)
    rec = plain(model)
    info = without_key(model.view(gain=gain))
    warn_if_worse(model_id, gain)
    if out is not None:
        try:
            data = guarded(lambda: open_model_payload(s.gateway(), rec), s.as_json)
        except ArtifactError as exc:
            store_failure(exc, s.as_json)
        out.write_bytes(data)
        info["downloaded_to"] = str(out)
    emit(info, s.as_json, f"model {model_id}")


@journey(group, "export")
def model_export(
    s: Session,
    model_id: str = ModelArg,
    out: Path = typer.Option(..., help="New folder for the exported model."),
) -> None:
    """Export a model in a standard format (scikit-learn joblib for forests, PyTorch state_dict for
    the VAE) with its digest, lineage reference and library versions in metadata.json."""
    from api.gateway import open_model_payload
    from api.model_export import ModelExportError, export_model
    from exchange.errors import ArtifactError

    model = guarded(lambda: s.client.get_model(model_id), s.as_json)
    warn_if_worse(model_id, guarded(lambda: s.client.model_gain(model), s.as_json))
    rec = plain(model)
    process = guarded(lambda: s.client.get_process(rec["process_id"]), s.as_json)
    try:
        payload = guarded(lambda: open_model_payload(s.gateway(), rec), s.as_json)
    except ArtifactError as exc:
        store_failure(exc, s.as_json)
    schema_file = s.dataset_dir(process.dataset) / "schema.json"
    schema = json.loads(schema_file.read_text()) if schema_file.is_file() else {}
    lineage = {
        "root_execution": f"{process.id}/{process.rounds}/{rec['owner']}",
        "image_id": process.image_id,
        "image_digest": rec.get("image_digest") or process.image_digest,
        "model_tx_id": rec.get("tx_id"),
        "dataset": process.dataset or "default",
        "verify": f"consortia model verify {model_id}",
    }
    try:
        done = export_model(
            payload,
            rec,
            out,
            features=schema.get("features"),
            label=schema.get("label"),
            classes=schema.get("classes"),
            lineage=lineage,
        )
    except ModelExportError as exc:
        fail(str(exc), EXIT_USAGE, s.as_json, kind=exc.code)
    emit({"folder": str(done.folder), **done.metadata}, s.as_json, f"model {model_id} exported")


@group.command("predict")
@with_output
def model_predict(
    model: Path = typer.Argument(..., help="A folder written by `consortia model export`."),
    csv: Path = typer.Option(..., "--csv", help="Rows to score (the model's feature columns)."),
    as_json: bool = JsonOpt,
) -> None:
    """Score CSV rows with an exported forest: one line per row (score and decision)."""
    from api.model_export import ModelExportError, predict_csv

    if not (model / "metadata.json").is_file():
        fail(
            f"{model} is not an exported model (no metadata.json): run `consortia model export MODEL --out DIR`",
            EXIT_NOT_FOUND,
            as_json,
            kind="not found",
        )
    if not csv.is_file():
        fail(f"no such file {csv}", EXIT_NOT_FOUND, as_json, kind="not found")
    try:
        scores, decisions, meta = predict_csv(model, csv)
    except ModelExportError as exc:
        fail(str(exc), EXIT_USAGE, as_json, kind=exc.code)
    rows = [
        {"row": i + 1, "score": float(sc), "positive": int(d)}
        for i, (sc, d) in enumerate(zip(scores, decisions))
    ]
    if as_json:
        print(json.dumps({"model_id": meta["model_id"], "model_digest": meta["model_digest"], "rows": rows}))
    else:
        emit(rows, False, f"{meta['model_id']} ({meta['decision']})", ["row", "score", "positive"])


@journey(group, "grant")
def model_grant(s: Session, model_id: str = ModelArg, organisation: str = OrganisationArg) -> None:
    """Give another organisation access (its own sealed copy of the data key)."""
    from exchange.model_seal import model_key_info, open_data_key
    from exchange.sealing import seal

    rec = plain(guarded(lambda: s.client.get_model(model_id), s.as_json))
    target = s.member(organisation)
    key = guarded(lambda: open_data_key(s.consortium, s.msp_id, rec), s.as_json)
    wrapped = seal(s.consortium.encryption_certificate(target), key, model_key_info(rec))
    granted = guarded(lambda: s.client.grant_model(model_id, target, wrapped), s.as_json)
    emit(without_key(granted), s.as_json, "access granted")


@journey(group, "revoke")
def model_revoke(s: Session, model_id: str = ModelArg, organisation: str = OrganisationArg) -> None:
    """Take an organisation off the access list; the data key is rotated and the model re-encrypted."""
    from api.gateway import revoke_with_rotation
    from exchange.errors import ArtifactError

    target = s.member(organisation)
    try:
        revoked = guarded(lambda: revoke_with_rotation(s.gateway(), s.client, model_id, target), s.as_json)
    except ArtifactError as exc:  # the stored model cannot be re-encrypted
        store_failure(exc, s.as_json)
    emit(without_key(revoked), s.as_json, "access revoked")


@journey(group, "verify")
def model_verify(s: Session, model_id: str = ModelArg) -> None:
    """Re-check every signature and digest of the model's lineage against the ledger (exit 1 if any
    check fails)."""
    from audit.verification import verify_model

    report(guarded(lambda: verify_model(s.client, model_id, index=s.synced_index()), s.as_json), s.as_json)
