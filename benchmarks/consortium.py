"""A consortium across hosts on real Fabric beside the simulator, and one large artifact between hosts.

    python -m benchmarks.consortium [--quick] [--consensus bft|raft|founder]

``bft`` (the default) and ``raft``: four members without a centre (benchmarks.members): each member's
own Fabric CA issues its identities on its own host (``consortia org init``), only the public packages
and the genesis block cross, the channel has one orderer per member (SmartBFT, or etcdraft), each home is
made by ``consortia join --package``, and the first member runs the image registry. ``founder``: three
organisations of a founder-made network (benchmarks.deployment: ``fabric-network/network up --hosts …
--isolate``, one etcdraft orderer, every key made on the founder's machine, homes made by ``consortia
join`` from what the founder handed over). Either way every organisation's peer, chaincode service, node
agent and artifact service run in a bubblewrap view of its own folder only, on its own loopback address
127.0.N.1, and every agent pulls the image from the registry by its ledger digest.

1. **The audited process.** Collaborative RF on the credit-card data (benchmarks.audit_overhead_cases's
   full case for the layout's organisations: 10 % of the rows, the seed's forest sizes, its 12 rounds;
   ``--quick``: the first 6 rounds) is run by the simulator in this process and, across the hosts, by ``consortia
   process create --start`` on Org1's host. On the four members (bft, raft) the process is Org1's, Org2's
   and Org3's (their parts of the rows split four ways); Org4 is in the channel and not in the process. The audited wall time runs from that command to the ledger's
   ``completed``: ``consent_s`` of it until the process started (the create, then each member's admin
   on its own host approving the image and accepting the terms, the hosts at the same time),
   ``rounds_s`` from the start to ``completed``. The nodes were running before, as an organisation's node is: each agent started with
   ``--prewarm`` (the image, pulled from the registry and verified, in a spare warm worker on the
   dataset folder) and had published its membership record; ``prewarm_s`` is how long that took. ``fabric_audit_ratio`` = audited wall / simulated wall; ``bit_identical``: every state,
   message and model digest on the ledger and each organisation's model (fetched on its own host) equal
   the simulator's.
2. **Between hosts.** Org1's host serves a random ``--fetch-mb`` MB artifact (benchmarks.artifact_fetch
   ``--serve-home``: its store, its TLS identity, mutual TLS) that Org2's host fetches into its own store
   through the agent's client (``exchange.store.ArtifactStore.fetch_into``: streamed, re-hashed):
   ``artifact_fetch_mb_s`` and ``peak_rss_mb``, that process's resident-set growth during the fetch.

3. **What a non-member reads** (bft, raft; benchmarks/consortium.py ``run_exposure``, :mod:`audit.exposure`):
   the process's hyper-parameters, privacy budget, per-round metrics, ε figures and data commitments as
   Org1 reads them, byte-searched in Org4's peer folder and in every block Org4's peer's Deliver service
   hands to Org4's admin: ``non_member_cleartext_hits`` (values found, each once; by kind in
   ``non_member_cleartext_hits_by_kind``); ``member_control_hits``: the same search of Org1's peer folder,
   which must find every value (``cleartext_needles``).

4. **Keys** (bft, raft): every private key in every member's view (its host's folder) matched by its
   public key against every certificate (benchmarks.key_custody): ``private_keys_outside_owner`` counts
   those that are another member's or of no certificate of the view's member.

The last line printed is JSON; the report goes to
``benchmarks/results/consortium[-bft|-raft][-quick][-TAG].{json,md}`` (no infix: founder; ``--tag TAG``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.deployment import Deployment, Host, free_port

RESULTS = Path(__file__).resolve().parent / "results"
FOUNDER_ORGS = ("Org1", "Org2", "Org3")
MEMBER_ORGS = ("Org1", "Org2", "Org3", "Org4")
PROCESS_MEMBERS = ("Org1", "Org2", "Org3")  # of MEMBER_ORGS: Org4 is in the channel, not in the process


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def mismatches(client: Any, hosts: dict[str, Host], pid: str, sim: Any, rounds: int) -> list[str]:
    """Where process ``pid`` of the organisations of ``hosts`` differs from the simulator's run ``sim``:
    one completed record per organisation and round, every state and message digest equal to the
    simulator's, and each organisation's model (fetched on its own host with ``consortia model get``)
    byte-equal to the simulator's. Empty: bit-identical."""
    recs = [r for r in client.query_executions(pid) if r.status == "completed"]
    tasks = sorted((r.organisation, r.round) for r in recs)
    want = sorted((h.msp, k) for h in hosts.values() for k in range(1, rounds + 1))
    if tasks != want:
        return [f"completed records {tasks} are not one per organisation and round {want}"]
    wrong = []
    for r in recs:
        if r.result is None:
            wrong.append(f"{r.organisation} round {r.round}: no result")
            continue
        out = r.result.outputs
        sent = {(r.organisation, m.recipient): m.digest for m in out.messages}
        expected = {k: v for k, v in sim.message_digests[r.round - 1].items() if k[0] == r.organisation}
        if out.state != sim.state_digests[r.round][r.organisation]:
            wrong.append(f"{r.organisation} round {r.round}: state {out.state}")
        if sent != expected:
            wrong.append(f"{r.organisation} round {r.round}: messages {sent} != {expected}")
    for host in hosts.values():  # each organisation fetches its own model on its own host
        out_file = host.home / f"{pid}.model"
        host.consortia("model", "get", f"{pid}:{host.msp}", "--out", str(out_file))
        got = hashlib.sha256(out_file.read_bytes()).hexdigest()
        if got != hashlib.sha256(sim.models[host.msp]).hexdigest():
            wrong.append(f"{host.msp}'s model {got} differs from the simulator's")
    return wrong


def run_process(hosts: dict[str, Host], registry: str, case: dict[str, Any], sim: Any) -> dict[str, Any]:
    owner = hosts["Org1"]
    image_id = f"collab-rf:bench{int(time.time())}"
    digest = owner.consortia("image", "build", "collab-rf", "--id", image_id, "--registry", registry)[
        "digest"
    ]
    for host in hosts.values():  # each node: its data, its services, a spare worker of the image started
        host.save_dataset(case["data"][host.msp], "bench")
        host.start_artifact_service()
        (host.root / "barrier").mkdir(exist_ok=True)
        host.start_agent("--prewarm", f"{digest}=bench", "--barrier", str(host.root / "barrier"))
    t_prewarm = time.perf_counter()
    for host in hosts.values():  # the node is running before the process is launched
        ready = host.root / "barrier" / f"{host.msp}.ready"
        while not ready.exists():
            if time.perf_counter() - t_prewarm > 600 or host.procs["agent"].poll() is not None:
                raise SystemExit(f"{host.name}'s agent did not get ready: {host.log('agent')[-2000:]}")
            time.sleep(0.1)
        (host.root / "barrier" / "go").touch()
    prewarm_s = time.perf_counter() - t_prewarm
    client = owner.ledger_client()
    try:
        deadline = time.monotonic() + 120  # every node is up: its membership record is on the ledger
        while {m.msp_id for m in client.list_members()} < {h.msp for h in hosts.values()}:
            if time.monotonic() > deadline:
                raise SystemExit("the node agents did not publish their membership records in 120 s")
            time.sleep(0.5)
        pid = f"bench-{int(time.time())}"
        t0 = time.perf_counter()
        members = tuple(h.msp for h in hosts.values())
        owner.create_process(
            pid,
            image_id,
            members,
            case["topology"],
            case["rounds"],
            "bench",
            case["params"],
            list(hosts.values()),
        )
        started = time.perf_counter()  # every member consented and the process started
        while (status := client.get_process(pid).status) == "running":
            if time.perf_counter() - t0 > 7200:
                raise SystemExit("the process did not complete in 2 h")
            time.sleep(0.1)
        wall = time.perf_counter() - t0
        if status != "completed":
            logs = {h.name: h.log("agent")[-1500:] for h in hosts.values()}
            raise SystemExit(f"process {pid} ended {status}: {logs}")
        wrong = mismatches(client, hosts, pid, sim, case["rounds"])
        if wrong:
            print("not bit-identical:", *wrong[:10], sep="\n  ", flush=True)
    finally:
        client.ledger.close()
    return {
        "audited_s": round(wall, 2),
        "consent_s": round(started - t0, 2),
        "rounds_s": round(wall - (started - t0), 2),
        "bit_identical": not wrong,
        "process_id": pid,
        "prewarm_s": round(prewarm_s, 2),
    }


def run_exposure(
    hosts: dict[str, Host],
    member: str,
    outsider: str,
    pid: str,
    peer_folder: Callable[[Host], Path] | None = None,
) -> dict[str, Any]:
    """What ``outsider`` (in the channel, not in process ``pid``) can read of the process
    (:mod:`audit.exposure`): the process's confidential values as ``member`` reads them, byte-searched
    in ``outsider``'s peer folder (its ``fileSystemPath``; ``peer_folder`` names it where the peers are
    not each member's own, as in a founder's network) and in every block its own peer's Deliver service
    hands to its admin; the same search of ``member``'s peer folder is the positive control."""
    from audit.exposure import files_of, process_needles, search, search_blocks
    from home.settings import load
    from ledger.identity import Consortium
    from network.organisation import OrganisationLayout

    def own_peer_folder(host: Host) -> Path:  # CORE_PEER_FILESYSTEMPATH (network/member.py)
        return OrganisationLayout(host.home).fabric / "data" / "peer"

    peer_folder = peer_folder or own_peer_folder

    from ledger.fabric.gateway import FabricLedger

    inside = hosts[member].ledger_client()
    outside = hosts[outsider].ledger_client()
    try:
        assert isinstance(outside.ledger, FabricLedger)
        models = [m for m in inside.list_models() if m.process_id == pid]
        needles = process_needles(inside.get_process(pid), inside.query_executions(pid), models)
        height = inside.ledger.block_height(inside.identity)
        admin = Consortium(load(hosts[outsider].home).crypto).identity(hosts[outsider].msp, "Admin")
        deadline = time.monotonic() + 60  # the outsider's peer commits the last blocks a moment later
        while outside.ledger.block_height(admin) < height:
            if time.monotonic() > deadline:
                raise SystemExit(f"{outsider}'s peer did not reach block height {height} in 60 s")
            time.sleep(0.5)
        t0 = time.perf_counter()
        delivered = list(outside.ledger.delivered_blocks(admin, 0, height - 1))
        deliver_s = time.perf_counter() - t0
    finally:
        inside.ledger.close()
        outside.ledger.close()
    t0 = time.perf_counter()
    blocks = search_blocks(delivered, needles)
    folder = search(files_of([peer_folder(hosts[outsider])]), needles)
    control = search(files_of([peer_folder(hosts[member])]), needles)
    search_s = time.perf_counter() - t0
    if control.hits_by_kind() != needles.count_by_kind():  # the needles or the member's files are wrong
        print(
            f"positive control: {member}'s folder holds {control.hits_by_kind()} of {needles.count_by_kind()}"
        )
    found = {k: set(folder.found[k]) | set(blocks.found[k]) for k in folder.found}
    for kind, labels in sorted(found.items()):
        if labels:
            print(
                f"{outsider} reads {len(labels)} {kind} value(s) in clear, e.g. {sorted(labels)[0]}",
                flush=True,
            )
    return {
        "non_member_cleartext_hits": sum(len(v) for v in found.values()),
        "non_member_cleartext_hits_by_kind": {k: len(v) for k, v in found.items()},
        "non_member_folder_hits": folder.hits,
        "non_member_deliver_hits": blocks.hits,
        "non_member_delivered_blocks": len(delivered),
        "non_member_folder_mb": round(folder.searched_bytes / 1e6, 1),
        "member_control_hits": control.hits,
        "cleartext_needles": sum(needles.count_by_kind().values()),
        "cleartext_needles_by_kind": needles.count_by_kind(),
        "cleartext_needles_skipped": needles.skipped_by_reason(),
        "exposure_s": round(deliver_s + search_s, 2),
    }


def run_fetch(hosts: dict[str, Host], mb: float) -> dict[str, Any]:
    org1, org2 = hosts["Org1"], hosts["Org2"]
    listen = f"{org1.address}:{free_port(org1.address)}"
    server = subprocess.Popen(
        org1.argv(
            [sys.executable, "-m", "benchmarks.artifact_fetch", "--serve-home", str(org1.home)]
            + ["--mb", str(mb), "--listen", listen, "--reader", org2.msp]
        ),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert server.stdout is not None
        digest, url = server.stdout.readline().split()
        got = subprocess.run(
            org2.argv(
                [sys.executable, "-m", "benchmarks.artifact_fetch", "--fetch-home", str(org2.home)]
                + ["--url", url, "--owner", org1.msp, "--digest", digest]
            ),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if got.returncode != 0:
            raise SystemExit(f"fetch between hosts failed: {got.stderr[-2000:]}")
        return dict(json.loads(got.stdout.strip().splitlines()[-1]))
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the view and the server in it
        server.wait(10)


LAYOUTS = {
    "bft": "Four members without a centre (benchmarks.members: each member's own Fabric CA, its public "
    "package, the channel made from the packages, one orderer per member, SmartBFT)",
    "raft": "Four members without a centre (benchmarks.members: each member's own Fabric CA, its public "
    "package, the channel made from the packages, one orderer per member, etcdraft)",
    "founder": "Three organisations of a founder-made network (benchmarks.deployment: `fabric-network/"
    "network up --hosts … --isolate`, every key made on the founder's machine, one etcdraft orderer)",
}


def write_report(tag: str, figures: dict[str, Any], consensus: str, quick: bool) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{tag}.json").write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    command = "python -m benchmarks.consortium" + (" --quick" if quick else "") + f" --consensus {consensus}"
    lines = [
        f"# A consortium across hosts ({tag})",
        "",
        f"{LAYOUTS[consensus]}; each organisation on a host of its own (a bubblewrap view of its own "
        "folder, its own loopback address), on real Fabric; collaborative RF beside the simulator; one "
        f"artifact fetched between two hosts over mutual TLS (`{command}`). Machine: 2 shared cores.",
        "",
        "| figure | value |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in figures.items()),
        "",
    ]
    (RESULTS / f"{tag}.md").write_text("\n".join(lines))


def run_members(tmp: Path, consensus: str, case: dict[str, Any], sim: Any, fetch_mb: float) -> dict[str, Any]:
    """The process and the fetch on four members without a centre (``consensus`` bft or raft), then
    every private key in every member's view matched against every certificate (benchmarks.key_custody)."""
    from benchmarks.key_custody import keys_outside_owner
    from benchmarks.members import Members
    from network.package import OrganisationPackage

    members = Members(tmp, MEMBER_ORGS)
    try:
        members.form(consensus)
        print(f"consortium formed: {json.dumps(members.timings)}", flush=True)
        hosts: dict[str, Host] = dict(members.hosts)
        process_hosts = {o: hosts[o] for o in PROCESS_MEMBERS}
        audited = run_process(process_hosts, members.registry.address, case, sim)
        print(f"audited across hosts: {audited['audited_s']} s", flush=True)
        (outsider,) = set(MEMBER_ORGS) - set(PROCESS_MEMBERS)
        exposure = run_exposure(hosts, "Org1", outsider, audited["process_id"])
        fetch = run_fetch(hosts, fetch_mb)
        checked, wrong = keys_outside_owner(
            {h.msp: h.root for h in members.hosts.values()},
            {h.msp: OrganisationPackage.read(h.package).public_keys() for h in members.hosts.values()},
        )
        for line in wrong:
            print("key outside its owner:", line, flush=True)
        return {
            **audited,
            **exposure,
            **fetch,
            "orderers": len(members.channel["consenters"]),
            "private_keys_checked": checked,
            "private_keys_outside_owner": len(wrong),
            "setup_s": round(sum(members.timings.values()), 1),
        }
    finally:
        members.close()


def run_founder(tmp: Path, case: dict[str, Any], sim: Any, fetch_mb: float) -> dict[str, Any]:
    """The process and the fetch on the founder-made network of three organisations."""
    with Deployment(tmp, FOUNDER_ORGS) as d:
        audited = run_process(d.hosts, d.registry, case, sim)
        print(f"audited across hosts: {audited['audited_s']} s", flush=True)
        fetch = run_fetch(d.hosts, fetch_mb)
    return {**audited, **fetch, "orderers": 1}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from benchmarks.audit_overhead import run_simulated
    from benchmarks.audit_overhead_cases import case_collab_rf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="6 rounds instead of the seed's 12")
    ap.add_argument("--fetch-mb", type=float, default=50.0, help="size of the artifact fetched between hosts")
    ap.add_argument(
        "--consensus",
        choices=sorted(LAYOUTS),
        default="bft",
        help="bft (default) or raft: four members without a centre; founder: the founder-made network",
    )
    ap.add_argument("--no-write", action="store_true", help="print only; write no report")
    ap.add_argument("--tag", default="", help="a suffix of the report's file name (e.g. a branch)")
    args = ap.parse_args(argv)
    orgs = FOUNDER_ORGS if args.consensus == "founder" else MEMBER_ORGS
    case = case_collab_rf(False, len(orgs))  # the seed's forest sizes on 10 % of the rows
    if args.consensus != "founder":  # the channel's rows split four ways; Org4's part stays out
        process = [f"{o}MSP" for o in PROCESS_MEMBERS]
        case = {**case, "orgs": process, "data": {o: case["data"][o] for o in process}}
    if args.quick:  # half the rounds: FIT, SHARE, GET twice
        case["params"] = {**case["params"], "schedule": case["params"]["schedule"][:6]}
        case["rounds"] = 6
    load_before = _load()
    sim_wall, sim, sim_cpu = run_simulated(case)
    print(f"simulated: {sim_wall:.2f} s ({sim_cpu:.2f} CPU s)", flush=True)
    with tempfile.TemporaryDirectory(prefix="consortia-bench-deploy-") as tmp:
        if args.consensus == "founder":
            got = run_founder(Path(tmp), case, sim, args.fetch_mb)
        else:
            got = run_members(Path(tmp), args.consensus, case, sim, args.fetch_mb)
    figures = {
        "orgs": len(orgs),
        "process_members": len(case["orgs"]),
        "orderers": got["orderers"],
        "consensus": "raft" if args.consensus == "founder" else args.consensus,
        "layout": "founder" if args.consensus == "founder" else "members",
        "rounds": case["rounds"],
        "rows_per_org": min(len(ds.features) for ds in case["data"].values()),
        "simulated_s": round(sim_wall, 2),
        "audited_s": got["audited_s"],
        "consent_s": got["consent_s"],
        "rounds_s": got["rounds_s"],
        "prewarm_s": got["prewarm_s"],
        "fabric_audit_ratio": round(got["audited_s"] / sim_wall, 2),
        "bit_identical": got["bit_identical"],
        "artifact_mb": got["artifact_mb"],
        "artifact_fetch_mb_s": got["artifact_fetch_mb_s"],
        "peak_rss_mb": got["peak_rss_mb"],
        "rss_method": got["rss_method"],
        "load_before": load_before,
        "load_after": _load(),
    }
    if args.consensus != "founder":  # the founder made every key on its own machine: nothing to check
        figures |= {k: got[k] for k in ("private_keys_checked", "private_keys_outside_owner", "setup_s")}
        figures |= {
            k: v for k, v in got.items() if k.startswith(("non_member_", "member_control", "cleartext_"))
        }
        figures["exposure_s"] = got["exposure_s"]
    if not args.no_write:
        tag = "consortium" + ("" if args.consensus == "founder" else f"-{args.consensus}")
        suffix = f"-{args.tag}" if args.tag else ""
        write_report(tag + ("-quick" if args.quick else "") + suffix, figures, args.consensus, args.quick)
    print(json.dumps(figures, sort_keys=True))
    return figures


if __name__ == "__main__":
    from algorithms.numeric_profile import reexec_selected

    reexec_selected()  # simulate() computes under the images' numeric profile (docs/reproducibility.md)
    main()
