"""Spare workers of a node agent, started before a learning process needs them (docs/executor.md
"Node agent"; :class:`executor.runtimes.warm.WorkerPool`).

A node agent is its organisation's long-running daemon, so a worker whose interpreter started before a
process was launched is legitimately warm. With ``warm``, the agent starts a *spare* worker

* for each image it is told to prewarm (``NodeAgent(prewarm=[digest or (digest, dataset)])``,
  ``consortia node run --prewarm DIGEST[=DATASET]``): started again each time one is taken;
* for the image of a process it is a member of that has not started yet (:func:`prewarm_members`), or
  of one given process (:func:`prewarm_process`, ``run_process(..., prewarm=True)``).

A spare mounts exactly one dataset folder (``<data root>/<dataset>``, read-only) and is taken only by
a process of the same image digest and dataset: it sees the data its task may see, nothing more. The
image is verified (:func:`executor.images.verify_digest`) before a spare starts -- a mismatch refuses
it -- and again before the spare is bound to a process (the node agent's step 1, as for a new worker).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from executor.declarations import dataset_problem, declaration
from executor.errors import ExecutorError
from executor.images import verify_digest
from executor.runtimes.warm import WarmWorker
from ledger.client import ImageRecord, ProcessRecord

if TYPE_CHECKING:
    from executor.node_agent import NodeAgent

log = logging.getLogger(__name__)

PrewarmEntry = str | tuple[str, str]  # an image digest, or (image digest, dataset name)


def dataset_dir(data_root: Path, name: str | None) -> Path:
    """``<data root>/<dataset or 'default'>`` (a folder name, never a path)."""
    name = name or "default"
    if "/" in name or name.startswith("."):
        raise ExecutorError(f"invalid dataset name {name!r}")
    return Path(data_root) / name


def parse_entry(entry: PrewarmEntry) -> tuple[str, str]:
    """``DIGEST`` or ``DIGEST=DATASET`` (a tuple passes) as (digest, dataset; default ``default``)."""
    if isinstance(entry, tuple):
        return entry
    digest, _, dataset = entry.partition("=")
    return digest, dataset or "default"


def _start(
    agent: NodeAgent, image: ImageRecord, digest: str, dataset: str | None, keep: bool
) -> WarmWorker | None:
    """Verify the image (``ImageDigestMismatch`` refuses the spare) and the dataset, then start it."""
    data_dir = dataset_dir(agent.data_root, dataset)
    if (digest, data_dir) in agent.pool.spares and not keep:
        return agent.pool.spares[(digest, data_dir)]
    verify_digest(image.reference, digest, agent.images.local_digest(image.reference))
    problem = dataset_problem(data_dir, declaration(image.algorithm))
    if problem is not None:
        raise ExecutorError(f"no spare worker for {digest}: {problem}")
    return agent.pool.prewarm(digest, data_dir, agent.images.bundle_dir(image.reference), keep)


def prewarm_image(agent: NodeAgent, entry: PrewarmEntry, keep: bool = True) -> WarmWorker | None:
    """A spare of a registered, active image (by digest) on one dataset (``keep``: started again when
    taken)."""
    digest, dataset = parse_entry(entry)
    images = [i for i in agent.client.list_images() if i.digest == digest and i.status == "active"]
    if not images:
        raise ExecutorError(f"no active image with digest {digest} on the ledger")
    return _start(agent, images[0], digest, dataset, keep)


def prewarm_images(agent: NodeAgent, entries: Sequence[PrewarmEntry], keep: bool = True) -> None:
    """At agent start (``warm`` only): a spare of each image of ``entries``; a refusal (image not
    verified, no such dataset) is logged and the tasks of that image start their own workers."""
    for entry in entries if agent.warm else ():
        try:
            prewarm_image(agent, entry, keep)
        except ExecutorError as exc:
            log.error("%s: no spare worker for %s: %s", agent.org, entry, exc)


def prewarm_process(agent: NodeAgent, process: ProcessRecord) -> WarmWorker | None:
    """A spare for ``process``'s first task (its pinned image digest and dataset)."""
    image = agent.client.get_image(process.image_id)
    return _start(agent, image, process.image_digest, process.dataset, keep=False)


def prewarm_members(agent: NodeAgent, processes: list[ProcessRecord]) -> None:
    """A spare for each process of ``processes`` this organisation is a member of that has not started
    yet and has no worker here; a refusal is logged (the task itself is then refused on the ledger)."""
    for p in processes if agent.warm else ():
        if agent.org in p.consortium and p.status == "created" and p.id not in agent.pool.workers:
            try:
                prewarm_process(agent, p)
            except ExecutorError as exc:
                log.warning("%s: no spare worker for process %s: %s", agent.org, p.id, exc)
