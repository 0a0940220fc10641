"""The node agent's workers: the pool of isolated workers its tasks run in, and the policy of which
spare workers it starts before a process needs them (docs/executor.md "Node agent", "Warm mode").

The runtime starts and runs a worker (:class:`executor.runtimes.warm.WarmWorker`); which workers a node
keeps is decided here. :class:`WorkerPool` holds one warm worker per learning process kept across
rounds (``warm``), or starts a fresh one-shot worker per task while its key is being registered.

A node agent is its organisation's long-running daemon, so a worker whose interpreter started before a
process was launched is legitimately warm. With ``warm``, :class:`SpareWorkers` starts a *spare*

* for each image the agent is told to prewarm (``NodeAgent(prewarm=[digest or (digest, dataset)])``,
  ``consortia node run --prewarm DIGEST[=DATASET]``): started again each time one is taken;
* for the image of a process it is a member of that has not started yet
  (:meth:`SpareWorkers.prewarm_members`), or of one given process (:meth:`SpareWorkers.prewarm_process`,
  ``run_process(..., prewarm=True)``).

A spare mounts exactly one dataset folder (``<data root>/<dataset>``, read-only) and is taken only by
a process of the same image digest and dataset: it sees the data its task may see, nothing more. The
image is verified (:func:`executor.images.resolver.verify_digest`) before a spare starts -- a mismatch
refuses it -- and again before the spare is bound to a process (the node agent's step 1, as for a new
worker).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from pathlib import Path

from executor.errors import ExecutorError
from executor.images.declarations import dataset_problem, declaration
from executor.images.resolver import ImageResolver, verify_digest
from executor.runtimes.base import Limits, TaskRuntime
from executor.runtimes.warm import WarmWorker
from ledger.client import ConsortiaClient, ImageRecord, ProcessRecord

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


class WorkerPool:
    """An agent's workers: one warm worker per learning process kept across rounds (``warm``), or a
    fresh one-shot worker per task, started while the task key is being registered.

    **Spares** (``warm`` only): a worker started before any process needs it (:meth:`prewarm`), keyed
    by (image digest, dataset folder). A process's first task takes the spare of exactly its image and
    its dataset folder, which is then that process's worker for good (never handed to another process);
    the spare mounts that one folder, as the process's own worker would, so it sees nothing the task may
    not. The caller verifies the image before a spare starts and again before one is bound."""

    def __init__(self, runtime: TaskRuntime, limits: Limits, root: Path, org: str, warm: bool = False):
        self.runtime, self.limits, self.root, self.org, self.warm = runtime, limits, Path(root), org, warm
        self.workers: dict[str, WarmWorker] = {}  # process id -> its warm worker
        self.spares: dict[tuple[str, Path], WarmWorker] = {}  # (image digest, data dir) -> a spare
        self.keep: dict[tuple[str, Path], Path | None] = {}  # spares started again once taken -> bundle

    def live(self, pid: str, image_digest: str) -> bool:
        """Is a warm worker of this image running for ``pid`` (verified when it started)?"""
        w = self.workers.get(pid)
        return self.warm and w is not None and w.image_digest == image_digest and w.alive(max_age=2.0)

    def prewarm(
        self, image_digest: str, data_dir: Path, bundle_dir: Path | None, keep: bool = False
    ) -> WarmWorker | None:
        """Start a spare worker of ``image_digest`` mounting ``data_dir`` (unless one runs); ``keep``: start
        another each time one is taken. None without ``warm`` (one-shot workers are per task)."""
        if not self.warm:
            return None
        key = (image_digest, Path(data_dir))
        if keep:
            self.keep[key] = bundle_dir
        w = self.spares.get(key)
        if w is not None and w.alive(max_age=2.0):
            return w
        if w is not None:
            w.stop()
        w = self.spares[key] = self._start(
            f"spare-{secrets.token_hex(4)}", image_digest, data_dir, bundle_dir
        )
        return w

    def _start(self, label: str, image_digest: str, data_dir: Path, bundle_dir: Path | None) -> WarmWorker:
        """A new warm worker under ``<root>/<org>-<label>`` (also its container's name)."""
        name = "".join(c if c.isalnum() or c in "-_." else "-" for c in f"{self.org}-{label}")
        return WarmWorker(
            self.runtime,
            image_digest,
            self.root / name,
            data_dir,
            self.limits,
            bundle_dir,
            name=f"consortia-warm-{name}"[:120],
        ).start()

    def _take_spare(
        self, pid: str, image_digest: str, data_dir: Path, bundle_dir: Path | None
    ) -> WarmWorker | None:
        key = (image_digest, Path(data_dir))
        spare = self.spares.pop(key, None)
        if spare is None:
            return None
        if spare.bundle_dir != (Path(bundle_dir) if bundle_dir else None) or not spare.alive(max_age=2.0):
            spare.stop()
            return None
        self.workers[pid] = spare  # bound: this process's worker until it ends
        if key in self.keep:
            self.prewarm(image_digest, data_dir, self.keep[key])
        return spare

    def worker(
        self, pid: str, image_digest: str, data_dir: Path, bundle_dir: Path | None, work_dir: Path
    ) -> WarmWorker:
        """The worker for one task of ``pid``: its live warm worker, a spare of this image and dataset
        (bound to ``pid``), a new warm one, or a one-shot one under ``work_dir``."""
        if not self.warm:
            return WarmWorker(
                self.runtime, image_digest, work_dir, data_dir, self.limits, bundle_dir, one_shot=True
            ).start()
        w = self.workers.get(pid)
        if w is not None and w.alive(max_age=2.0):
            return w
        if w is not None:
            w.stop()
        spare = self._take_spare(pid, image_digest, data_dir, bundle_dir)
        if spare is not None:
            return spare
        w = self.workers[pid] = self._start(pid, image_digest, data_dir, bundle_dir)
        return w

    def stop(self, pid: str | None = None) -> None:
        """Stop the warm worker of ``pid`` (all, and the spares: None)."""
        for k in [k for k in self.workers if pid is None or k == pid]:
            self.workers.pop(k).stop()
        if pid is None:
            self.keep.clear()
            for key in list(self.spares):
                self.spares.pop(key).stop()


class SpareWorkers:
    """The spare-worker policy of one organisation's node (module doc): which spares ``pool`` starts,
    each verified first against the image the ledger names, on one of the folders under ``data_root``."""

    def __init__(self, pool: WorkerPool, client: ConsortiaClient, images: ImageResolver, data_root: Path):
        self.pool, self.client, self.images, self.data_root = pool, client, images, Path(data_root)

    def _start(self, image: ImageRecord, digest: str, dataset: str | None, keep: bool) -> WarmWorker | None:
        """Verify the image (``ImageDigestMismatch`` refuses the spare) and the dataset, then start it."""
        data_dir = dataset_dir(self.data_root, dataset)
        if (digest, data_dir) in self.pool.spares and not keep:
            return self.pool.spares[(digest, data_dir)]
        verify_digest(image.reference, digest, self.images.local_digest(image.reference))
        problem = dataset_problem(data_dir, declaration(image.algorithm))
        if problem is not None:
            raise ExecutorError(f"no spare worker for {digest}: {problem}")
        return self.pool.prewarm(digest, data_dir, self.images.bundle_dir(image.reference), keep)

    def prewarm_image(self, entry: PrewarmEntry, keep: bool = True) -> WarmWorker | None:
        """A spare of a registered, active image (by digest) on one dataset (``keep``: started again
        when taken)."""
        digest, dataset = parse_entry(entry)
        images = [i for i in self.client.list_images() if i.digest == digest and i.status == "active"]
        if not images:
            raise ExecutorError(f"no active image with digest {digest} on the ledger")
        return self._start(images[0], digest, dataset, keep)

    def prewarm_images(self, entries: Sequence[PrewarmEntry], keep: bool = True) -> None:
        """A spare of each image of ``entries`` (``warm`` only); a refusal (image not verified, no such
        dataset) is logged and the tasks of that image start their own workers."""
        for entry in entries if self.pool.warm else ():
            try:
                self.prewarm_image(entry, keep)
            except ExecutorError as exc:
                log.error("%s: no spare worker for %s: %s", self.pool.org, entry, exc)

    def prewarm_process(self, process: ProcessRecord) -> WarmWorker | None:
        """A spare for ``process``'s first task (its pinned image digest and dataset)."""
        image = self.client.get_image(process.image_id)
        return self._start(image, process.image_digest, process.dataset, keep=False)

    def prewarm_members(self, processes: list[ProcessRecord]) -> None:
        """A spare for each process of ``processes`` this organisation is a member of that has not
        started yet and has no worker here (``warm`` only); a refusal is logged (the task itself is then
        refused on the ledger)."""
        org = self.pool.org
        for p in processes if self.pool.warm else ():
            if org in p.consortium and p.status == "created" and p.id not in self.pool.workers:
                try:
                    self.prewarm_process(p)
                except ExecutorError as exc:
                    log.warning("%s: no spare worker for process %s: %s", org, p.id, exc)
