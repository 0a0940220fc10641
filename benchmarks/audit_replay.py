"""Auditor replay of a small real process, step by step, timed (docs/audit-replay.md).

    python -m benchmarks.audit_replay

A consortium of three organisations on the embedded ledger; Org1 and Org2 run collaborative RF (the
end-to-end tests' small case: 6 rounds, ring) with sandboxed tasks; each then discloses the inputs of
every one of its tasks to Org3, which is not in the process (``audit.disclosure.disclose``: gather, seal,
record on the ledger), and Org3 replays the whole process from the two disclosures on its own bundle
cache (``audit.replay.replay_process``: pull the image by the ledger's reference and digest, check every
input, re-run every task in the sandbox, compare every output digest). Printed: the wall time of each
step, the tasks replayed and matched, the digests compared; the last line is JSON, also written to
``benchmarks/results/audit-replay.json``. ``benchmarks.reproducibility`` calls :func:`measure` for its
``replayed_tasks`` and ``replay_matched``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
ORGS = ("Org1MSP", "Org2MSP")
AUDITOR = "Org3MSP"
PID = "bench-replay"
PARAMS = {
    "n_new": 3,
    "n_share": 2,
    "n_max": 6,
    "max_depth": 3,
    "n_rep": 2,
    "schedule": ["FIT", "SHARE", "GET"] * 2,
}


def _data(seed: int, n: int) -> Any:
    from algorithms.step import LocalDataset

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0.4).astype(np.int64)
    return LocalDataset(X, y, name=f"cls-{seed}")


def measure(root: Path) -> dict[str, Any]:
    """Run, disclose, replay under ``root``; the figures."""
    from audit.disclosure import disclose
    from audit.replay import ImageSource, replay_process
    from exchange.service import node_store
    from executor.images.recipe import cache_root
    from executor.node.supervisor import run_process
    from executor.process import ProcessSpec, launch, map_dataset, prepare_image
    from executor.runtimes.sandbox import SandboxRuntime
    from home.platform import Platform
    from ledger.embedded import EmbeddedLedger
    from ledger.identity import Consortium

    consortium = Consortium.generate(root / "crypto", ["Org1", "Org2", "Org3"])
    p = Platform(EmbeddedLedger(root / "ledger.sqlite", consortium), consortium, root, root / "ledger.sqlite")
    try:
        t = time.perf_counter()
        client = p.client(ORGS[0])
        image = prepare_image(client, "collab-rf", "sandbox")
        for i, o in enumerate(ORGS):
            map_dataset(p.data_root, o, "train", _data(20 + i, 40 + 15 * i))
        spec = ProcessSpec(PID, image.record.id, ORGS, {"kind": "ring", "seed": 5}, PARAMS, 6, "train")
        launch(client, spec, consent=p.admins(ORGS))
        out = run_process(p, PID, SandboxRuntime)
        if out.status != "completed":
            raise RuntimeError(f"the process ended {out.status}")
        run_s = time.perf_counter() - t
        for o in ORGS:
            node_store(p.client(o), consortium, p.store_root, hosted=p.hosted)
        disclosures, disclose_s = [], {}
        for o in ORGS:
            t = time.perf_counter()
            places = p.places(o)
            store = node_store(p.client(o), consortium, p.store_root, hosted=p.hosted)
            d, _ = disclose(
                p.client(o), consortium, store, places.data, places.state, PID, list(range(1, 7)), AUDITOR
            )
            d.write(root / f"{o}.disclosure.json")
            disclose_s[o] = round(time.perf_counter() - t, 3)
            disclosures.append(d)
        # the auditor's own bundle cache: the image as the ledger names it
        import shutil

        name = image.reference.removeprefix("bundle:")
        own = root / "auditor-bundles"
        shutil.copytree(cache_root() / "bundles" / name, own / name, symlinks=True)
        t = time.perf_counter()
        rep = replay_process(
            PID, disclosures, p.client(AUDITOR), consortium.encryption_key(AUDITOR), ImageSource(own)
        )
        replay_s = time.perf_counter() - t
    finally:
        p.ledger.close()
    tasks = rep.tasks
    return {
        "process": "collaborative RF, 2 organisations, 6 rounds, sandbox",
        "run_process_s": round(run_s, 3),
        "disclose_s": disclose_s,
        "disclosure_bytes": {d.organisation: len(d.to_json()) for d in disclosures},
        "replay_process_s": round(replay_s, 3),
        "replay_per_task_s": round(sum(t.seconds for t in tasks) / max(1, len(tasks)), 3),
        "replayed_tasks": len(tasks),
        "replay_matched": sum(t.matched for t in tasks),
        "digests_compared": sum(t.compared for t in tasks),
        "models_matched": sum(bool(m["matched"]) for m in rep.models.values()),
        "replay_ok": rep.ok,
    }


def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="consortia-replay-bench-") as tmp:
        figures = measure(Path(tmp))
    for k, v in figures.items():
        print(f"  {k}: {v}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "audit-replay.json").write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    print(json.dumps(figures, sort_keys=True))
    return figures


if __name__ == "__main__":
    sys.exit(0 if main()["replay_ok"] else 1)
