"""Cross-host artifact fetch: throughput and client memory of one large artifact over mutual TLS.

    python -m benchmarks.artifact_fetch [--mb 50] [--host 127.0.1.1]

Org1's artifact service (``exchange.service``, a separate process listening on a loopback address of
its own) serves a random ``--mb`` MB artifact written into its store; Org2 fetches it into its own store
with its TLS client certificate (``exchange.store.ArtifactStore.fetch_into`` through the
``exchange.client.ArtifactClient`` its locations resolve Org1 to: streamed in 1 MiB chunks to a temporary
file, re-hashed, renamed into Org2's store).

Figures: ``artifact_fetch_mb_s`` (MB = 10^6 bytes, wall clock of the fetch including the re-hash and
the fsync) and ``peak_rss_mb``: the growth of the client process's resident set during the fetch,
peak minus the resident set just before (Linux: ``VmHWM`` after resetting it through
``/proc/self/clear_refs``; ``rss_method`` says which). The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

from exchange.locations import Locations
from exchange.readers import StaticReaders
from exchange.service import ArtifactServer
from exchange.store import ArtifactStore
from exchange.tls import ClientTLS
from ledger.identity import Consortium


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak_rss() -> str:
    """Reset the kernel's peak-RSS mark (VmHWM) if allowed; the method the figure is measured with."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return "VmHWM after clear_refs, minus VmRSS before"
    except OSError:
        return "ru_maxrss (peak since process start), minus VmRSS before"


def peak_rss_kb() -> int:
    return _status_kb("VmHWM")


def write_random_artifact(store: ArtifactStore, size: int) -> str:
    """A random artifact of ``size`` bytes written into ``store`` in chunks; its digest."""
    tmp = store.home / ".bench"
    h = hashlib.sha256()
    with tmp.open("wb") as f:
        left = size
        while left:
            chunk = os.urandom(min(left, 1 << 20))
            f.write(chunk)
            h.update(chunk)
            left -= len(chunk)
    digest = "sha256:" + h.hexdigest()
    dest = store.path(digest)
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.replace(tmp, dest)
    return digest


def _serve(crypto: str, root: str, host: str, size: int, conn) -> None:
    consortium = Consortium(crypto)
    store = ArtifactStore(root, "Org1MSP")
    digest = write_random_artifact(store, size)
    srv = ArtifactServer((host, 0), store, consortium, StaticReaders({digest: ["Org2MSP"]}))
    conn.send((digest, srv.url))
    srv.serve_forever()


def run(mb: float, host: str) -> dict:
    size = int(mb * 1e6)
    with tempfile.TemporaryDirectory(prefix="consortia-fetch-bench-") as d:
        consortium = Consortium.generate(Path(d) / "crypto", ["Org1", "Org2"])
        parent, child = mp.get_context("fork").Pipe()
        server = mp.get_context("fork").Process(
            target=_serve, args=(str(consortium.root), str(Path(d) / "org1"), host, size, child), daemon=True
        )
        server.start()
        try:
            digest, url = parent.recv()
            locations = Locations(ClientTLS(consortium, "Org2MSP"), endpoints={"Org1MSP": url})
            store = ArtifactStore(Path(d) / "org2", "Org2MSP", locations=locations)
            figures = measured_fetch(store, "Org1MSP", digest)
            locations.close()
            assert figures["artifact_mb"] == round(size / 1e6, 1)
        finally:
            server.terminate()
            server.join(5)
    return {**figures, "host": host}


def measured_fetch(store: ArtifactStore, owner: str, digest: str) -> dict:
    """Fetch ``owner``'s ``digest`` into ``store`` and remove it again; throughput and RSS growth."""
    before = _status_kb("VmRSS")
    method = reset_peak_rss()
    t0 = time.perf_counter()
    path = store.fetch_into(owner, digest)
    wall = time.perf_counter() - t0
    peak = peak_rss_kb()
    size = path.stat().st_size
    path.unlink()
    return {
        "artifact_mb": round(size / 1e6, 1),
        "fetch_s": round(wall, 3),
        "artifact_fetch_mb_s": round(size / 1e6 / wall, 1),
        "peak_rss_mb": round(max(0, peak - before) / 1024, 1),
        "rss_method": method,
    }


def serve_home(home: str, mb: float, listen: str, reader: str) -> None:
    """Between hosts (benchmarks.consortium): serve a random artifact from the store of ``home``'s
    organisation, readable by ``reader`` (given here; on the ledger path the service looks readers up
    once per digest before any byte moves); prints ``digest url`` once serving."""
    from home.settings import load

    settings = load(home)
    consortium = Consortium(settings.crypto)
    org = str(settings.node_setting("organisation"))
    store = ArtifactStore(settings.paths.store_root, org)
    digest = write_random_artifact(store, int(mb * 1e6))
    host, _, port = listen.rpartition(":")
    srv = ArtifactServer((host, int(port)), store, consortium, StaticReaders({digest: [reader]}))
    print(digest, srv.url, flush=True)
    srv.serve_forever()


def fetch_home(home: str, url: str, owner: str, digest: str) -> dict:
    """Between hosts: fetch ``digest`` from ``owner``'s service at ``url`` into ``home``'s own store,
    as a node agent does (streamed, re-hashed); throughput and this process's RSS growth."""
    from home.settings import load

    settings = load(home)
    consortium = Consortium(settings.crypto)
    org = str(settings.node_setting("organisation"))
    locations = Locations(ClientTLS(consortium, org), endpoints={owner: url})
    store = ArtifactStore(settings.paths.store_root, org, locations=locations)
    try:
        return measured_fetch(store, owner, digest)
    finally:
        locations.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=50.0, help="artifact size in MB (10^6 bytes)")
    ap.add_argument("--host", default="127.0.1.1", help="the service's loopback address")
    ap.add_argument(
        "--serve-home", help="between hosts: serve from this joined home (with --listen, --reader)"
    )
    ap.add_argument("--listen", help="--serve-home: host:port")
    ap.add_argument("--reader", help="--serve-home: the MSP id allowed to read the artifact")
    ap.add_argument(
        "--fetch-home", help="between hosts: fetch into this joined home (--url, --owner, --digest)"
    )
    ap.add_argument("--url")
    ap.add_argument("--owner")
    ap.add_argument("--digest")
    args = ap.parse_args()
    if args.serve_home:
        serve_home(args.serve_home, args.mb, args.listen, args.reader)
    elif args.fetch_home:
        print(json.dumps(fetch_home(args.fetch_home, args.url, args.owner, args.digest), sort_keys=True))
    else:
        print(json.dumps(run(args.mb, args.host), sort_keys=True))


if __name__ == "__main__":
    main()
