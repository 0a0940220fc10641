"""Auditor replay (audit.disclosure, audit.replay) on a real process: sandbox tasks, sealed stores, the
embedded ledger, the image in the tests' own registry. The process's agents compute on one emulated CPU
kind (Haswell with numpy's AVX dispatch), the auditor -- an organisation outside the process, without
the image -- pulls it by the ledger's digest and replays on another (Prescott, numpy at its baseline):
every record matches. A disclosure whose data differs by one row, an image that is another build, a
registry serving other bytes under the image's reference, and records whose digests were computed
without the profile (a node that skipped its check, on this machine's own kernels) are each a mismatch
naming the digest. Nothing the auditor holds opens anything it was not disclosed, and another
organisation's key does not open the disclosure. The gateway's bound on an uploaded disclosure."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from algorithms import validation
from algorithms.numeric_profile import PROFILE
from algorithms.task_runtime import load_dataset
from audit.disclosure import Disclosure, DisclosureError, disclose, parse_rounds
from audit.replay import ImageSource, ReplayError, replay_disclosure, replay_process
from benchmarks.reproducibility import ONE_THREAD, cpu_kinds, host_flags
from exchange.errors import ArtifactCorrupted, DecryptionError
from exchange.service import node_store
from exchange.store import ArtifactStore, message_info
from executor.images.bundle import BUNDLE_MOUNT, bundle_digest
from executor.images.bundle_archive import pulled_bundle_dir
from executor.images.recipe import cache_root
from executor.images.reference import parse_reference
from executor.images.resolver import ImageResolver
from executor.node.supervisor import run_process
from executor.process import ProcessSpec, launch, map_dataset, prepare_image
from executor.runtimes.sandbox import SandboxRuntime
from home.platform import Platform
from ledger.errors import Forbidden, NotFound
from tests.e2e.conftest import collab_rf_case, ggm_case
from tests.executor.images.conftest import flip_blob

ORGS = ("Org1MSP", "Org2MSP")
AUDITOR = "Org3MSP"  # in the consortium, not in the process
PID = "p-replay"


def kind(name: str) -> dict[str, str]:
    table = {k.name: k for k in cpu_kinds()}
    k = table[name]
    if not set(k.needs) <= host_flags():
        pytest.skip(f"this CPU cannot run the kind {name}")
    return dict(k.environment)


#: a node that skips the profile check: its task runtime's require() does nothing
_SKIP_PROFILE = (
    "import runpy, sys; from algorithms.numeric_profile import NumericProfile as P; "
    "P.require = lambda self: None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


class KindSandbox(SandboxRuntime):
    """The sandbox on an emulated CPU kind: the kind's variables under the profile the bundle declares,
    as on a machine of that kind (``pinned``), or the kind's own kernels with the task's profile check
    skipped (not ``pinned``: a node computing under another profile than its records name)."""

    def __init__(self, environment: dict[str, str], pinned: bool = True):
        super().__init__()
        self.environment = environment
        self.pinned = pinned

    def command(self, bundle_dir, mounts, command):
        args = super().command(bundle_dir, mounts, command)
        drop = set(PROFILE.variables())
        out: list[str] = []
        i = 0
        while i < len(args):
            if args[i] == "--setenv" and args[i + 1] in drop:
                i += 3
                continue
            out.append(args[i])
            i += 1
        env = PROFILE.environ(self.environment) if self.pinned else {**ONE_THREAD, **self.environment}
        at = out.index("--chdir")
        out[at:at] = [a for k, v in sorted(env.items()) for a in ("--setenv", k, v)]
        if not self.pinned:
            entry = out.index(f"{BUNDLE_MOUNT}/image/entrypoint.py")
            out[entry:entry] = ["-c", _SKIP_PROFILE]
        return out


def _platform(root: Path, consortium) -> Platform:
    from ledger.embedded import EmbeddedLedger

    return Platform(
        EmbeddedLedger(root / "ledger.sqlite", consortium), consortium, root, root / "ledger.sqlite"
    )


def _run(p: Platform, pid: str, case, runtime, registry: str | None = None) -> None:
    """Build and register the case's image (pushed to ``registry`` when given: the Image record then
    names it there by digest, and every agent fetches it from there), launch the process among ORGS and
    run it to completion."""
    client = p.client(ORGS[0])
    if registry is None:
        image = prepare_image(client, case.image, "sandbox")
    else:
        from executor.images.build import build_and_register

        image = build_and_register(client, case.image, "sandbox", registry=registry)
    for o in ORGS:
        map_dataset(p.data_root, o, "train", case.datasets[o])
    spec = ProcessSpec(pid, image.record.id, ORGS, case.topology, case.params, case.rounds, "train")
    launch(client, spec, consent=p.admins(ORGS))
    out = run_process(p, pid, runtime)
    assert out.status == "completed", out


def _disclose_all(p: Platform, pid: str, to: str = AUDITOR, rounds: str = "all") -> dict[str, Disclosure]:
    out = {}
    for o in ORGS:  # each member's node serves its store (as it does while it runs)
        node_store(p.client(o), p.consortium, p.store_root, hosted=p.hosted)
    for o in ORGS:
        client = p.client(o)
        places = p.places(o)
        store = node_store(client, p.consortium, p.store_root, hosted=p.hosted)
        wanted = parse_rounds(rounds, client.get_process(pid).rounds)
        d, record = disclose(client, p.consortium, store, places.data, places.state, pid, wanted, to)
        assert (record.organisation, record.recipient, list(record.rounds)) == (o, AUDITOR, wanted)
        assert record.bundle_digest == d.bundle_digest
        out[o] = d
    return out


@pytest.fixture(scope="module")
def audited(tmp_path_factory, consortium, registry_addr):
    """Collaborative RF between Org1 and Org2 on Haswell+npy, its image in the consortium's registry
    (each agent fetches it by digest into its own bundle cache); each discloses every round to Org3."""
    root = tmp_path_factory.mktemp("replay")
    p = _platform(root, consortium)
    for o in ORGS:
        p.bundles_roots[o] = root / "bundles" / o
    case = collab_rf_case(ORGS)
    _run(p, PID, case, lambda: KindSandbox(kind("Haswell+npy")), registry=registry_addr)
    disclosures = _disclose_all(p, PID)
    yield p, case, disclosures
    p.ledger.close()


def _auditor_images(tmp_path: Path) -> ImageSource:
    """The auditor's own machine: an empty bundle cache of its own (the image is fetched from the
    registry by the ledger's reference and digest), and its sandbox on Prescott with numpy at its
    baseline."""
    return ImageSource(tmp_path / "bundles", runtime=KindSandbox(kind("Prescott-npy")))


def _image(p: Platform):
    client = p.client(ORGS[0])
    return client.get_image(client.get_process(PID).image_id)


def test_every_record_and_final_model_matches_on_another_cpu_kind(audited, tmp_path):
    p, case, disclosures = audited
    auditor = p.client(AUDITOR)
    key = p.consortium.encryption_key(AUDITOR)
    images = _auditor_images(tmp_path)
    assert not images.bundles_root.exists()  # the auditor's machine does not have the image
    rep = replay_process(PID, disclosures.values(), auditor, key, images)
    assert rep.ok, json.dumps(rep.to_dict(), indent=1)[:4000]
    # the image the auditor ran is its own copy, pulled by the ledger's registry reference into its cache
    image = _image(p)
    ref = parse_reference(image.reference)
    assert ref is not None and ref.is_bundle
    pulled = ImageResolver(SandboxRuntime(), images.bundles_root).bundle_dir(image.reference)
    assert pulled == pulled_bundle_dir(images.bundles_root, ref) and (pulled / "bundle.json").is_file()
    assert bundle_digest(pulled, fresh=True) == image.digest == rep.reports[0].image_digest
    assert not rep.missing and not rep.errors
    assert len(rep.tasks) == len(ORGS) * case.rounds
    assert all(t.matched and t.compared >= 4 for t in rep.tasks)  # image ×2, profile ×2, data, state, outputs
    # collaborative RF's last round writes each member's final model: matched against the signed record
    assert set(rep.models) == set(ORGS) and all(m["matched"] for m in rep.models.values())
    # the JSON verdicts
    d = rep.to_dict()
    assert d["records"] == d["records_matched"] == len(ORGS) * case.rounds
    assert {t["verdict"] for r in d["disclosures"] for t in r["tasks"]} == {"matched"}


def test_disclosed_data_differing_by_one_row_names_the_input_data(audited, tmp_path):
    p, _, disclosures = audited
    key = p.consortium.encryption_key(AUDITOR)
    d = disclosures[ORGS[0]]
    bundle = d.open(key)
    with np.load(io.BytesIO(bundle.dataset), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["features"] = arrays["features"].copy()
    # one row differs: a training row (a row of the validation slice would change only the last round)
    process = p.client(ORGS[0]).get_process(PID)
    held: set[int] = set()
    if process.validation_fraction:
        rows = validation.slice_rows(
            load_dataset(io.BytesIO(bundle.dataset)),
            process.validation_fraction,
            int(process.topology.get("seed", 0)),
            ORGS[0],
        )
        held = {int(i) for i in rows}
    row = next(i for i in range(len(arrays["features"])) if i not in held)
    arrays["features"][row, 0] += 1.0
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    # the discloser records a disclosure of the altered data for round 1 (the ledger has the bundle)
    from audit.disclosure import DisclosedTask, seal_info
    from exchange.sealing import seal

    first = next(t for t in bundle.tasks if t.round == 1)
    altered = type(bundle)(
        bundle.process_id,
        bundle.organisation,
        bundle.recipient,
        bundle.data_salt,
        buf.getvalue(),
        (DisclosedTask(1, None, {}, first.confidential),),  # the round's confidential part, as disclosed
        bundle.private_terms,
    )
    sealed = seal(
        p.consortium.encryption_certificate(AUDITOR), altered.to_json(), seal_info(PID, ORGS[0], AUDITOR)
    )
    forged = Disclosure(PID, ORGS[0], AUDITOR, (1,), sealed)
    p.client(ORGS[0]).record_disclosure(PID, [1], AUDITOR, forged.bundle_digest)
    rep = replay_disclosure(forged, p.client(AUDITOR), key, _auditor_images(tmp_path))
    [v] = rep.tasks
    assert not v.matched
    whats = [m.what for m in v.mismatches]
    assert whats[0] == "input data", whats
    recorded = p.client(ORGS[0]).get_execution(PID, 1, ORGS[0]).result.inputs.data_commitment
    assert v.mismatches[0].recorded == recorded and v.mismatches[0].found != recorded
    assert "output state" in whats  # the task computed on other data: other outputs too


def test_an_image_of_another_build_names_the_image_and_is_not_run(audited, tmp_path):
    """The auditor runs its own build of the image (``--bundle``), which is not the pinned one."""
    p, _, disclosures = audited
    ref = _image(p).reference
    agents = ImageResolver(SandboxRuntime(), p.bundles_roots[ORGS[1]]).bundle_dir(ref)
    assert agents is not None
    own = tmp_path / "rebuilt"
    shutil.copytree(agents, own, symlinks=True)
    own.chmod(0o755)
    (own / "image").chmod(0o755)
    (own / "image" / "NOTE").write_text("rebuilt\n")  # another build: one more file in the bundle
    other = bundle_digest(own, fresh=True)
    images = ImageSource(tmp_path / "bundles", own, KindSandbox(kind("Prescott-npy")))
    rep = replay_disclosure(
        disclosures[ORGS[1]], p.client(AUDITOR), p.consortium.encryption_key(AUDITOR), images
    )
    pinned = p.client(ORGS[0]).get_process(PID).image_digest
    assert other != pinned
    assert rep.tasks and not rep.ok
    for v in rep.tasks:
        assert not v.matched and not v.ran
        assert [(m.what, m.recorded, m.found) for m in v.mismatches if m.what == "image"] == [
            ("image", pinned, other)
        ]


def test_a_registry_serving_other_bytes_under_the_reference_is_refused_naming_the_digest(
    audited, registry_addr, tmp_path
):
    """The registry (or whoever holds its storage) serves other bytes under the image's reference: the
    auditor's fetch re-hashes them, runs nothing, and each verdict names the pinned image digest and the
    archive digest the reference pins against the one served."""
    p, _, disclosures = audited
    image = _image(p)
    archive = parse_reference(image.reference).digest
    flip_blob(registry_addr, archive)
    try:
        images = _auditor_images(tmp_path)
        rep = replay_disclosure(
            disclosures[ORGS[0]], p.client(AUDITOR), p.consortium.encryption_key(AUDITOR), images
        )
    finally:
        flip_blob(registry_addr, archive)  # the same bit back: the registry serves the image again
    assert rep.tasks and not rep.ok
    for v in rep.tasks:
        assert not v.ran and not v.matched
        [m] = [m for m in v.mismatches if m.what == "image"]
        assert m.recorded == image.digest
        assert m.found is not None and archive in m.found and "refused" in m.found, m.found
        served = m.found.split("has digest ")[1].split(",")[0]
        assert served.startswith("sha256:") and served != archive
    assert not any(images.bundles_root.glob("registry-*"))  # nothing of the other bytes was kept


def test_records_computed_without_the_profile_are_mismatches_naming_the_outputs(
    tmp_path_factory, consortium, tmp_path
):
    """CollabDict GGM run by nodes that skipped the profile's check, on Haswell's own kernels (libm
    FMA, numpy AVX2/AVX-512, OpenBLAS Haswell); their records still name x86-64-v2/1. Replayed under the
    profile: every input matches (each is what the records signed), outputs do not, and the verdict
    names each differing digest with the recorded one."""
    root = tmp_path_factory.mktemp("replay-host")
    p = _platform(root, consortium)
    pid = "p-replay-host"
    case = ggm_case(ORGS)
    try:
        _run(p, pid, case, lambda: KindSandbox(kind("Haswell+npy"), pinned=False))
        d = _disclose_all(p, pid)[ORGS[0]]
        records = {r: p.client(ORGS[0]).get_execution(pid, r, ORGS[0]) for r in range(1, case.rounds + 1)}
        assert all(r.result.numeric_profile.json_object() == PROFILE.record() for r in records.values())
        images = ImageSource(tmp_path / "bundles", _own_bundle(p, pid), KindSandbox(kind("Prescott-npy")))
        rep = replay_disclosure(d, p.client(AUDITOR), p.consortium.encryption_key(AUDITOR), images)
        assert len(rep.tasks) == case.rounds and all(v.ran for v in rep.tasks)
        assert not rep.ok
        differing = [v for v in rep.tasks if v.mismatches]
        assert differing, "the host's kernels gave the profile's digests: the test cannot tell them apart"
        for v in differing:
            whats = {m.what for m in v.mismatches}
            assert not whats & {"input data", "previous state", "image", "profile"}, v.to_dict()
            assert any(w in ("output state", "model") or w.startswith("message to ") for w in whats)
            signed = records[v.round].result.outputs
            for m in v.mismatches:
                if m.what == "output state":
                    assert m.recorded == signed.state and m.found != signed.state
                elif m.what.startswith("message to "):
                    to = m.what.removeprefix("message to ")
                    assert m.recorded == next(x.digest for x in signed.messages if x.recipient == to)
    finally:
        p.ledger.close()


def _own_bundle(p: Platform, pid: str) -> Path:
    client = p.client(ORGS[0])
    image = client.get_image(client.get_process(pid).image_id)
    return cache_root() / "bundles" / image.reference.removeprefix("bundle:")


# ---------------------------------------------------------------------------------------- confidentiality


def test_another_organisation_cannot_open_the_disclosure(audited):
    p, _, disclosures = audited
    for o in ORGS:
        with pytest.raises(DecryptionError):
            disclosures[ORGS[0]].open(p.consortium.encryption_key(o))
    with pytest.raises(
        ReplayError, match="addressed to Org3MSP, not to Org2MSP"
    ):  # the ledger's record is addressed to Org3
        replay_disclosure(
            disclosures[ORGS[0]],
            p.client(ORGS[1]),
            p.consortium.encryption_key(ORGS[1]),
            ImageSource(Path("/nonexistent")),
        )


def test_the_auditor_reads_only_what_it_was_disclosed(audited):
    p, case, disclosures = audited
    auditor = p.client(AUDITOR)
    key = p.consortium.encryption_key(AUDITOR)
    # the ledger: no process, record or model of a process it is not in, beyond the disclosed records
    with pytest.raises(Forbidden):
        auditor.get_process(PID)
    with pytest.raises(Forbidden):
        auditor.get_execution(PID, 1, ORGS[0])
    with pytest.raises((Forbidden, NotFound)):
        auditor.get_model(f"{PID}:{ORGS[0]}")
    seen = auditor.disclosed_records(PID, disclosures[ORGS[0]].bundle_digest)
    assert {(r.organisation, r.round) for r in seen.executions} == {
        (ORGS[0], r) for r in range(1, case.rounds + 1)
    }
    # the stores: its key opens no state, message or model sealed to the members
    member = p.client(ORGS[0])
    for rnd in range(1, case.rounds + 1):
        rec = member.get_execution(PID, rnd, ORGS[0])
        store = ArtifactStore(p.store_root, ORGS[0], create=False)
        with pytest.raises(ArtifactCorrupted, match="does not open"):
            store.get_private(rec.result.outputs.state, key)
        for m in rec.result.outputs.messages:
            sealed = _sealed_message(p, PID, rnd, ORGS[0], m.recipient)
            from exchange.sealing import unseal

            with pytest.raises(DecryptionError):
                unseal(key, sealed, message_info(PID, rnd, ORGS[0], m.recipient, m.digest))
        if rec.result.outputs.model is not None:
            with pytest.raises(ArtifactCorrupted, match="does not open"):
                store.get_private(rec.result.outputs.model.digest, key)


def _sealed_message(p: Platform, pid: str, rnd: int, sender: str, recipient: str) -> bytes:
    from exchange import messages

    store = ArtifactStore(p.store_root, sender, create=False)
    entry = messages.read_entry(store, pid, rnd, recipient)
    assert entry is not None
    return store.get(entry["stored"]["digest"])


# ---------------------------------------------------------------------------------------- the ledger's rules


def test_a_disclosure_is_recorded_once_only_by_a_member_for_its_completed_rounds(audited):
    p, case, disclosures = audited
    from ledger.errors import AlreadyExists, InvalidArgument

    d = disclosures[ORGS[0]]
    with pytest.raises(AlreadyExists):
        p.client(ORGS[0]).record_disclosure(PID, list(d.rounds), AUDITOR, d.bundle_digest)
    with pytest.raises(Forbidden):  # Org3 is not a member: it has no task to disclose
        p.client(AUDITOR).record_disclosure(PID, [1], ORGS[0], "sha256:" + "1" * 64)
    with pytest.raises(InvalidArgument):
        p.client(ORGS[0]).record_disclosure(PID, [case.rounds + 1], AUDITOR, "sha256:" + "2" * 64)
    with pytest.raises(InvalidArgument):
        p.client(ORGS[0]).record_disclosure(PID, [1], ORGS[0], "sha256:" + "3" * 64)
    # members see every disclosure of the process; the auditor those addressed to it
    listed = p.client(ORGS[1]).list_disclosures(PID)
    assert {r.bundle_digest for r in listed} >= {x.bundle_digest for x in disclosures.values()}
    assert all(r.recipient == AUDITOR for r in p.client(AUDITOR).list_disclosures(PID))


def test_a_tampered_disclosure_file_is_refused(audited, tmp_path):
    p, _, disclosures = audited
    raw = json.loads(disclosures[ORGS[0]].to_json())
    raw["rounds"] = [1]
    path = tmp_path / "d.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ReplayError):
        replay_disclosure(
            Disclosure.read(path),
            p.client(AUDITOR),
            p.consortium.encryption_key(AUDITOR),
            ImageSource(tmp_path),
        )
    raw = json.loads(disclosures[ORGS[0]].to_json())
    raw["sealed"] = raw["sealed"][:-8] + "AAAAAAA="
    path.write_text(json.dumps(raw))
    with pytest.raises(DisclosureError, match="hash"):
        Disclosure.read(path)


# ---------------------------------------------------------------------------------------- gateway and explorer


def test_the_gateway_replays_an_uploaded_disclosure_and_the_explorer_lists_the_verdicts(audited, tmp_path):
    from fastapi.testclient import TestClient

    from api.gateway import Gateway, create_app
    from api.index import AuditIndex
    from api.tokens import TokenStore

    p, case, disclosures = audited
    gw = Gateway(
        ledger=p.ledger,
        consortium=p.consortium,
        msp_id=AUDITOR,
        index=AuditIndex(tmp_path / "index.db"),
        tokens=TokenStore(tmp_path / "tokens.json", AUDITOR),
        artifacts=ArtifactStore(p.store_root, AUDITOR),
        follow_interval=0,
    )
    d = disclosures[ORGS[1]]
    try:
        with TestClient(create_app(gw), raise_server_exceptions=False) as c:
            c.headers["Authorization"] = "Bearer " + gw.tokens.issue("User1")
            listed = c.get(f"/api/v1/processes/{PID}/disclosures")
            assert listed.status_code == 200, listed.text
            assert {x["bundle_digest"] for x in listed.json()} >= {
                x.bundle_digest for x in disclosures.values()
            }
            r = c.post("/api/v1/replays", json={"disclosure": json.loads(d.to_json())})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["ok"] and body["replayed_tasks"] == body["matched"] == case.rounds
            assert {t["verdict"] for t in body["tasks"]} == {"matched"}
            again = c.post(f"/api/v1/replays/{d.bundle_digest}")
            assert again.status_code == 200 and again.json()["ok"]
            verdicts = c.get("/api/v1/replays").json()
            assert [v["bundle_digest"] for v in verdicts] == [d.bundle_digest]
            bad = c.post("/api/v1/replays", json={"disclosure": {"format": "something else"}})
            assert bad.status_code == 422 and bad.json()["code"] == "INVALID_REQUEST", bad.text
            forged = json.loads(d.to_json()) | {"bundle_digest": "sha256:" + "1" * 64}
            refused = c.post("/api/v1/replays", json={"disclosure": forged})
            assert refused.status_code == 400 and "hash to" in refused.json()["message"], refused.text
            unknown = c.post("/api/v1/replays/sha256:" + "0" * 64)
            assert unknown.status_code == 404
            page = c.get("/explorer/explorer.js")
            assert page.status_code == 200 and "/replays" in page.text and "showReplays" in page.text
    finally:
        gw.index.close()


def test_the_gateway_takes_a_disclosure_past_the_contract_argument_bound_up_to_its_own(audited, tmp_path):
    """A disclosure is no contract argument: ``POST /api/v1/replays`` has its own bound (64 MiB unless
    configured), not the 1 MiB of every other body. A disclosure of 3 MiB reaches the replay (which refuses
    it: the ledger holds no such disclosure); the same body elsewhere is 413; a gateway configured below a
    disclosure's size answers 413 naming its bound and how to raise it."""
    from fastapi.testclient import TestClient

    from api.gateway import Gateway, create_app
    from api.gateway.state import MAX_DISCLOSURE_BYTES
    from api.index import AuditIndex
    from api.tokens import TokenStore
    from ledger.rules import MAX_ARGUMENT_BYTES

    p, _, disclosures = audited

    def gateway(name: str, **limit) -> Gateway:
        return Gateway(
            ledger=p.ledger,
            consortium=p.consortium,
            msp_id=AUDITOR,
            index=AuditIndex(tmp_path / f"{name}.db"),
            tokens=TokenStore(tmp_path / f"{name}.json", AUDITOR),
            artifacts=ArtifactStore(p.store_root, AUDITOR),
            follow_interval=0,
            **limit,
        )

    big = Disclosure(PID, ORGS[0], AUDITOR, (1,), np.random.default_rng(1).bytes(3 * 1024 * 1024))
    body = big.to_json()
    assert MAX_ARGUMENT_BYTES < len(body) < MAX_DISCLOSURE_BYTES
    gw = gateway("default")
    try:
        with TestClient(create_app(gw), raise_server_exceptions=False) as c:
            c.headers["Authorization"] = "Bearer " + gw.tokens.issue("User1")
            headers = {"Content-Type": "application/json"}
            wrapped = b'{"disclosure": ' + body + b"}"
            r = c.post("/api/v1/replays", content=wrapped, headers=headers)
            assert r.status_code == 400 and big.bundle_digest in r.json()["message"], r.text[:500]
            elsewhere = c.post("/api/v1/processes", content=wrapped, headers=headers)
            assert elsewhere.status_code == 413 and elsewhere.json()["details"]["limit"] == MAX_ARGUMENT_BYTES
    finally:
        gw.index.close()
    real = disclosures[ORGS[1]].to_json()
    small = gateway("small", max_disclosure_bytes=len(real) // 2)
    try:
        with TestClient(create_app(small), raise_server_exceptions=False) as c:
            c.headers["Authorization"] = "Bearer " + small.tokens.issue("User1")
            r = c.post("/api/v1/replays", json={"disclosure": json.loads(real)})
            assert r.status_code == 413 and r.json()["code"] == "REQUEST_TOO_LARGE", r.text
            assert r.json()["details"]["limit"] == len(real) // 2
            assert "/api/v1/replays" in r.json()["message"] and "--max-disclosure-mib" in r.json()["message"]
            assert small.replays == {} and small.disclosures == {}  # nothing was read or kept
    finally:
        small.index.close()
