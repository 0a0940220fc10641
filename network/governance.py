"""The consortium governs its membership (``consortia governance propose|sign|status|submit|history``;
docs/governance.md).

A change of membership is a Fabric channel configuration update, made and signed without any key
leaving its owner's host:

1. **propose** -- one member fetches the channel's current configuration block from its own orderer as
   its own admin, edits the configuration (decoded by ``configtxlator``) and lets ``configtxlator
   compute_update`` make the ``ConfigUpdate``. ``add-org`` adds the newcomer's application
   organisation (its MSP from its public package, its peer as anchor peer) and orderer organisation
   (its orderer endpoint), and its orderer as a consenter (BFT: a ``ConsenterMapping`` entry with a new
   id, its MSP id, signing certificate and TLS certificate; etcdraft: a consenter); ``remove-org``
   removes all three; ``revoke`` puts the proposer's own CA's CRL into its own MSP's
   ``revocation_list`` (in both groups: Fabric requires one MSP id to have one definition). The
   channel's Readers, Writers and Endorsement rules name every member (:func:`network.files.channel_policies`)
   and are rewritten for the new member list. The proposal file (format ``consortia-config-update/1``)
   holds the update, the configuration block it was computed from, a description and the newcomer's
   package digest.
2. **sign** -- each admin, on its own host, checks the update against its own view of the channel and
   signs it with its own admin key: a ``ConfigSignature`` over the signature header and the update
   bytes (Fabric's ``SignConfigUpdate``), written to a signature file (``consortia-config-signature/1``)
   that travels to whoever submits.
3. **status** -- which signatures verify (issued by the member's CA in the channel configuration, with
   the admin role), which policies the update must meet (the ``mod_policy`` of every element it
   changes, as Fabric's configtx validator does) and whether the signatures meet them, evaluated as
   Fabric evaluates them: signature policies over MSP roles, ImplicitMeta ``ANY|ALL|MAJORITY`` over
   the sub-groups' policies.
4. **submit** -- refused while the policies are not met (nothing is sent); otherwise the envelope
   (``CONFIG_UPDATE``, signed by the submitter's admin) is broadcast to the submitter's own orderer and
   Fabric's answer is reported; a refusal by Fabric (a bad or short signature set) is a
   :class:`GovernanceError` carrying Fabric's own message.

:func:`membership_history` reads the configuration blocks from the ledger (each block's ``LAST_CONFIG``
index leads to the previous one) and says what each changed: organisations added or removed,
consenters, CRLs."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from fabric_protos.common import common_pb2, configtx_pb2, configuration_pb2
from fabric_protos.msp import msp_config_pb2
from fabric_protos.orderer import ab_pb2_grpc
from fabric_protos.orderer import configuration_pb2 as orderer_pb2
from fabric_protos.orderer.etcdraft import configuration_pb2 as raft_pb2
from google.protobuf import timestamp_pb2

from ledger.identity import Identity, certificate_role, parse_serialized_identity, verify
from network.channel import configtx_yaml
from network.config import DEFAULT_HOME, NetworkError
from network.files import channel_policies
from network.member import MemberNodes
from network.package import OrganisationPackage
from network.processes import ensure_fabric

FORMAT = "consortia-config-update/1"
SIGNATURE_FORMAT = "consortia-config-signature/1"
ACTIONS = ("add-org", "remove-org", "revoke")
NONCE_BYTES = 24


class GovernanceError(NetworkError):
    """An update that cannot be proposed, signed or submitted; or Fabric's refusal of one."""


# --------------------------------------------------------------------------- configtxlator


def _tool(argv: list[str], step: str, env: dict[str, str] | None = None) -> str:
    try:
        r = subprocess.run(
            argv, env={"PATH": "/usr/bin:/bin", **(env or {})}, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        raise GovernanceError(f"{step} did not finish within 120 s") from None
    if r.returncode != 0:
        raise GovernanceError(
            f"{step} failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}"
        )
    return r.stdout


class Configtxlator:
    """``configtxlator`` of the Fabric tools in ``fabric_home`` (installed if missing)."""

    def __init__(self, fabric_home: Path | None = None):
        self.home = Path(fabric_home or DEFAULT_HOME)
        ensure_fabric(self.home, ("tools",))
        self.exe = str(self.home / "bin" / "configtxlator")

    def decode(self, kind: str, data: bytes) -> Any:
        with tempfile.TemporaryDirectory(prefix="configtx-") as tmp:
            src = Path(tmp) / "in.pb"
            src.write_bytes(data)
            out = _tool([self.exe, "proto_decode", "--type", kind, "--input", str(src)], f"decode {kind}")
        return json.loads(out)

    def encode(self, kind: str, obj: Any) -> bytes:
        with tempfile.TemporaryDirectory(prefix="configtx-") as tmp:
            src, dst = Path(tmp) / "in.json", Path(tmp) / "out.pb"
            src.write_text(json.dumps(obj))
            _tool(
                [self.exe, "proto_encode", "--type", kind, "--input", str(src), "--output", str(dst)],
                f"encode {kind}",
            )
            return dst.read_bytes()

    def compute_update(self, channel: str, original: Any, updated: Any) -> bytes:
        """The ``ConfigUpdate`` from configuration ``original`` to ``updated`` (decoded JSON)."""
        with tempfile.TemporaryDirectory(prefix="configtx-") as tmp:
            a, b, out = Path(tmp) / "a.pb", Path(tmp) / "b.pb", Path(tmp) / "u.pb"
            a.write_bytes(self.encode("common.Config", original))
            b.write_bytes(self.encode("common.Config", updated))
            _tool(
                [
                    *(self.exe, "compute_update", "--channel_id", channel),
                    *("--original", str(a), "--updated", str(b), "--output", str(out)),
                ],
                "configtxlator compute_update",
            )
            return out.read_bytes()

    def organisation_groups(self, package: OrganisationPackage) -> tuple[Any, Any]:
        """The newcomer's application and orderer organisation groups, exactly as channel creation
        makes them (``configtxgen`` on a one-member channel of its package, decoded)."""
        with tempfile.TemporaryDirectory(prefix="neworg-") as tmp:
            work = Path(tmp)
            (work / "configtx.yaml").write_text(configtx_yaml([package], work, "raft"))
            block = work / "one.block"
            _tool(
                [
                    str(self.home / "bin" / "configtxgen"),
                    *("-profile", "ConsortiaChannel", "-channelID", "neworg", "-outputBlock", str(block)),
                ],
                "configtxgen (the newcomer's organisation)",
                {"FABRIC_CFG_PATH": str(work)},
            )
            config = config_of_block(self, block.read_bytes())
        groups = config["channel_group"]["groups"]
        return groups["Application"]["groups"][package.msp_id], groups["Orderer"]["groups"][package.msp_id]


def config_envelope(block: bytes) -> tuple[common_pb2.ChannelHeader, configtx_pb2.Config]:
    """The channel header and the configuration of a configuration block."""
    try:
        blk = common_pb2.Block.FromString(block)
        env = common_pb2.Envelope.FromString(blk.data.data[0])
        payload = common_pb2.Payload.FromString(env.payload)
        chdr = common_pb2.ChannelHeader.FromString(payload.header.channel_header)
        if chdr.type != common_pb2.CONFIG:
            raise GovernanceError(f"block {blk.header.number} is not a configuration block")
        return chdr, configtx_pb2.ConfigEnvelope.FromString(payload.data).config
    except (IndexError, ValueError) as exc:
        raise GovernanceError(f"not a configuration block: {exc}") from None


def config_of_block(tx: Configtxlator, block: bytes) -> Any:
    """The decoded ``common.Config`` of a configuration block."""
    _, config = config_envelope(block)
    return tx.decode("common.Config", config.SerializeToString())


# --------------------------------------------------------------------------- policies as JSON

_ROLES = {"admin": "ADMIN", "peer": "PEER", "client": "CLIENT", "orderer": "ORDERER", "member": "MEMBER"}


def signature_policy_json(rule: str) -> dict[str, Any]:
    """The ``SignaturePolicyEnvelope`` (configtxlator JSON) of ``OR('A.role', ...)`` or
    ``OutOf(n, 'A.role', ...)`` -- the two forms :func:`network.files.channel_policies` writes --
    as Fabric's policy DSL compiles them (one ``signed_by`` per principal, in order)."""
    m = re.fullmatch(r"\s*(OR|OutOf)\((?:\s*(\d+)\s*,)?(.*)\)\s*", rule)
    if m is None:
        raise GovernanceError(f"unsupported policy rule {rule!r}")
    principals = re.findall(r"'([^'.]+)\.([a-z]+)'", m.group(3))
    n = 1 if m.group(1) == "OR" else int(m.group(2))
    return {
        "identities": [
            {"principal": {"msp_identifier": msp, "role": _ROLES[role]}, "principal_classification": "ROLE"}
            for msp, role in principals
        ],
        "rule": {"n_out_of": {"n": n, "rules": [{"signed_by": i} for i in range(len(principals))]}},
        "version": 0,
    }


def _org_names(msp_ids: Iterable[str]) -> list[str]:
    names = []
    for m in sorted(msp_ids):
        if not m.endswith("MSP"):
            raise GovernanceError(f"MSP id {m!r} is not <organisation>MSP")
        names.append(m[: -len("MSP")])
    return names


def rewrite_member_policies(config: Any, msp_ids: Iterable[str]) -> None:
    """Set the channel's and the Application's Readers, Writers and Endorsement to the rules over
    ``msp_ids`` (the channel level adds every member's orderer to Readers and Writers, as channel
    creation does)."""
    names = _org_names(msp_ids)
    readers, writers, endorsement = channel_policies(names)
    orderers = ", ".join(f"'{n}MSP.orderer'" for n in names)
    channel, app = config["channel_group"], config["channel_group"]["groups"]["Application"]
    for group, name, rule in (
        (app, "Readers", readers),
        (app, "Writers", writers),
        (app, "Endorsement", endorsement),
        (channel, "Readers", readers[:-1] + ", " + orderers + ")"),
        (channel, "Writers", writers[:-1] + ", " + orderers + ")"),
    ):
        policy = group["policies"][name]["policy"]
        if policy.get("type") != 1:
            raise GovernanceError(
                f"{name} is not a signature policy here; this channel was not made by consortia"
            )
        policy["value"] = signature_policy_json(rule)


def rewrite_block_validation(config: Any) -> None:
    """BFT: set the Orderer's BlockValidation policy to the one ``configtxgen`` computes from the
    consenters (Fabric's ``EncodeBFTBlockVerificationPolicy``): the signatures of a quorum,
    ``ceil((n + f + 1) / 2)`` with ``f = (n - 1) // 3``, of the n consenters' identities."""
    if consensus_of(config) != "bft":
        return
    orderer = config["channel_group"]["groups"]["Orderer"]
    mapping = orderer["values"]["Orderers"]["value"]["consenter_mapping"]
    n = len(mapping)
    f = (n - 1) // 3
    quorum = -(-(n + f + 1) // 2)
    orderer["policies"]["BlockValidation"]["policy"] = {
        "type": 1,
        "value": {
            "identities": [
                {
                    "principal": {"mspid": c["msp_id"], "id_bytes": c["identity"]},
                    "principal_classification": "IDENTITY",
                }
                for c in mapping
            ],
            "rule": {"n_out_of": {"n": quorum, "rules": [{"signed_by": i} for i in range(n)]}},
            "version": 0,
        },
    }


# --------------------------------------------------------------------------- the edits


def consensus_of(config: Any) -> str:
    kind = str(config["channel_group"]["groups"]["Orderer"]["values"]["ConsensusType"]["value"]["type"])
    return {"BFT": "bft", "etcdraft": "raft"}.get(kind, kind)


def members_of(config: Any) -> list[str]:
    return sorted(config["channel_group"]["groups"]["Application"]["groups"])


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def add_organisation(config: Any, package: OrganisationPackage, tx: Configtxlator) -> Any:
    """``config`` with ``package``'s organisation added (module docstring, step 1); a new object."""
    new = json.loads(json.dumps(config))
    groups = new["channel_group"]["groups"]
    msp = package.msp_id
    if msp in groups["Application"]["groups"] or msp in groups["Orderer"]["groups"]:
        raise GovernanceError(f"{msp} is a member of the channel already")
    app_group, orderer_group = tx.organisation_groups(package)
    groups["Application"]["groups"][msp] = app_group
    groups["Orderer"]["groups"][msp] = orderer_group
    host, _, port = package.endpoints["orderer"].rpartition(":")
    tls = _b64(package.certificates["orderer_tls"])
    orderer = groups["Orderer"]["values"]
    kind = consensus_of(new)
    if kind == "bft":
        mapping = orderer["Orderers"]["value"]["consenter_mapping"]
        if any(f"{c['host']}:{c['port']}" == package.endpoints["orderer"] for c in mapping):
            raise GovernanceError(f"{package.endpoints['orderer']} is a consenter already")
        mapping.append(
            {
                "id": max(int(c["id"]) for c in mapping) + 1,
                "host": host,
                "port": int(port),
                "msp_id": msp,
                "identity": _b64(package.certificates["orderer"]),
                "client_tls_cert": tls,
                "server_tls_cert": tls,
            }
        )
    elif kind == "raft":
        consenters = orderer["ConsensusType"]["value"]["metadata"]["consenters"]
        consenters.append({"host": host, "port": int(port), "client_tls_cert": tls, "server_tls_cert": tls})
    else:
        raise GovernanceError(f"consensus {kind!r}: only BFT and etcdraft channels are governed here")
    rewrite_member_policies(new, members_of(new))
    rewrite_block_validation(new)
    return new


def remove_organisation(config: Any, msp: str) -> Any:
    """``config`` without member ``msp`` (its two groups, its consenter); a new object."""
    new = json.loads(json.dumps(config))
    groups = new["channel_group"]["groups"]
    if msp not in groups["Application"]["groups"]:
        raise GovernanceError(f"{msp} is not a member of the channel (members: {', '.join(members_of(new))})")
    endpoints = (
        groups["Orderer"]["groups"].get(msp, {}).get("values", {}).get("Endpoints", {}).get("value", {})
    ).get("addresses", [])
    del groups["Application"]["groups"][msp]
    groups["Orderer"]["groups"].pop(msp, None)
    if not groups["Application"]["groups"]:
        raise GovernanceError("a channel cannot lose its last member")
    orderer = groups["Orderer"]["values"]
    if consensus_of(new) == "bft":
        mapping = orderer["Orderers"]["value"]["consenter_mapping"]
        orderer["Orderers"]["value"]["consenter_mapping"] = [c for c in mapping if c["msp_id"] != msp]
    else:
        meta = orderer["ConsensusType"]["value"]["metadata"]
        meta["consenters"] = [c for c in meta["consenters"] if f"{c['host']}:{c['port']}" not in endpoints]
    rewrite_member_policies(new, members_of(new))
    rewrite_block_validation(new)
    return new


def add_crl(config: Any, msp: str, crl_pem: str) -> Any:
    """``config`` with ``crl_pem`` (issued by ``msp``'s CA) in ``msp``'s revocation list, in both its
    groups; a CRL of the same issuer already there is replaced (a CRL lists every revocation)."""
    crl = x509.load_pem_x509_crl(crl_pem.encode())
    new = json.loads(json.dumps(config))
    groups = new["channel_group"]["groups"]
    found = False
    for section in ("Application", "Orderer"):
        g = groups[section]["groups"].get(msp)
        if g is None:
            continue
        found = True
        cfg = g["values"]["MSP"]["value"]["config"]
        roots = [x509.load_pem_x509_certificate(base64.b64decode(c)) for c in cfg.get("root_certs") or []]
        issuer = next((r for r in roots if r.subject == crl.issuer), None)
        if issuer is None:
            raise GovernanceError(f"the CRL is issued by {crl.issuer.rfc4514_string()}, not by {msp}'s CA")
        key = issuer.public_key()
        if not isinstance(key, ec.EllipticCurvePublicKey) or not crl.is_signature_valid(key):
            raise GovernanceError(f"the CRL's signature does not verify with {msp}'s CA")
        kept = [
            c
            for c in cfg.get("revocation_list") or []
            if x509.load_pem_x509_crl(base64.b64decode(c)).issuer != crl.issuer
        ]
        cfg["revocation_list"] = [*kept, _b64(crl_pem)]
    if not found:
        raise GovernanceError(f"{msp} is not a member of the channel")
    return new


# --------------------------------------------------------------------------- what an update changes


def _mod_path(path: str, mod_policy: str) -> str:
    return mod_policy if mod_policy.startswith("/") else f"{path}/{mod_policy}"


def required_policies(update: Any, config: Any) -> list[str]:
    """The policies (absolute paths) a decoded ``ConfigUpdate`` must satisfy against the decoded
    ``config`` it applies to, as Fabric's configtx validator (``verifyDeltaSet``) computes them: for
    every element of the write set that exists in the configuration and whose version the update
    changes, the existing element's ``mod_policy`` (relative to its group). A new element needs no
    policy of its own: adding it raises its group's version, whose ``mod_policy`` applies."""
    need: set[str] = set()

    def changed(write: Any, read: Any) -> bool:
        return read is None or int(write.get("version", 0)) != int(read.get("version", 0))

    def walk(path: str, write: Any, read: Any, current: Any) -> None:
        if current is None:  # a new group: nothing in it exists yet
            return
        if changed(write, read):
            need.add(_mod_path(path, current.get("mod_policy") or ""))
        for kind in ("values", "policies"):
            for name, item in (write.get(kind) or {}).items():
                cur = (current.get(kind) or {}).get(name)
                if cur is not None and changed(item, ((read or {}).get(kind) or {}).get(name)):
                    need.add(_mod_path(path, cur.get("mod_policy") or ""))
        for name, g in (write.get("groups") or {}).items():
            walk(
                f"{path}/{name}",
                g,
                ((read or {}).get("groups") or {}).get(name),
                (current.get("groups") or {}).get(name),
            )

    walk("/Channel", update["write_set"], update["read_set"], config["channel_group"])
    return sorted(need)


def _diff_members(before: Any, after: Any) -> dict[str, Any]:
    b, a = set(members_of(before)), set(members_of(after))
    return {"added": sorted(a - b), "removed": sorted(b - a)}


# --------------------------------------------------------------------------- policy evaluation


@dataclass(frozen=True)
class Signer:
    """A verified signature of an update: who signed, with which role."""

    msp_id: str
    role: str | None
    subject: str


def _group_at(config: Any, path: str) -> Any:
    parts = path.strip("/").split("/")
    if parts[0] != "Channel":
        raise GovernanceError(f"policy path {path} is not under /Channel")
    g = config["channel_group"]
    for p in parts[1:-1]:
        g = (g.get("groups") or {}).get(p)
        if g is None:
            raise GovernanceError(f"no group {p} for policy {path}")
    return g


def _satisfies_principal(signer: Signer, principal: Any) -> bool:
    if principal.get("principal_classification", "ROLE") != "ROLE":
        return False
    p = principal["principal"]
    if p.get("msp_identifier") != signer.msp_id:
        return False
    role = str(p.get("role", "MEMBER")).lower()
    return role == "member" or role == signer.role


def _signature_rule(rule: Any, identities: list[Any], signers: list[Signer], used: set[int]) -> bool:
    if "signed_by" in rule:
        principal = identities[int(rule["signed_by"])]
        for i, s in enumerate(signers):
            if i not in used and _satisfies_principal(s, principal):
                used.add(i)
                return True
        return False
    n_out_of = rule["n_out_of"]
    met = 0
    for r in n_out_of.get("rules") or []:
        if _signature_rule(r, identities, signers, used):
            met += 1
    return met >= int(n_out_of.get("n", 0))


def evaluate_policy(config: Any, path: str, signers: list[Signer]) -> tuple[bool, str]:
    """Whether ``signers`` satisfy the policy at ``path`` of ``config``, and why (Fabric's
    evaluation: a signature policy over MSP roles, each signature used once; an ImplicitMeta policy
    over the sub-groups' policies of its name)."""
    group = _group_at(config, path)
    name = path.rsplit("/", 1)[1]
    policy = ((group.get("policies") or {}).get(name) or {}).get("policy")
    if policy is None:
        return False, f"no policy {path}"
    value = policy.get("value") or {}
    if policy.get("type") == 1:
        ok = _signature_rule(value["rule"], value.get("identities") or [], signers, set())
        return ok, "signed" if ok else "not signed"
    if policy.get("type") == 3:
        sub, rule = value.get("sub_policy"), value.get("rule", "ANY")
        children = sorted(group.get("groups") or {})
        met = [
            c for c in children if evaluate_policy(config, f"{path.rsplit('/', 1)[0]}/{c}/{sub}", signers)[0]
        ]
        need = {"ANY": 1, "ALL": len(children), "MAJORITY": len(children) // 2 + 1}[rule]
        return len(
            met
        ) >= need, f"{rule} {sub}: {len(met)} of {len(children)} ({', '.join(met) or 'none'}), needs {need}"
    return False, f"policy type {policy.get('type')} is not evaluated here"


# --------------------------------------------------------------------------- proposals and signatures


@dataclass
class ConfigSignatureFile:
    """One admin's signature of one update (``consortia-config-signature/1``)."""

    update_digest: str
    msp_id: str
    signature_header: bytes
    signature: bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "format": SIGNATURE_FORMAT,
            "update_digest": self.update_digest,
            "msp_id": self.msp_id,
            "signature_header": base64.b64encode(self.signature_header).decode(),
            "signature": base64.b64encode(self.signature).decode(),
        }

    def write(self, path: Path) -> Path:
        _write_json(path, self.to_json())
        return path

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ConfigSignatureFile:
        data = _read_json(path, SIGNATURE_FORMAT)
        try:
            return cls(
                str(data["update_digest"]),
                str(data["msp_id"]),
                base64.b64decode(data["signature_header"], validate=True),
                base64.b64decode(data["signature"], validate=True),
            )
        except (KeyError, ValueError) as exc:
            raise GovernanceError(f"{path} is not a readable signature file: {exc}") from None

    def config_signature(self) -> configtx_pb2.ConfigSignature:
        return configtx_pb2.ConfigSignature(signature_header=self.signature_header, signature=self.signature)


@dataclass
class ConfigUpdateProposal:
    """A proposed configuration update (``consortia-config-update/1``)."""

    channel: str
    action: str
    subject: str  # the MSP id added, removed or revoking
    description: str
    base_block: bytes  # the configuration block the update was computed against
    update: bytes  # the ConfigUpdate
    package_digest: str = ""
    signatures: list[ConfigSignatureFile] = field(default_factory=list)

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.update).hexdigest()

    @property
    def base_number(self) -> int:
        return int(common_pb2.Block.FromString(self.base_block).header.number)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "channel": self.channel,
            "action": self.action,
            "organisation": self.subject,
            "description": self.description,
            "package_digest": self.package_digest,
            "base_config_block": self.base_number,
            "update_digest": self.digest,
            "config_update": base64.b64encode(self.update).decode(),
            "base_block": base64.b64encode(self.base_block).decode(),
            "signatures": [s.to_json() for s in self.signatures],
        }

    def write(self, path: str | os.PathLike[str]) -> Path:
        out = Path(path)
        _write_json(out, self.to_json())
        return out

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> ConfigUpdateProposal:
        data = _read_json(path, FORMAT)
        try:
            p = cls(
                channel=str(data["channel"]),
                action=str(data["action"]),
                subject=str(data["organisation"]),
                description=str(data["description"]),
                base_block=base64.b64decode(data["base_block"], validate=True),
                update=base64.b64decode(data["config_update"], validate=True),
                package_digest=str(data.get("package_digest") or ""),
            )
            sigs = [
                ConfigSignatureFile(
                    str(s["update_digest"]),
                    str(s["msp_id"]),
                    base64.b64decode(s["signature_header"], validate=True),
                    base64.b64decode(s["signature"], validate=True),
                )
                for s in data.get("signatures") or []
            ]
        except (KeyError, ValueError, TypeError) as exc:
            raise GovernanceError(f"{path} is not a readable update: {exc}") from None
        if data.get("update_digest") != p.digest:
            raise GovernanceError(f"{path}: the update does not match its digest (changed on the way?)")
        p.signatures = sigs
        return p

    def with_signatures(self, files: Iterable[ConfigSignatureFile]) -> list[ConfigSignatureFile]:
        """Its own signatures and ``files``, one per MSP id (the later wins); a signature of another
        update is refused."""
        out: dict[str, ConfigSignatureFile] = {}
        for s in [*self.signatures, *files]:
            if s.update_digest != self.digest:
                raise GovernanceError(
                    f"the signature of {s.msp_id} is of update {s.update_digest}, not of {self.digest}"
                )
            out[s.msp_id] = s
        return [out[m] for m in sorted(out)]


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _read_json(path: str | os.PathLike[str], fmt: str) -> Any:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise GovernanceError(f"no file {path}") from None
    except ValueError as exc:
        raise GovernanceError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise GovernanceError(f"{path} is not a {fmt}")
    return data


def sign_update(proposal: ConfigUpdateProposal, admin: Identity) -> ConfigSignatureFile:
    """``admin``'s ``ConfigSignature`` of the update (Fabric's ``SignConfigUpdate``)."""
    if admin.role != "admin":
        raise GovernanceError(f"{admin!r} is not an admin: only an organisation's admin signs updates")
    header = common_pb2.SignatureHeader(
        creator=admin.serialized(), nonce=os.urandom(NONCE_BYTES)
    ).SerializeToString()
    return ConfigSignatureFile(proposal.digest, admin.msp_id, header, admin.sign(header + proposal.update))


def _msp_roots(config: Any, msp: str) -> list[x509.Certificate]:
    for section in ("Application", "Orderer"):
        g = config["channel_group"]["groups"].get(section, {}).get("groups", {}).get(msp)
        if g is not None:
            cfg = g["values"]["MSP"]["value"]["config"]
            return [x509.load_pem_x509_certificate(base64.b64decode(c)) for c in cfg.get("root_certs") or []]
    return []


def _issued_by(cert: x509.Certificate, root: x509.Certificate) -> bool:
    """``cert`` signed by ``root`` (a CA's signature need not be low-S; a transaction's must)."""
    try:
        cert.verify_directly_issued_by(root)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def verify_signature(config: Any, update: bytes, sig: ConfigSignatureFile) -> Signer:
    """The signer of ``sig`` if it verifies: its certificate is issued by its MSP's CA in ``config``
    and the signature covers the header and ``update``; :class:`GovernanceError` otherwise."""
    try:
        header = common_pb2.SignatureHeader.FromString(sig.signature_header)
        msp, pem = parse_serialized_identity(header.creator)
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise GovernanceError(f"the signature of {sig.msp_id} names no readable identity: {exc}") from None
    if msp != sig.msp_id:
        raise GovernanceError(f"a signature filed as {sig.msp_id}'s is by {msp}")
    roots = _msp_roots(config, msp)
    if not roots:
        raise GovernanceError(f"the signature of {msp}: {msp} is not a member of the channel")
    if not any(_issued_by(cert, root) for root in roots):
        raise GovernanceError(f"the signature of {msp}: its certificate is not issued by {msp}'s CA")
    key = cert.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey) or not verify(
        key, sig.signature_header + update, sig.signature
    ):
        raise GovernanceError(f"the signature of {msp} does not verify over this update")
    cn = cert.subject.rfc4514_string()
    return Signer(msp, certificate_role(cert), cn)


@dataclass(frozen=True)
class UpdateStatus:
    """What :func:`update_status` reports."""

    channel: str
    action: str
    organisation: str
    update_digest: str
    members: list[str]
    signed: list[str]
    invalid: dict[str, str]
    policies: dict[str, dict[str, Any]]
    ready: bool
    missing: str
    changes: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "action": self.action,
            "organisation": self.organisation,
            "update_digest": self.update_digest,
            "members": self.members,
            "signed": self.signed,
            "invalid": self.invalid,
            "policies": self.policies,
            "ready": self.ready,
            "missing": self.missing,
            "changes": self.changes,
        }


def update_status(
    proposal: ConfigUpdateProposal, signatures: Iterable[ConfigSignatureFile], tx: Configtxlator
) -> UpdateStatus:
    """Which signatures verify, which policies the update must meet and whether they are met."""
    config = config_of_block(tx, proposal.base_block)
    update = tx.decode("common.ConfigUpdate", proposal.update)
    signers: list[Signer] = []
    invalid: dict[str, str] = {}
    for s in proposal.with_signatures(signatures):
        try:
            signer = verify_signature(config, proposal.update, s)
        except GovernanceError as exc:
            invalid[s.msp_id] = str(exc)
            continue
        if signer.role != "admin":
            invalid[s.msp_id] = f"signed by {signer.subject}, not an admin"
            continue
        signers.append(signer)
    policies: dict[str, dict[str, Any]] = {}
    for path in required_policies(update, config):
        ok, why = evaluate_policy(config, path, signers)
        policies[path] = {"met": ok, "detail": why}
    unmet = [p for p, v in policies.items() if not v["met"]]
    members = members_of(config)
    signed = sorted(s.msp_id for s in signers)
    missing = ""
    if unmet:
        unsigned = [m for m in members if m not in signed]
        missing = (
            f"{', '.join(unmet)} not met: signed by {', '.join(signed) or 'no member'}; "
            f"not yet by {', '.join(unsigned)}"
        )
    return UpdateStatus(
        channel=proposal.channel,
        action=proposal.action,
        organisation=proposal.subject,
        update_digest=proposal.digest,
        members=members,
        signed=signed,
        invalid=invalid,
        policies=policies,
        ready=not unmet and bool(policies),
        missing=missing,
        changes=update_changes(tx, proposal, config),
    )


def update_changes(tx: Configtxlator, proposal: ConfigUpdateProposal, config: Any) -> dict[str, Any]:
    """What the update does to the members, consenters and revocation lists, computed from the
    update applied to ``config`` (not from its description)."""
    after = apply_update(config, tx.decode("common.ConfigUpdate", proposal.update))
    return {**_diff_members(config, after), **_diff_orderers_and_crls(config, after)}


def apply_update(config: Any, update: Any) -> Any:
    """``config`` with the write set of a decoded ``ConfigUpdate`` applied (the elements the write
    set raises replace the configuration's; elements it does not name stay as they are)."""
    new = json.loads(json.dumps(config))

    def merge(cur: Any, write: Any, read: Any) -> Any:
        raised = read is None or int(write.get("version", 0)) != int(read.get("version", 0))
        out = dict(cur or {})
        for kind in ("values", "policies"):
            items = dict((cur or {}).get(kind) or {})
            if raised:  # the group is replaced: it holds exactly the items the write set names
                items = {k: v for k, v in items.items() if k in (write.get(kind) or {})}
            for name, item in (write.get(kind) or {}).items():
                r = ((read or {}).get(kind) or {}).get(name)
                if r is None or int(item.get("version", 0)) != int(r.get("version", 0)):
                    items[name] = item
            out[kind] = items
        groups = dict((cur or {}).get("groups") or {})
        if raised:
            groups = {k: v for k, v in groups.items() if k in (write.get("groups") or {})}
        for name, g in (write.get("groups") or {}).items():
            groups[name] = merge(groups.get(name), g, ((read or {}).get("groups") or {}).get(name))
        out["groups"] = groups
        if raised:
            out["mod_policy"] = write.get("mod_policy") or out.get("mod_policy")
        return out

    new["channel_group"] = merge(new["channel_group"], update["write_set"], update["read_set"])
    return new


def _consenters_json(config: Any) -> list[str]:
    values = config["channel_group"]["groups"]["Orderer"]["values"]
    if consensus_of(config) == "bft":
        return sorted(f"{c['host']}:{c['port']}" for c in values["Orderers"]["value"]["consenter_mapping"])
    return sorted(
        f"{c['host']}:{c['port']}" for c in values["ConsensusType"]["value"]["metadata"]["consenters"]
    )


def _crls_json(config: Any) -> dict[str, int]:
    out = {}
    for msp, g in config["channel_group"]["groups"]["Application"]["groups"].items():
        crls = g["values"]["MSP"]["value"]["config"].get("revocation_list") or []
        out[msp] = sum(sum(1 for _ in x509.load_pem_x509_crl(base64.b64decode(c))) for c in crls)
    return out


def _diff_orderers_and_crls(before: Any, after: Any) -> dict[str, Any]:
    b, a = _consenters_json(before), _consenters_json(after)
    cb, ca = _crls_json(before), _crls_json(after)
    return {
        "consenters_added": sorted(set(a) - set(b)),
        "consenters_removed": sorted(set(b) - set(a)),
        "revoked_certificates": {m: ca[m] for m in ca if ca[m] != cb.get(m, 0)},
    }


# --------------------------------------------------------------------------- submission


def config_update_envelope(
    proposal: ConfigUpdateProposal, signatures: list[ConfigSignatureFile], submitter: Identity
) -> common_pb2.Envelope:
    """The ``CONFIG_UPDATE`` envelope: the update with every signature, signed by ``submitter``."""
    cue = configtx_pb2.ConfigUpdateEnvelope(
        config_update=proposal.update, signatures=[s.config_signature() for s in signatures]
    )
    now = time.time()
    chdr = common_pb2.ChannelHeader(
        type=common_pb2.CONFIG_UPDATE,
        channel_id=proposal.channel,
        timestamp=timestamp_pb2.Timestamp(seconds=int(now), nanos=int((now % 1) * 1e9)),
    )
    shdr = common_pb2.SignatureHeader(creator=submitter.serialized(), nonce=os.urandom(NONCE_BYTES))
    payload = common_pb2.Payload(
        header=common_pb2.Header(
            channel_header=chdr.SerializeToString(), signature_header=shdr.SerializeToString()
        ),
        data=cue.SerializeToString(),
    ).SerializeToString()
    return common_pb2.Envelope(payload=payload, signature=submitter.sign(payload))


def broadcast(envelope: common_pb2.Envelope, address: str, tls_root: bytes, timeout: float = 60) -> None:
    """Send ``envelope`` to the orderer at ``address`` (TLS, trusted through ``tls_root``); a
    :class:`GovernanceError` with Fabric's status and message unless it answers SUCCESS."""
    import grpc

    channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=tls_root))
    try:
        stub = ab_pb2_grpc.AtomicBroadcastStub(channel)
        try:
            replies = list(stub.Broadcast(iter([envelope]), timeout=timeout))
        except grpc.RpcError as exc:
            raise GovernanceError(
                f"the orderer at {address} is unreachable: {exc.code().name}: {exc.details()}"
            ) from None
    finally:
        channel.close()
    if not replies:
        raise GovernanceError(f"the orderer at {address} gave no answer")
    reply = replies[0]
    if reply.status != common_pb2.SUCCESS:
        status = common_pb2.Status.Name(reply.status)
        raise GovernanceError(f"Fabric refused the update: {status}: {reply.info}")


# --------------------------------------------------------------------------- membership history


@dataclass(frozen=True)
class ConfigChange:
    """One configuration block and what it changed."""

    block: int
    time: float
    members: list[str]
    added: list[str]
    removed: list[str]
    consenters: list[str]
    consenters_added: list[str]
    consenters_removed: list[str]
    revoked: dict[str, list[str]]  # MSP id -> serial numbers (hex) in its CRLs

    def to_json(self) -> dict[str, Any]:
        return {
            "block": self.block,
            "time": self.time,
            "members": self.members,
            "added": self.added,
            "removed": self.removed,
            "consenters": self.consenters,
            "consenters_added": self.consenters_added,
            "consenters_removed": self.consenters_removed,
            "revoked": self.revoked,
        }


def _last_config(block: common_pb2.Block) -> int:
    md = common_pb2.Metadata.FromString(block.metadata.metadata[common_pb2.SIGNATURES])
    return int(common_pb2.OrdererBlockMetadata.FromString(md.value).last_config.index) if md.value else 0


def _membership(config: configtx_pb2.Config) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """(members, consenters, revoked serials per member) of a configuration (protobuf)."""
    groups = config.channel_group.groups
    members = sorted(groups["Application"].groups)
    orderer = groups["Orderer"].values
    consenters: list[str] = []
    if "Orderers" in orderer and orderer["Orderers"].value:
        mapping = configuration_pb2.Orderers.FromString(orderer["Orderers"].value).consenter_mapping
        consenters = sorted(f"{c.host}:{c.port}" for c in mapping)
    else:
        ct = orderer_pb2.ConsensusType.FromString(orderer["ConsensusType"].value)
        if ct.type == "etcdraft":
            meta = raft_pb2.ConfigMetadata.FromString(ct.metadata)
            consenters = sorted(f"{c.host}:{c.port}" for c in meta.consenters)
    revoked: dict[str, list[str]] = {}
    for msp in members:
        mc = msp_config_pb2.MSPConfig.FromString(groups["Application"].groups[msp].values["MSP"].value)
        fabric = msp_config_pb2.FabricMSPConfig.FromString(mc.config)
        serials = sorted(
            format(r.serial_number, "x")
            for crl in fabric.revocation_list
            for r in x509.load_pem_x509_crl(crl)
        )
        if serials:
            revoked[msp] = serials
    return members, consenters, revoked


def membership_history(fetch: Callable[[int | None], bytes]) -> list[ConfigChange]:
    """Every configuration block of the channel, oldest first, with what it changed. ``fetch(n)`` returns
    block ``n`` (``None``: the newest) as bytes; each block's ``LAST_CONFIG`` leads to the configuration
    before it."""
    newest = common_pb2.Block.FromString(fetch(None))
    number: int | None = _last_config(newest)
    found: list[tuple[int, float, configtx_pb2.Config]] = []
    while number is not None:
        raw = fetch(number)
        chdr, config = config_envelope(raw)
        found.append((number, chdr.timestamp.seconds + chdr.timestamp.nanos / 1e9, config))
        if number == 0:
            break
        number = _last_config(common_pb2.Block.FromString(fetch(number - 1)))
    out: list[ConfigChange] = []
    before: tuple[list[str], list[str], dict[str, list[str]]] = ([], [], {})
    for number, when, config in reversed(found):
        members, consenters, revoked = _membership(config)
        out.append(
            ConfigChange(
                block=number,
                time=when,
                members=members,
                added=sorted(set(members) - set(before[0])),
                removed=sorted(set(before[0]) - set(members)),
                consenters=consenters,
                consenters_added=sorted(set(consenters) - set(before[1])),
                consenters_removed=sorted(set(before[1]) - set(consenters)),
                revoked={m: s for m, s in revoked.items() if s != before[2].get(m)},
            )
        )
        before = (members, consenters, revoked)
    return out


# --------------------------------------------------------------------------- one member's steps


def admin_identity(nodes: MemberNodes) -> Identity:
    """The organisation's own admin, from its own home (the only key a governance step uses)."""
    return Identity.from_msp_dir(nodes.org.msp_id, nodes.layout.user_dir(nodes.org, "Admin") / "msp")


def fetch_block_bytes(nodes: MemberNodes, channel: str, which: str = "config") -> bytes:
    """Block ``which`` of ``channel`` through the member's own orderer, as its own admin."""
    with tempfile.TemporaryDirectory(prefix="block-") as tmp:
        return nodes.fetch_block(channel, Path(tmp) / "b.block", which).read_bytes()


def propose(
    nodes: MemberNodes,
    channel: str,
    action: str,
    *,
    package: OrganisationPackage | None = None,
    organisation: str = "",
    crl_pem: str = "",
    description: str = "",
) -> ConfigUpdateProposal:
    """The update ``action`` on the channel's current configuration (module docstring, step 1)."""
    if action not in ACTIONS:
        raise GovernanceError(f"unknown action {action!r}; actions: {', '.join(ACTIONS)}")
    tx = Configtxlator(nodes.fabric_home)
    base = fetch_block_bytes(nodes, channel, "config")
    config = config_of_block(tx, base)
    digest = ""
    if action == "add-org":
        if package is None:
            raise GovernanceError("add-org needs the newcomer's public package")
        updated, subject, digest = add_organisation(config, package, tx), package.msp_id, package.digest
        what = f"add {subject} (package {digest}) as a member and its orderer {package.endpoints['orderer']} as a consenter"
    elif action == "remove-org":
        subject = organisation if organisation.endswith("MSP") else f"{organisation}MSP"
        updated = remove_organisation(config, subject)
        what = f"remove {subject} and its orderer from channel {channel}"
    else:
        if not crl_pem:
            raise GovernanceError("revoke needs the CRL of the organisation's own CA (consortia org revoke)")
        subject = nodes.org.msp_id
        updated = add_crl(config, subject, crl_pem)
        serials = sorted(format(r.serial_number, "x") for r in x509.load_pem_x509_crl(crl_pem.encode()))
        what = f"{subject}'s CRL: revoked serial numbers {', '.join(serials) or 'none'}"
    update = tx.compute_update(channel, config, updated)
    return ConfigUpdateProposal(
        channel=channel,
        action=action,
        subject=subject,
        description=description or what,
        base_block=base,
        update=update,
        package_digest=digest,
    )


def sign(nodes: MemberNodes, proposal: ConfigUpdateProposal) -> ConfigSignatureFile:
    """This member's admin signature of ``proposal``, after checking that it applies to the
    configuration its own orderer delivers now (not one it was shown)."""
    current = fetch_block_bytes(nodes, proposal.channel, "config")
    if common_pb2.Block.FromString(current).header.number != proposal.base_number:
        raise GovernanceError(
            f"the update was computed against configuration block {proposal.base_number}; the channel's "
            f"is now block {common_pb2.Block.FromString(current).header.number}: propose it again"
        )
    if config_envelope(current)[1] != config_envelope(proposal.base_block)[1]:
        raise GovernanceError("the configuration in the update is not the one this member's orderer delivers")
    return sign_update(proposal, admin_identity(nodes))


def submit(
    nodes: MemberNodes,
    proposal: ConfigUpdateProposal,
    signatures: list[ConfigSignatureFile],
    force: bool = False,
    wait_s: float = 120,
) -> dict[str, Any]:
    """Broadcast the update with ``signatures`` to this member's own orderer once its policies are met
    (``force``: send anyway, to let Fabric judge); the configuration block it made."""
    tx = Configtxlator(nodes.fabric_home)
    status = update_status(proposal, signatures, tx)
    if not status.ready and not force:
        raise GovernanceError(f"not submitted: {status.missing or 'no policy to meet'}")
    current = common_pb2.Block.FromString(fetch_block_bytes(nodes, proposal.channel, "config")).header.number
    if current != proposal.base_number:
        raise GovernanceError(
            f"not submitted: the channel's configuration is block {current}, the update was computed "
            f"against block {proposal.base_number}: propose it again"
        )
    envelope = config_update_envelope(proposal, proposal.with_signatures(signatures), admin_identity(nodes))
    broadcast(envelope, nodes.org.address("orderer"), nodes.layout.tlsca_cert(nodes.org).read_bytes())
    deadline = time.monotonic() + wait_s
    while True:
        block = fetch_block_bytes(nodes, proposal.channel, "config")
        number = common_pb2.Block.FromString(block).header.number
        if number > proposal.base_number:
            return {
                "channel": proposal.channel,
                "action": proposal.action,
                "organisation": proposal.subject,
                "config_block": int(number),
                "signed": status.signed,
                "members": members_of(config_of_block(tx, block)),
            }
        if time.monotonic() > deadline:
            raise GovernanceError(
                f"the orderer accepted the update but no new configuration block after {wait_s} s"
            )
        time.sleep(1)


def history(nodes: MemberNodes, channel: str) -> list[ConfigChange]:
    """The channel's membership history from the blocks its own orderer delivers."""
    return membership_history(lambda n: fetch_block_bytes(nodes, channel, "newest" if n is None else str(n)))
