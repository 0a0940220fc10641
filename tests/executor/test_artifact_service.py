"""The artifact service and its client: real servers on loopback addresses, real mutual TLS with a
generated consortium (four organisations; Org4 never takes part in a process)."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import urllib.request

import pytest

from executor.artifact_client import ArtifactForbidden, HttpsArtifactSource, configure, source_for
from executor.artifact_service import (
    ArtifactHandler,
    ArtifactServer,
    LedgerReaders,
    StaticReaders,
    parse_range,
)
from executor.artifact_tls import CertificateOrganisations, ClientTLS
from executor.artifacts import ArtifactRef, ArtifactStore
from executor.errors import ArtifactCorrupted, ArtifactError
from ledger.client import ConsortiaClient
from ledger.identity import Consortium
from tests.executor.conftest import ROOT

ORGS = ["Org1MSP", "Org2MSP", "Org3MSP", "Org4MSP"]


@pytest.fixture(scope="module")
def crypto(tmp_path_factory):
    return Consortium.generate(tmp_path_factory.mktemp("crypto4"), ["Org1", "Org2", "Org3", "Org4"])


@pytest.fixture
def served(tmp_path, crypto):
    """Org1's service on 127.0.1.1 with a message for Org2 and a model for Org1..Org3."""
    store = ArtifactStore(tmp_path / "org1", "Org1MSP")
    message = store.put(b"sealed message for Org2" * 1000).digest
    model = store.put(os.urandom(3_000_000)).digest
    readers = StaticReaders({message: ["Org2MSP"], model: ["Org1MSP", "Org2MSP", "Org3MSP"]})
    srv = ArtifactServer(("127.0.1.1", 0), store, crypto, readers).start()
    yield srv, store, message, model
    srv.stop()


def source(srv, crypto, tmp_path, org="Org2MSP", **kw):
    local = ArtifactStore(tmp_path / f"local-{org}", org)
    return HttpsArtifactSource(srv.url, "Org1MSP", ClientTLS(crypto, org), store=local, **kw), local


def test_message_is_served_to_its_recipient_only(served, crypto, tmp_path):
    srv, store, message, _ = served
    src, local = source(srv, crypto, tmp_path)
    assert src.get(message) == store.get(message)
    assert local.get(message) == store.get(message)  # landed in the local store, verified
    assert (local.base / message[7:9] / message[7:]).stat().st_mode & 0o777 == 0o600
    for org in ("Org3MSP", "Org4MSP"):  # another process member, an organisation outside the process
        with pytest.raises(ArtifactForbidden):
            source(srv, crypto, tmp_path, org)[0].get(message)
    unknown = "sha256:" + "0" * 64
    with pytest.raises(ArtifactForbidden):  # an unknown digest is a 403 too: nothing leaks
        src.get(unknown)


def test_model_is_served_to_its_access_list(served, crypto, tmp_path):
    srv, store, _, model = served
    for org in ("Org2MSP", "Org3MSP"):
        src, local = source(srv, crypto, tmp_path, org)
        assert local.base / model[7:9] / model[7:] == src.fetch_into(model)
        assert local.get(model) == store.get(model)
    with pytest.raises(ArtifactForbidden):
        source(srv, crypto, tmp_path, "Org4MSP")[0].fetch_into(model)
    assert not list((tmp_path / "local-Org4MSP").rglob("*")) or not any(
        p.is_file() for p in (tmp_path / "local-Org4MSP").rglob("*")
    )


def test_tampered_bytes_on_the_server_are_refused_and_nothing_is_kept(served, crypto, tmp_path):
    srv, store, _, model = served
    path = store.base / model[7:9] / model[7:]
    data = bytearray(path.read_bytes())
    data[1234] ^= 1
    path.write_bytes(bytes(data))
    src, local = source(srv, crypto, tmp_path)
    with pytest.raises(ArtifactCorrupted):
        src.fetch_into(model)
    assert not local.has(model)
    assert not [p for p in local.base.rglob("*") if p.is_file()]  # no temporary file left behind


class CutOnce(ArtifactHandler):
    """Closes the connection after 1 MB of the first full transfer; records the Range headers."""

    cut = True
    ranges: list = []

    def send_body(self, f, length):
        CutOnce.ranges.append(self.headers.get("Range"))
        if CutOnce.cut:
            CutOnce.cut = False
            self.wfile.write(f.read(1_000_000))
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        super().send_body(f, length)


def test_broken_transfer_resumes_with_range(tmp_path, crypto):
    store = ArtifactStore(tmp_path / "org1", "Org1MSP")
    model = store.put(os.urandom(3_000_000)).digest
    srv = ArtifactServer(
        ("127.0.1.1", 0), store, crypto, StaticReaders({model: ["Org2MSP"]}), handler=CutOnce
    ).start()
    try:
        src, local = source(srv, crypto, tmp_path, backoff=0.01)
        src.fetch_into(model)
        assert local.get(model) == store.get(model)
        assert CutOnce.ranges[0] is None and CutOnce.ranges[1].startswith("bytes=")
        assert int(CutOnce.ranges[1][6:-1]) > 0  # resumed where the cut left it, not from 0
    finally:
        srv.stop()


def test_range_requests_and_their_limits(served, crypto):
    srv, store, _, model = served
    t = ClientTLS(crypto, "Org2MSP")
    ctx = t.context("Org1MSP")
    ctx.check_hostname = False  # urllib dials by address; the name check is the client's own test

    def get(headers):
        req = urllib.request.Request(f"{srv.url}/artifacts/{model}", headers=headers)
        try:
            with urllib.request.urlopen(req, context=ctx) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    code, headers, body = get({"Range": "bytes=10-19"})
    assert code == 206 and body == store.get(model)[10:20]
    assert headers["Content-Range"] == "bytes 10-19/3000000"
    code, headers, _ = get({"Range": "bytes=3000000-"})
    assert code == 416 and headers["Content-Range"] == "bytes */3000000"
    assert parse_range(None, 5) is None and parse_range("bytes=2-", 5) == (2, 5)
    for bad in ("bytes=5-", "items=0-1", "bytes=-3", "bytes=3-1"):
        with pytest.raises(ValueError):
            parse_range(bad, 5)


def _raw_get(url, ca, cert=None):
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    if cert is not None:
        ctx.load_cert_chain(cert / "client.crt", cert / "client.key")
    return urllib.request.urlopen(url, context=ctx).read()


def test_no_or_foreign_client_certificate_gets_no_answer(served, crypto, tmp_path):
    srv, _, message, _ = served
    ca = crypto.organisation("Org1").path / "tlsca" / "tlsca.org1.example.com-cert.pem"
    url = f"{srv.url}/artifacts/{message}"
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        _raw_get(url, ca)  # no client certificate
    foreign = Consortium.generate(tmp_path / "foreign", ["Org2"])  # the same names, other CAs
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        _raw_get(url, ca, foreign.organisation("Org2").path / "users" / "User1@org2.example.com" / "tls")
    assert _raw_get(url, ca, crypto.organisation("Org2").path / "users" / "User1@org2.example.com" / "tls")


def test_client_refuses_a_server_of_another_organisation(served, crypto):
    srv, _, message, _ = served  # Org1's service, but the client expects Org3's certificate
    with pytest.raises(ArtifactError, match="after 1 attempts"):
        HttpsArtifactSource(srv.url, "Org3MSP", ClientTLS(crypto, "Org2MSP"), retries=0).get(message)


def test_certificates_map_to_their_organisation(crypto):
    orgs = CertificateOrganisations(crypto)
    for name in ("Org1", "Org4"):
        o = crypto.organisation(name)
        pem = (o.path / "users" / f"User1@{o.domain}" / "tls" / "client.crt").read_bytes()
        der = ssl.PEM_cert_to_DER_cert(pem.decode())
        assert orgs.organisation(der) == o.msp_id
    assert orgs.organisation(None) is None and orgs.organisation(b"junk") is None


def test_service_listens_on_loopback_only(tmp_path, crypto):
    with pytest.raises(ValueError, match="loopback"):
        ArtifactServer(("0.0.0.0", 0), ArtifactStore(tmp_path, "Org1MSP"), crypto, StaticReaders({}))


def test_location_scheme_picks_the_source(served, crypto, tmp_path):
    srv, store, message, _ = served
    assert isinstance(source_for(store.location, "Org1MSP"), ArtifactStore)
    assert source_for("ftp://x", "Org1MSP") is None
    configure(None)
    with pytest.raises(ArtifactError, match="no TLS identity"):
        source_for(srv.url, "Org1MSP")
    configure(ClientTLS(crypto, "Org2MSP"))
    try:
        assert isinstance(source_for(srv.url, "Org1MSP"), HttpsArtifactSource)
        ref = ArtifactRef(digest=message, size=0, producer="Org1MSP", location=srv.url)
        assert ArtifactStore.fetch(ref) == store.get(message)  # an https location in a record
    finally:
        configure(None)


def test_fifty_megabytes_with_bounded_client_memory():
    """benchmarks.artifact_fetch in a subprocess: the client's RSS growth (VmHWM after resetting it
    through /proc/self/clear_refs, minus VmRSS before) while fetching 50 MB stays under 100 MB."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.artifact_fetch", "--mb", "50"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["artifact_mb"] == 50.0
    assert figures["peak_rss_mb"] < 100, figures
    assert figures["artifact_fetch_mb_s"] > 0


def test_readers_come_from_the_ledger(tmp_path, crypto, bundle, recipe):
    """A real audited process of Org1..Org3 on the embedded ledger: Org1's service serves each of
    its messages to its recipient only and its model to the access list; Org4 gets 403 for all."""
    from algorithms.task_runtime import save_dataset
    from ledger.embedded import EmbeddedLedger
    from tests.executor.node.test_agent import Platform, run_all

    p = Platform(tmp_path, crypto, EmbeddedLedger(tmp_path / "ledger.sqlite", crypto), ORGS[:3])
    for o, ds in p.datasets().items():
        (tmp_path / "data" / o / "default").mkdir(parents=True)
        save_dataset(tmp_path / "data" / o / "default" / "dataset.npz", ds)
    p.register_image("avg:1", recipe, bundle.digest, bundle.reference)
    p.launch("p-x", "avg:1", rounds=2)
    run_all(p, "p-x", [p.agent(o) for o in ORGS[:3]])
    store = ArtifactStore(tmp_path / "store", "Org1MSP")
    client = ConsortiaClient(p.ledger, crypto.identity("Org1"))
    # an index entry the ledger does not confirm (no such round): served to nobody but Org1
    stray = store.put(b"not on the ledger").digest
    (store.home / "messages" / "p-x" / "000009").mkdir(parents=True)
    (store.home / "messages" / "p-x" / "000009" / "Org2MSP.json").write_text(
        json.dumps({"payload_digest": stray, "stored": {"digest": stray}})
    )
    srv = ArtifactServer(("127.0.1.1", 0), store, crypto, LedgerReaders(client, store)).start()
    try:

        def allowed(org, digest):
            try:
                return source(srv, crypto, tmp_path, org)[0].get(digest) == store.get(digest)
            except ArtifactForbidden:
                return False

        index = sorted((store.home / "messages" / "p-x" / "000001").glob("*.json"))
        assert index
        for entry in index:
            digest = json.loads(entry.read_text())["stored"]["digest"]
            assert [o for o in ORGS[1:] if allowed(o, digest)] == [entry.stem]
        model = client.get_model("p-x:Org1MSP")
        assert [o for o in ORGS[1:] if allowed(o, model.ciphertext_digest)] == ["Org2MSP", "Org3MSP"]
        for entry in index:  # the index entry itself: to the recipient only
            got = source(srv, crypto, tmp_path, entry.stem)[0].message_entry("p-x", 1, entry.stem)
            assert got == json.loads(entry.read_text())
            for other in set(ORGS[1:]) - {entry.stem}:
                with pytest.raises(ArtifactForbidden):
                    source(srv, crypto, tmp_path, other)[0].message_entry("p-x", 1, entry.stem)
        with pytest.raises(ArtifactForbidden):
            source(srv, crypto, tmp_path, "Org2MSP")[0].message_entry("p-x", 9, "Org2MSP")
        assert not allowed("Org2MSP", stray)
        assert not allowed("Org4MSP", store.put(b"anything else").digest)
    finally:
        srv.stop()
        p.ledger.close()


def test_gateway_opens_a_model_through_the_owners_service(tmp_path, crypto):
    """api.gateway.sealed_models.open_model_payload follows a record's https:// location."""
    import base64
    from types import SimpleNamespace

    from api.gateway.sealed_models import model_aad, model_key_info, open_model_payload
    from ledger.envelope import encrypt_payload, seal
    from wire.canonical import sha256_digest

    payload = os.urandom(200_000)
    owner = ArtifactStore(tmp_path / "org1", "Org1MSP")
    rec = {"id": "p:Org1MSP", "process_id": "p", "owner": "Org1MSP", "digest": sha256_digest(payload)}
    key, ciphertext = encrypt_payload(payload, model_aad(rec))
    ct = owner.put(ciphertext).digest
    wrapped = seal(crypto.encryption_certificate("Org2MSP"), key, model_key_info(rec))
    srv = ArtifactServer(("127.0.1.1", 0), owner, crypto, StaticReaders({ct: ["Org2MSP"]})).start()
    try:
        rec.update(ciphertext_digest=ct, location=srv.url, wrapped_key=base64.b64encode(wrapped).decode())
        gw = SimpleNamespace(
            consortium=crypto, msp_id="Org2MSP", artifacts=ArtifactStore(tmp_path, "Org2MSP")
        )
        assert open_model_payload(gw, rec) == payload
        assert gw.artifacts.has(ct)  # kept in the gateway's own store
    finally:
        srv.stop()


def test_peer_endpoints_from_the_command_line():
    from executor.artifact_client import parse_endpoints

    assert parse_endpoints(["Org2MSP=https://127.0.2.1:8443"]) == {"Org2MSP": "https://127.0.2.1:8443"}
    assert parse_endpoints(None) == {}
    with pytest.raises(ValueError):
        parse_endpoints(["Org2MSP=/srv/org2/artifacts"])  # never a path


def test_a_served_store_names_its_service_as_location(tmp_path):
    store = ArtifactStore(tmp_path, "Org1MSP", endpoint="https://127.0.1.1:8443")
    assert store.put(b"x").location == "https://127.0.1.1:8443"
    assert ArtifactStore(tmp_path, "Org1MSP").location.startswith("file://")


def test_agents_on_separate_hosts_exchange_through_the_services(
    tmp_path, crypto, bundle, recipe, average_consensus
):
    """Org1..Org3 each with its own store root and its own service on 127.0.N.1 (no agent can reach
    another's files by path), each agent publishing its endpoint in its membership record and finding
    the others' there: the audited process still equals the simulator, published models name the
    owner's service, and Org4 gets 403 for every message and model."""
    from algorithms.task_runtime import save_dataset
    from executor.membership import tls_ca_digest
    from executor.node.agent import NodeAgent
    from executor.runtimes.sandbox import SandboxRuntime
    from ledger.embedded import EmbeddedLedger
    from tests.executor.node.test_agent import Platform, assert_matches_simulation, run_all

    orgs = ORGS[:3]
    p = Platform(tmp_path, crypto, EmbeddedLedger(tmp_path / "ledger.sqlite", crypto), orgs)
    for o, ds in p.datasets().items():
        (tmp_path / "data" / o / "default").mkdir(parents=True)
        save_dataset(tmp_path / "data" / o / "default" / "dataset.npz", ds)
    p.register_image("avg:1", recipe, bundle.digest, bundle.reference)
    p.launch("p-hosts", "avg:1", rounds=3)
    servers, stores = {}, {}
    for n, o in enumerate(orgs, start=1):
        stores[o] = ArtifactStore(tmp_path / f"host{n}" / "store", o)
        readers = LedgerReaders(ConsortiaClient(p.ledger, crypto.identity(o)), stores[o])
        servers[o] = ArtifactServer((f"127.0.{n}.1", 0), stores[o], crypto, readers).start()
    try:
        agents = [
            NodeAgent(
                ConsortiaClient(p.ledger, crypto.identity(o)),
                crypto,
                SandboxRuntime(),
                ArtifactStore(tmp_path / f"host{n}" / "store", o, endpoint=servers[o].url),
                tmp_path / "data" / o,
                tmp_path / f"host{n}" / "state" / o,
            ).start()  # it publishes its store's endpoint in its membership record
            for n, o in enumerate(orgs, start=1)
        ]
        members = {m.msp_id: m for m in ConsortiaClient(p.ledger, crypto.identity("Org4")).list_members()}
        assert {o: members[o].artifact_endpoint for o in orgs} == {o: servers[o].url for o in orgs}
        assert all(members[o].tls_ca_digest == tls_ca_digest(crypto, o) for o in orgs)
        for agent in agents:  # every peer's endpoint comes from the ledger, none from a mapping passed in
            assert agent.round_files.peers.endpoints == {}
            assert {o: agent.round_files.peers.endpoint(o) for o in orgs} == {o: servers[o].url for o in orgs}
        run_all(p, "p-hosts", agents)
        assert_matches_simulation(p, "p-hosts", 3, average_consensus)
        for o in orgs:
            model = ConsortiaClient(p.ledger, crypto.identity(o)).get_model(f"p-hosts:{o}")
            assert model.location == servers[o].url
            outsider = HttpsArtifactSource(servers[o].url, o, ClientTLS(crypto, "Org4MSP"), retries=0)
            sealed = [
                json.loads(f.read_text())["stored"]["digest"]
                for f in (stores[o].home / "messages" / "p-hosts").glob("*/*.json")
            ]
            assert sealed
            for digest in [model.ciphertext_digest, *sealed]:
                with pytest.raises(ArtifactForbidden):
                    outsider.get(digest)
    finally:
        for s in servers.values():
            s.stop()
        p.ledger.close()


def test_service_command_line(tmp_path, crypto):
    """``python -m executor.artifact_service`` on 127.0.2.1: Org2's own artifacts to Org2, 403 to Org1."""
    import socket
    import time

    from ledger.embedded import EmbeddedLedger

    EmbeddedLedger(tmp_path / "ledger.sqlite", crypto).close()
    store = ArtifactStore(tmp_path / "store", "Org2MSP")
    digest = store.put(b"Org2's own bytes").digest
    with socket.socket() as s:
        s.bind(("127.0.2.1", 0))
        port = s.getsockname()[1]
    args = ["--org", "Org2", "--consortium", str(crypto.root), "--store", str(tmp_path / "store")]
    args += ["--ledger", str(tmp_path / "ledger.sqlite"), "--listen", f"127.0.2.1:{port}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "executor.artifact_service", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert "at https://127.0.2.1:" in proc.stdout.readline()
        url = f"https://127.0.2.1:{port}"
        deadline = time.time() + 10
        while True:
            try:
                got = HttpsArtifactSource(url, "Org2MSP", ClientTLS(crypto, "Org2MSP"), retries=0).get(digest)
                break
            except ArtifactError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        assert got == b"Org2's own bytes"
        with pytest.raises(ArtifactForbidden):
            HttpsArtifactSource(url, "Org2MSP", ClientTLS(crypto, "Org1MSP"), retries=0).get(digest)
    finally:
        proc.terminate()
        proc.wait(10)


def test_endpoints_found_on_the_ledger(tmp_path, crypto):
    """An agent's endpoint is published once (re-publishing the same is a no-op), found by the others,
    overridden by an explicit mapping, and refused when its TLS CA digest is not the one trusted."""
    from executor.artifact_client import ArtifactPeers
    from executor.membership import MemberEndpoints, publish_own_membership, tls_ca_digest
    from ledger.embedded import EmbeddedLedger

    ledger = EmbeddedLedger(tmp_path / "ledger.sqlite", crypto)
    try:
        org1, org2 = (ConsortiaClient(ledger, crypto.identity(o)) for o in ("Org1MSP", "Org2MSP"))
        peers = ArtifactPeers(ClientTLS(crypto, "Org2MSP"), members=MemberEndpoints(org2, crypto, miss_ttl=0))
        assert peers.endpoint("Org1MSP") is None and peers.source("Org1MSP") is None  # local file mode
        first = publish_own_membership(org1, crypto, "https://127.0.1.1:8443")
        assert publish_own_membership(org1, crypto, "https://127.0.1.1:8443").tx_id == first.tx_id
        assert first.tls_ca_digest == tls_ca_digest(crypto, "Org1MSP")
        assert peers.endpoint("Org1MSP") == "https://127.0.1.1:8443"
        moved = publish_own_membership(org1, crypto, "https://127.0.1.1:9443")
        assert moved.version == first.version + 1
        assert peers.endpoint("Org1MSP") == "https://127.0.1.1:8443"  # cached for the run
        override = ArtifactPeers(ClientTLS(crypto, "Org2MSP"), {"Org1MSP": "https://127.0.1.1:7000"})
        override.members = MemberEndpoints(org2, crypto)
        assert override.endpoint("Org1MSP") == "https://127.0.1.1:7000"
        org1.publish_membership("https://127.0.1.1:9443", "sha256:" + "00" * 32)
        with pytest.raises(ArtifactError, match="TLS CA"):
            MemberEndpoints(org2, crypto).endpoint("Org1MSP")
    finally:
        ledger.close()


def _indexed_message(tmp_path):
    """Org1's store with a sealed message to Org2 indexed for round 1 of process p; (store, digest)."""
    from executor import message_index
    from executor.artifacts import MessageRef

    store = ArtifactStore(tmp_path / "org1", "Org1MSP")
    ref = store.put(b"sealed for Org2")
    message_index.write_entry(
        store.root, "p", 1, MessageRef("Org1MSP", "Org2MSP", "sha256:" + "ab" * 32, ref)
    )
    return store, ref.digest


def test_a_sender_whose_node_is_down_is_waited_for(tmp_path, crypto):
    """The sender's service is down when the recipient asks (its node restarting): the recipient waits
    with backoff and gets the message once the service is back on its address."""
    import threading
    import time

    from executor.artifact_client import ArtifactPeers

    store, digest = _indexed_message(tmp_path)
    readers = StaticReaders({digest: ["Org2MSP"]})
    first = ArtifactServer(("127.0.1.1", 0), store, crypto, readers).start()
    address = first.server_address
    first.stop()  # the node goes down
    peers = ArtifactPeers(ClientTLS(crypto, "Org2MSP"), {"Org1MSP": first.url}, patience=60)
    local = ArtifactStore(tmp_path / "org2", "Org2MSP")
    got: dict = {}
    t = threading.Thread(
        target=lambda: got.update(ref=peers.fetch_message("Org1MSP", "p", 1, "sha256:" + "ab" * 32, local))
    )
    t0 = time.monotonic()
    t.start()
    time.sleep(2.0)
    assert t.is_alive() and not got  # still waiting for Org1
    again = ArtifactServer(address, store, crypto, readers).start()  # the node is back
    try:
        t.join(30)
        assert got["ref"].stored.digest == digest and local.get(digest) == b"sealed for Org2"
        assert time.monotonic() - t0 >= 2.0
    finally:
        again.stop()


def test_a_sender_that_stays_unreachable_is_given_up_after_the_patience(tmp_path, crypto):
    from executor.artifact_client import ArtifactPeers, ArtifactUnreachable

    store, digest = _indexed_message(tmp_path)
    srv = ArtifactServer(("127.0.1.1", 0), store, crypto, StaticReaders({digest: ["Org2MSP"]})).start()
    srv.stop()
    peers = ArtifactPeers(ClientTLS(crypto, "Org2MSP"), {"Org1MSP": srv.url}, patience=1.5)
    with pytest.raises(ArtifactUnreachable, match=r"Org1MSP.*still unreachable after 2 s"):
        peers.fetch_message(
            "Org1MSP", "p", 1, "sha256:" + "ab" * 32, ArtifactStore(tmp_path / "o2", "Org2MSP")
        )
    # an answer is not waited for: Org3 asking for Org2's message is refused at once
    srv = ArtifactServer(("127.0.1.1", 0), store, crypto, StaticReaders({digest: ["Org2MSP"]})).start()
    try:
        wrong = ArtifactPeers(ClientTLS(crypto, "Org3MSP"), {"Org1MSP": srv.url}, patience=60)
        with pytest.raises(ArtifactForbidden):
            wrong.fetch_message(
                "Org1MSP", "p", 1, "sha256:" + "ab" * 32, ArtifactStore(tmp_path / "o3", "Org3MSP")
            )
    finally:
        srv.stop()
