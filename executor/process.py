"""Launch and run an audited learning process end to end (journey 2 of docs/design.md;
docs/audited-process.md; seed 003 §IV-B/C).

The pieces, in the order a consortium uses them:

* :func:`prepare_image` builds an algorithm image (container) or bundle (sandbox) from a folder of
  ``algorithm-images/`` and registers its digest on the ledger (``Image:register``);
* :func:`map_dataset` puts one organisation's local data where *its own* node agent reads it
  (``<data root>/<org>/<process dataset name>/dataset.npz``): the process names a dataset, each
  organisation maps that name to its own rows, and the data never leaves the organisation -- only
  the salted commitment the task computes reaches the ledger;
* :func:`launch` creates the ``LearningProcess`` (image pinned by digest, consortium, topology with
  seed, hyper-parameters, rounds, privacy budget) and starts it;
* :func:`executor.node.supervisor.run_process` runs every organisation's
  :class:`executor.node.agent.NodeAgent` on this machine, in the places a
  :class:`~executor.node.supervisor.LocalNodes` names (:class:`home.platform.Platform`) --
  one thread per organisation, or one OS process per organisation (``agents="processes"``, the same
  command a node runs, supervised: an agent that dies is restarted and resumes from the ledger) --
  until the process is completed or failed, reporting progress from the ledger;
* :func:`collect_models` fetches each organisation's published final model, decrypts it with that
  organisation's key-agreement key and checks it against the digest on the ledger;
* :func:`estimator_origins` computes the estimator-origin matrix of each final model (seed 003,
  Fig. 5) from ledger records alone (the estimator ids each model record lists).
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from algorithms.step import LocalDataset
from algorithms.task_runtime import save_dataset
from algorithms.validation import DEFAULT_FRACTION, check_fraction, supports
from executor.errors import ExecutorError
from executor.node.supervisor import LocalNodes
from ledger.client import ConsortiaClient, ImageRecord, ProcessRecord
from ledger.errors import ConsentMissing

if TYPE_CHECKING:
    from executor.images.declarations import ImageDeclaration

PROJECT_ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- image


@dataclass(frozen=True)
class PreparedImage:
    record: ImageRecord
    digest: str
    reference: str
    runtime: str


def prepare_image(
    client: ConsortiaClient, image_name: str, runtime: str, image_id: str | None = None, engine: Any = None
) -> PreparedImage:
    """Build (cached) the image of ``algorithm-images/<image_name>`` for ``runtime``, check its digest and
    register it (:func:`executor.images.build.build_and_register`, the one register-or-check); the default id
    carries the digest (``NAME-<12 hex>:VERSION``). An image already registered under ``image_id`` with the
    same digest is reused."""
    from executor.images.build import build_and_register

    built = build_and_register(
        client,
        image_name,
        runtime,
        image_id,
        engine,
        default_id=lambda recipe, b: f"{recipe.name}-{b.digest[7:19]}:{recipe.version}",
    )
    return PreparedImage(built.record, built.digest, built.reference, runtime)


# --------------------------------------------------------------------------- data


def dataset_dir(data_root: str | os.PathLike, org: str, dataset: str) -> Path:
    """Where ``org``'s node agent reads the process's dataset ``dataset`` (NodeAgent.data_dir)."""
    if not dataset or "/" in dataset or dataset.startswith("."):
        raise ExecutorError(f"invalid dataset name {dataset!r}")
    return Path(data_root) / org / dataset


def map_dataset(data_root: str | os.PathLike, org: str, dataset: str, data: LocalDataset) -> Path:
    """Write ``org``'s local data for the process dataset name ``dataset`` (read-only to its tasks)."""
    d = dataset_dir(data_root, org, dataset)
    d.mkdir(parents=True, exist_ok=True)
    path = d / "dataset.npz"
    tmp = d / "dataset.npz.tmp"
    save_dataset(tmp, data)
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------- launch


@dataclass(frozen=True)
class ProcessSpec:
    """What a process names (docs/audited-process.md); ``privacy_budget`` =
    ``{mechanism, epsilon, delta?, accounting?, scope?}`` (docs/dpsda.md "Privacy accounting")."""

    process_id: str
    image_id: str
    consortium: tuple[str, ...]
    topology: Mapping[str, Any]
    hyperparameters: Mapping[str, Any]
    rounds: int
    dataset: str = "default"
    privacy_budget: Mapping[str, Any] | None = None
    description: str = ""
    image_digest: str | None = None  # the digest the caller expects (the contract refuses another)
    # the share of its rows each member holds out to learn what collaboration bought it (docs/models.md);
    # None: the default for the image (algorithms.validation.DEFAULT_FRACTION if its algorithm can score
    # a slice, else none); 0: no slice
    validation_fraction: float | None = None

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {self.rounds}")
        if len(set(self.consortium)) != len(self.consortium) or len(self.consortium) < 1:
            raise ValueError(f"consortium must list distinct organisations, got {self.consortium}")
        if "seed" not in self.topology or "kind" not in self.topology:
            raise ValueError("topology must name its kind and seed, e.g. {'kind': 'ring', 'seed': 7}")
        if self.privacy_budget is not None and not float(self.privacy_budget.get("epsilon", -1)) > 0:
            raise ValueError(f"privacy budget must have epsilon > 0, got {self.privacy_budget}")
        if self.privacy_budget is not None and not float(self.hyperparameters.get("gradient_clip") or 0) > 0:
            # the ledger refuses it too (chaincode.privacy): without clipping no sensitivity bound holds
            raise ValueError(
                "a process with a privacy budget must clip: set hyperparameters.gradient_clip > 0"
            )
        if self.validation_fraction is not None:
            check_fraction(self.validation_fraction)


def launch(
    client: ConsortiaClient,
    spec: ProcessSpec,
    *,
    start: bool = True,
    consent: Mapping[str, ConsortiaClient] | None = None,
) -> ProcessRecord:
    """Create the process (the image's digest is pinned by the contract) and start it (``start=False``:
    create only; ``consortia process create`` without ``--start``).

    A process starts only once every member accepted it (docs/consent.md): ``consent`` (MSP id -> a
    client of an identity that consents for that member, e.g. its admin) gives each member's approval
    of the image and acceptance first (:func:`executor.consent.give_consent`; on one machine only);
    without it, ``start`` succeeds only if every member has already accepted on its own host.

    The topology, hyper-parameters and dataset name are checked first against what the image
    declares (:func:`executor.images.declarations.validate_process`; :class:`InvalidProcessSpec` lists every
    problem), so nothing is written for a process no agent could run."""
    from executor.images.declarations import validate_process

    image = client.get_image(spec.image_id)
    decl = validate_process(
        image.algorithm, spec.topology, spec.hyperparameters, spec.dataset, size=len(spec.consortium)
    )
    fraction = validation_fraction_for(decl, spec.validation_fraction)
    created = client.create_process(
        spec.process_id,
        spec.image_id,
        list(spec.consortium),
        dict(spec.topology),
        spec.rounds,
        dict(spec.hyperparameters),
        privacy_budget=None if spec.privacy_budget is None else dict(spec.privacy_budget),
        dataset=spec.dataset,
        image_digest=spec.image_digest or image.digest,
        description=spec.description,
        validation_fraction=fraction,
    )
    if not start:
        return created
    if consent is not None:
        from executor.consent import give_consent

        give_consent(consent, spec.process_id)
    try:
        return client.start_process(spec.process_id)
    except ConsentMissing as exc:
        raise ConsentMissing(
            f"learning process {spec.process_id} is created but not started: {exc.message} (each member "
            f"accepts it with `consortia process accept {spec.process_id}`, then it is started)",
            **exc.details,
        ) from None


def validation_fraction_for(decl: ImageDeclaration, declared: float | None) -> float:
    """The validation fraction a process of the image declared by ``decl`` records: ``declared``, or by
    default :data:`~algorithms.validation.DEFAULT_FRACTION` where its algorithm can score a slice and 0
    where it cannot (DPSDA: its members share one stream, there is no member model to train alone; an
    algorithm this host cannot load). A slice declared for an algorithm that cannot score one raises
    :class:`~executor.images.declarations.InvalidProcessSpec` (docs/models.md)."""
    from executor.images.declarations import InvalidProcessSpec, algorithm_class

    scores = supports(algorithm_class(decl))
    if declared is None:
        return DEFAULT_FRACTION if scores else 0.0
    fraction = check_fraction(declared)
    if fraction and not scores:
        raise InvalidProcessSpec(
            [f"algorithm {decl.algorithm} cannot score a validation slice: declare validation_fraction 0"]
        )
    return fraction


# --------------------------------------------------------------------------- results


def collect_models(
    platform: LocalNodes, process_id: str, orgs: Sequence[str] | None = None
) -> dict[str, bytes]:
    """Each organisation's final model (codec bytes): fetched from the owner's store, decrypted with
    the organisation's own key-agreement key, and checked against the model digest on the ledger."""
    from exchange.model_seal import open_model
    from exchange.store import ArtifactStore
    from wire.canonical import sha256_digest

    out: dict[str, bytes] = {}
    for org in orgs or platform.client(platform.consortium.msp_ids[0]).get_process(process_id).consortium:
        rec = platform.client(org).get_model(f"{process_id}:{org}")
        ciphertext = ArtifactStore(platform.store_root, rec.owner).get(rec.ciphertext_digest)
        sealed_key = base64.b64decode(rec.wrapped_key or "")
        model = open_model(ciphertext, sealed_key, platform.consortium.encryption_key(org), rec)
        if sha256_digest(model) != rec.digest:
            raise ExecutorError(f"model of {org} does not match its digest on the ledger")
        out[org] = model
    return out


def estimator_origins(client: ConsortiaClient, process_id: str) -> tuple[tuple[str, ...], list[list[int]]]:
    """Estimator-origin matrix (seed 003, Fig. 5) from the ledger alone: row = model owner, column =
    creator, entry = number of the owner's final estimators created by that organisation (from the
    estimator ids ``[creator, counter, digest]`` each Model record lists)."""
    orgs = tuple(client.get_process(process_id).consortium)
    matrix = [[0] * len(orgs) for _ in orgs]
    for i, owner in enumerate(orgs):
        rec = client.get_model(f"{process_id}:{owner}")
        for creator, _counter, _digest in rec.estimators:
            matrix[i][orgs.index(creator)] += 1
    return orgs, matrix
