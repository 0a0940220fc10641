"""What creating a learning process costs now that it writes every record key the process will write.

    python -m benchmarks.process_creation [--members M] [--rounds R] [--repeat N]

``LearningProcess:create`` writes a placeholder with the members' key-level policy under each
member's acceptance key and each (round, member) execution-record key (docs/ledger.md, "Who
endorses what"), so the creation transaction grows with rounds x members. On the embedded host,
with ``M`` organisations, this creates ``N`` processes of ``R`` rounds and ``N`` of one round, and
prints for each: the wall time of one committed ``create_process`` (median, ms; endorsement, ordering
and commit included), the CPU time of the contract alone (``chaincode.dispatch.invoke`` on a fresh
simulator, best of N, ms), the keys written and the write set's bytes (values and policies), and the
CPU time of one ``LearningProcess:progress`` read of the new process (its bisection probes skip
placeholders). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from chaincode import dispatch
from ledger.client import ConsortiaClient, private_terms_transient
from ledger.embedded import EmbeddedLedger
from ledger.embedded.simulation import TxSimulator
from ledger.identity import Consortium
from wire.canonical import sha256_digest


def _spec(pid: str, members: list[str], rounds: int) -> str:
    return json.dumps(
        {
            "id": pid,
            "image_id": "bench-image:1",
            "consortium": members,
            "topology": {"kind": "ring", "seed": 1},
            "rounds": rounds,
        }
    )


def _simulate(led: EmbeddedLedger, creator: bytes, function: str, *args: str) -> tuple[float, TxSimulator]:
    con = led._store.connection()
    con.execute("BEGIN")
    try:
        sim = TxSimulator(
            con,
            tx_id="bench",
            channel=led.channel,
            timestamp=time.time(),
            creator=creator,
            transient=private_terms_transient({}, None),  # the private terms (docs/confidentiality.md)
            msp_id="Org1MSP",
            collections=led._collections,
        )
        t0 = time.thread_time()
        dispatch.invoke(sim, function, list(args))
        return time.thread_time() - t0, sim
    finally:
        con.execute("COMMIT")


def measure(members: int, rounds: int, repeat: int) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory() as tmp:
        orgs = [f"Org{i}" for i in range(1, members + 1)]
        consortium = Consortium.generate(Path(tmp) / "crypto", orgs)
        msps = [f"{o}MSP" for o in orgs]
        with EmbeddedLedger(Path(tmp) / "ledger.db", consortium, batch_timeout=0.002) as led:
            org1 = ConsortiaClient(led, consortium.identity("Org1"))
            org1.register_image("bench-image", "1", "collab-rf", sha256_digest(b"bench image"))
            creator = consortium.identity("Org1").serialized()
            out: dict[str, float | int] = {"members": members}
            for label, r in (("one_round", 1), ("rounds", rounds)):
                walls, cpus, reads = [], [], []
                for i in range(repeat):
                    cpu, sim = _simulate(
                        led, creator, "LearningProcess:create", _spec(f"sim-{label}-{i}", msps, r)
                    )
                    cpus.append(cpu)
                    pid = f"p-{label}-{i}"
                    t0 = time.perf_counter()
                    org1.create_process(pid, "bench-image:1", msps, {"kind": "ring", "seed": 1}, r)
                    walls.append(time.perf_counter() - t0)
                    reads.append(_simulate(led, creator, "LearningProcess:progress", pid)[0])
                rw = sim.rwset()
                out[f"{label}_n"] = r
                out[f"{label}_keys_written"] = len(rw["writes"])
                out[f"{label}_writeset_bytes"] = len(json.dumps(rw["writes"])) + len(
                    json.dumps(rw.get("metadata_writes", []))
                )
                out[f"{label}_create_ms"] = round(statistics.median(walls) * 1000, 2)
                out[f"{label}_contract_cpu_ms"] = round(min(cpus) * 1000, 2)
                out[f"{label}_progress_cpu_ms"] = round(min(reads) * 1000, 3)
            return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    out = measure(a.members, a.rounds, a.repeat)
    for k, v in out.items():
        print(f"{k:32} {v}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
