"""Files the network generates in its directory: identities (``crypto/``, via
:meth:`ledger.identity.Consortium.generate`), node configuration (``config/core.yaml``,
``orderer.yaml``, ``configtx.yaml``), the channel genesis block, the chaincode service's TLS
material, the CCaaS chaincode package and the applications' connection profile."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ledger.cryptogen import cert_pem, issue_leaf, key_pem, write_file
from ledger.identity import Consortium
from network.config import NetworkError
from network.placement import placement_spec
from network.supervision import NodeSupervisor

LAYOUT = 2  #: state.json "layout": 2 = placed network, a chaincode service and package per organisation


def channel_policies(organisations: tuple[str, ...] | list[str]) -> tuple[str, str, str]:
    """The channel's Readers, Writers and Endorsement rules as explicit signature policies over every
    organisation: Readers = any admin|peer|client, Writers = any admin|client -- the identities
    ``ANY Readers`` and ``ANY Writers`` admit through each organisation's own policies -- and
    Endorsement, the chaincode's policy, = peers of any two organisations (``OutOf(2, ...)``, one in a
    one-organisation channel). A learning process's records need a majority of its own members on top,
    by their key-level policies (chaincode/endorsement.py; docs/ledger.md "Who endorses what"): the
    channel-wide rule only has to let two members create a process's new keys, whatever the
    consortium's size.

    Why not the ImplicitMeta forms: Fabric evaluates an ImplicitMeta policy sub-policy by sub-policy,
    and each organisation's sub-policy verifies every signature again, so one client signature was
    checked up to N times by the orderer (``/Channel/Writers``) and by each endorser
    (``/Channel/Application/Writers``), and two endorsements up to 2N times by each validating peer;
    a signature policy verifies each signature once (docs/fabric.md "Policies", measured there). The
    cost: a change of membership rewrites these rules in its channel update, as it rewrites the
    organisation list anyway."""
    return (
        _any_of(_principals(organisations, ("admin", "peer", "client"))),
        _any_of(_principals(organisations, ("admin", "client"))),
        f"OutOf({min(2, len(organisations))}, {_quoted(_principals(organisations, ('peer',)))})",
    )


def _principals(organisations: tuple[str, ...] | list[str], roles: tuple[str, ...]) -> list[str]:
    return [f"{o}MSP.{r}" for o in organisations for r in roles]


def _quoted(principals: list[str]) -> str:
    return ", ".join(f"'{p}'" for p in principals)


def _any_of(principals: list[str]) -> str:
    return f"OR({_quoted(principals)})"


def configtx_organisation(
    anchor: str,
    msp_id: str,
    msp_dir: Path,
    anchor_peer: tuple[str, int | str],
    orderer_endpoint: str | None = None,
) -> str:
    """One application organisation's entry in configtx.yaml ``Organizations``: its Readers
    (admin|peer|client), Writers (admin|client), Admins (admin) and Endorsement (peer) policies and
    its anchor peer. With ``orderer_endpoint`` it also runs an orderer of the channel (a channel from
    packages): its orderer identities join Readers and Writers and the endpoint is listed."""
    m = msp_id
    orderer = f", '{m}.orderer'" if orderer_endpoint else ""
    endpoints = f'    OrdererEndpoints: ["{orderer_endpoint}"]\n' if orderer_endpoint else ""
    return f"""  - &{anchor}
    Name: {m}
    ID: {m}
    MSPDir: {msp_dir}
    Policies:
      Readers: {{Type: Signature, Rule: "OR('{m}.admin', '{m}.peer', '{m}.client'{orderer})"}}
      Writers: {{Type: Signature, Rule: "OR('{m}.admin', '{m}.client'{orderer})"}}
      Admins: {{Type: Signature, Rule: "OR('{m}.admin')"}}
      Endorsement: {{Type: Signature, Rule: "OR('{m}.peer')"}}
{endpoints}    AnchorPeers: [{{Host: {anchor_peer[0]}, Port: {anchor_peer[1]}}}]
"""


def configtx_profile(
    organisations: tuple[str, ...] | list[str],
    *,
    channel_readers: str,
    channel_writers: str,
    ordering: str,
    batch_timeout: str,
    max_message_count: int,
    orderer_refs: str,
    application_refs: str,
) -> str:
    """The part of a configtx.yaml both channels share, from ``Capabilities:`` to the end: the
    capabilities (Channel V3_0, Orderer V2_0, Application V2_5), the Application's policies
    (:func:`channel_policies` of ``organisations``, ``MAJORITY Admins``, ``MAJORITY Endorsement``
    for the lifecycle), the Orderer's (``ordering``: its type and consenters, then the batch
    limits), the channel's (``channel_readers``/``channel_writers``: the members' principals and
    the orderers') and the ``ConsortiaChannel`` profile (``orderer_refs``, ``application_refs``:
    the anchors of the orderer and of the application organisations). The founder's
    network (:meth:`GeneratedFiles.configtx_yaml`) and a channel from packages
    (:func:`network.channel.configtx_yaml`) put their own organisations in front of it."""
    readers, writers, endorsement = channel_policies(organisations)
    return f"""Capabilities:
  Channel: &ChannelCapabilities {{V3_0: true}}
  Orderer: &OrdererCapabilities {{V2_0: true}}
  Application: &ApplicationCapabilities {{V2_5: true}}
Application: &ApplicationDefaults
  Organizations:
  Policies:
    Readers: {{Type: Signature, Rule: "{readers}"}}
    Writers: {{Type: Signature, Rule: "{writers}"}}
    Admins: {{Type: ImplicitMeta, Rule: "MAJORITY Admins"}}
    LifecycleEndorsement: {{Type: ImplicitMeta, Rule: "MAJORITY Endorsement"}}
    Endorsement: {{Type: Signature, Rule: "{endorsement}"}}
  Capabilities: *ApplicationCapabilities
Orderer: &OrdererDefaults
{ordering}  BatchTimeout: {batch_timeout}
  BatchSize: {{MaxMessageCount: {max_message_count}, AbsoluteMaxBytes: 10 MB, PreferredMaxBytes: 2 MB}}
  Organizations:
  Policies:
    Readers: {{Type: ImplicitMeta, Rule: "ANY Readers"}}
    Writers: {{Type: ImplicitMeta, Rule: "ANY Writers"}}
    Admins: {{Type: ImplicitMeta, Rule: "MAJORITY Admins"}}
    BlockValidation: {{Type: ImplicitMeta, Rule: "ANY Writers"}}
Channel: &ChannelDefaults
  Policies:
    Readers: {{Type: Signature, Rule: "{channel_readers}"}}
    Writers: {{Type: Signature, Rule: "{channel_writers}"}}
    Admins: {{Type: ImplicitMeta, Rule: "MAJORITY Admins"}}
  Capabilities: *ChannelCapabilities
Profiles:
  ConsortiaChannel:
    <<: *ChannelDefaults
    Orderer:
      <<: *OrdererDefaults
      Organizations: [{orderer_refs}]
      Capabilities: *OrdererCapabilities
    Application:
      <<: *ApplicationDefaults
      Organizations: [{application_refs}]
      Capabilities: *ApplicationCapabilities
"""


def reproducible_tgz(out: Path, folder: Path, members: list[str]) -> None:
    """A .tgz whose bytes depend only on the members' names and contents: the gzip header carries
    no time or file name (``tarfile``'s "w:gz" writes the current time there, so a package made a
    second later had another package id) and every member has mtime 0, owner 0:0."""
    with (
        open(out, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tf,
    ):
        for member in members:
            info = tf.gettarinfo(str(folder / member), member)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(folder / member, "rb") as f:
                tf.addfile(info, f)


class GeneratedFiles(NodeSupervisor):
    # ------------------------------------------------------------------ configuration
    def generate(self) -> None:
        """Identities (kept across restarts), node config and the channel genesis block."""
        self.net.mkdir(parents=True, exist_ok=True)
        self._check_placement()
        if not (self.crypto / Consortium.MANIFEST).is_file():
            # each organisation's TLS certificates carry its own address as an IP SAN
            Consortium.generate(self.crypto, self.cfg.organisations, hosts=self.cfg.placement)
        self._update_state(layout=LAYOUT, placement=self.cfg.placement, isolate=bool(self.cfg.isolate))
        cons = self.consortium()
        if tuple(o.name for o in cons.organisations) != tuple(self.cfg.organisations):
            raise NetworkError(
                f"{self.crypto} holds organisations {[o.name for o in cons.organisations]}, "
                f"not {list(self.cfg.organisations)}: run 'network down --purge' first"
            )
        conf = self.net / "config"
        conf.mkdir(exist_ok=True)
        for f in ("core.yaml", "orderer.yaml"):
            shutil.copy(self.cfg.fabric_home / "config" / f, conf / f)
        (conf / "configtx.yaml").write_text(self.configtx_yaml())
        for i in range(len(self.cfg.organisations)):
            if self.cfg.chaincode_tls and not (self.chaincode_tls(i) / "server.crt").is_file():
                self._chaincode_tls_material(i)
        block = self.net / f"{self.cfg.channel}.block"
        if not block.exists():
            self._run(
                [
                    str(self.bin / "configtxgen"),
                    "-profile",
                    "ConsortiaChannel",
                    "-outputBlock",
                    str(block),
                    "-channelID",
                    self.cfg.channel,
                ],
                {"FABRIC_CFG_PATH": str(conf)},
                "configtxgen",
            )

    def stale(self) -> bool:
        """True iff the directory holds a network made by an older layout (one chaincode service
        for every peer, no placement): it cannot be resumed, only purged."""
        st = self._state()
        return bool(st.get("package_id") or st.get("channel_created")) and st.get("layout") != LAYOUT

    def _check_placement(self) -> None:
        """Refuse to resume a network placed elsewhere (its certificates and genesis block name
        the addresses it was made with) or made by an older layout."""
        if self.stale():
            raise NetworkError(
                f"{self.net} holds a network of an older layout: run 'network down --purge' first"
            )
        placed = self._state().get("placement")
        if placed and placed != self.cfg.placement:
            raise NetworkError(
                f"{self.net} was placed at {placement_spec(placed)}, not "
                f"{placement_spec(self.cfg.placement)}: run 'network down --purge' first"
            )

    def configtx_yaml(self) -> str:
        """configtx.yaml (docs/fabric.md "Topology"): Channel V3_0, etcdraft, MAJORITY endorsement."""
        c = self.cfg
        od = self.orderer_dir
        omsp = self.crypto / "ordererOrganizations" / "example.com" / "msp"
        orgs = []
        for i, name in enumerate(c.organisations):
            msp = self._org_paths(i)["base"] / "msp"
            orgs.append(configtx_organisation(name, f"{name}MSP", msp, (c.org_host(i), c.peer_port(i))))
        # channel level: the same principals, and the orderer organisation's members
        channel_readers = _any_of(
            ["OrdererMSP.member", *_principals(c.organisations, ("admin", "peer", "client"))]
        )
        channel_writers = _any_of(["OrdererMSP.member", *_principals(c.organisations, ("admin", "client"))])
        ordering = f"""  OrdererType: etcdraft
  EtcdRaft:
    Consenters:
      - Host: {c.orderer_host}
        Port: {c.orderer_port}
        ClientTLSCert: {od / "tls" / "server.crt"}
        ServerTLSCert: {od / "tls" / "server.crt"}
"""
        return f"""# generated by network -- do not edit
Organizations:
  - &OrdererOrg
    Name: OrdererOrg
    ID: OrdererMSP
    MSPDir: {omsp}
    Policies:
      Readers: {{Type: Signature, Rule: "OR('OrdererMSP.member')"}}
      Writers: {{Type: Signature, Rule: "OR('OrdererMSP.member')"}}
      Admins: {{Type: Signature, Rule: "OR('OrdererMSP.admin')"}}
    OrdererEndpoints: ["{c.orderer_host}:{c.orderer_port}"]
{"".join(orgs)}
{
            configtx_profile(
                c.organisations,
                channel_readers=channel_readers,
                channel_writers=channel_writers,
                ordering=ordering,
                batch_timeout=c.batch_timeout,
                max_message_count=c.max_message_count,
                orderer_refs="*OrdererOrg",
                application_refs=", ".join(f"*{n}" for n in c.organisations),
            )
        }"""

    def _chaincode_tls_material(self, i: int) -> None:
        """Server and client TLS certificates of organisation ``i``'s chaincode service, issued by
        that organisation's own TLS CA (SANs: its address, localhost): the service presents
        ``server.crt``, its peer presents ``client.crt`` (from its package's ``connection.json``),
        each side checks the other against ``ca.crt``."""
        org = self._org_paths(i)
        tlsca_dir = org["base"] / "tlsca"
        ca_cert = x509.load_pem_x509_certificate(next(tlsca_dir.glob("*-cert.pem")).read_bytes())
        ca_key = serialization.load_pem_private_key((tlsca_dir / "priv_sk").read_bytes(), None)
        if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
            raise NetworkError(f"{tlsca_dir / 'priv_sk'} is not an EC private key")
        out = self.chaincode_tls(i)
        sans = (self.cfg.org_host(i), f"ccaas.{org['domain']}", "localhost")
        for name in ("server", "client"):
            cn = f"ccaas-{name}.{org['domain']}"
            cert, key = issue_leaf(ca_cert, ca_key, cn, None, tls=True, sans=sans)
            write_file(out / f"{name}.crt", cert_pem(cert))
            write_file(out / f"{name}.key", key_pem(key), private=True)
        write_file(out / "ca.crt", cert_pem(ca_cert))

    def package(self, i: int = 0) -> Path:
        """Organisation ``i``'s CCaaS package: it names only that organisation's own chaincode
        service (its address, its TLS material), so its peer never dials another organisation's."""
        c = self.cfg
        d = self.net / "chaincode" / c.organisations[i].lower()
        d.mkdir(parents=True, exist_ok=True)
        label = f"{c.chaincode}_{c.chaincode_version}"
        conn_obj: dict[str, object] = {
            "address": f"{c.org_host(i)}:{c.chaincode_port(i)}",
            "dial_timeout": "10s",
            "tls_required": False,
        }
        if c.chaincode_tls:
            t = self.chaincode_tls(i)
            conn_obj.update(
                tls_required=True,
                client_auth_required=True,
                client_cert=(t / "client.crt").read_text(),
                client_key=(t / "client.key").read_text(),
                root_cert=(t / "ca.crt").read_text(),
            )
        conn = json.dumps(conn_obj)
        meta = json.dumps({"type": "ccaas", "label": label})
        code = d / "code.tar.gz"
        pkg = d / f"{label}.tgz"
        (d / "connection.json").write_text(conn)
        (d / "metadata.json").write_text(meta)
        reproducible_tgz(code, d, ["connection.json"])
        reproducible_tgz(pkg, d, ["metadata.json", "code.tar.gz"])
        return pkg

    def _peer_entry(self, i: int) -> dict[str, str]:
        return {
            "msp_id": f"{self.cfg.organisations[i]}MSP",
            "address": f"{self.cfg.org_host(i)}:{self.cfg.peer_port(i)}",
            "tls_ca_file": str(self._org_paths(i)["tls_ca"]),
        }

    def _write_profile(self) -> None:
        """``connection.json`` (every organisation's peer) and ``profiles/<Org>.json`` (only that
        organisation's own peer, on its own address): what
        :meth:`ledger.fabric.gateway.FabricLedger.from_profile` reads."""
        c = self.cfg
        common = {
            "channel": c.channel,
            "chaincode": c.chaincode,
            "crypto": str(self.crypto),
            "orderer": {"address": f"{c.orderer_host}:{c.orderer_port}", "tls_ca_file": str(self.orderer_ca)},
        }
        peers = [self._peer_entry(i) for i in range(len(c.organisations))]
        self.profile_file.write_text(json.dumps({**common, "peers": peers}, indent=2))
        for i, org in enumerate(c.organisations):
            f = self.org_profile_file(org)
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(json.dumps({**common, "organisation": org, "peers": [peers[i]]}, indent=2))
