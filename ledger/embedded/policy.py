"""Endorsement policies of the embedded host, with Fabric's ImplicitMeta/Signature meaning.

The chaincode's policy: ``TWO`` = endorsements by peers of any two of the channel's organisations
(one in a one-organisation channel; the consortium's chaincode policy, docs/ledger.md "Who endorses
what"); ``MAJORITY`` = more than half of the channel's organisations (Fabric's default
``MAJORITY Endorsement``); ``ANY`` = at least one; ``ALL`` = every organisation;
``OutOf(k, Org1MSP, Org2MSP, ...)`` = k of the listed organisations. Only identities with the
``peer`` NodeOU role count as endorsers.

Key-level policies (:func:`key_policy_satisfied`): a serialized ``common.SignaturePolicyEnvelope``,
evaluated as Fabric's ``cauthdsl`` does (each endorsement satisfies at most one principal, an
``NOutOf`` counts the sub-rules its endorsements satisfy).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fabric_protos.common import policies_pb2

from chaincode.endorsement import KeyPolicy, parse_envelope, principal_role
from chaincode.stub import collection_organisation


@dataclass(frozen=True)
class EndorsementPolicy:
    required: int
    organisations: tuple[str, ...]
    text: str

    @classmethod
    def parse(cls, text: str, channel_organisations: tuple[str, ...]) -> EndorsementPolicy:
        t = text.strip()
        n = len(channel_organisations)
        if t.upper() == "TWO":
            return cls(min(2, n), channel_organisations, "TWO")
        if t.upper() == "MAJORITY":
            return cls(n // 2 + 1, channel_organisations, "MAJORITY")
        if t.upper() == "ANY":
            return cls(1, channel_organisations, "ANY")
        if t.upper() == "ALL":
            return cls(n, channel_organisations, "ALL")
        m = re.fullmatch(r"OutOf\(\s*(\d+)\s*,(.*)\)", t)
        if m:
            orgs = tuple(
                o.strip().strip("'\"").removesuffix(".peer") for o in m.group(2).split(",") if o.strip()
            )
            k = int(m.group(1))
            unknown = set(orgs) - set(channel_organisations)
            if unknown or not 1 <= k <= len(orgs):
                raise ValueError(f"invalid endorsement policy {text!r}")
            return cls(k, orgs, t)
        raise ValueError(f"unknown endorsement policy {text!r} (MAJORITY, ANY, ALL or OutOf(k, orgs...))")

    def satisfied_by(self, endorsing_organisations: set[str]) -> bool:
        return len(endorsing_organisations & set(self.organisations)) >= self.required

    def default_endorsers(self, preferred: str) -> list[str]:
        """The smallest set of organisations that satisfies the policy, the caller's own first."""
        orgs = [preferred] if preferred in self.organisations else []
        orgs += [o for o in self.organisations if o != preferred]
        return orgs[: self.required]


Endorser = tuple[str, str]  # (MSP id, NodeOU role) of an endorsement's identity


def key_policy_satisfied(policy: bytes, endorsers: Iterable[Endorser]) -> bool:
    """Whether ``endorsers`` satisfy the key-level policy ``policy`` (False for bytes that are not a
    ``SignaturePolicyEnvelope``, as Fabric's validator refuses a policy it cannot parse)."""
    try:
        envelope = parse_envelope(policy)
    except ValueError:
        return False
    signers = sorted(set(endorsers))  # one identity counts once
    principals = [principal_role(p) for p in envelope.identities]

    def matches(index: int, signer: Endorser) -> bool:
        if not 0 <= index < len(principals) or principals[index] is None:
            return False
        msp, role = principals[index]  # type: ignore[misc]
        return signer[0] == msp and (role == "member" or role == signer[1])

    def holds(rule: policies_pb2.SignaturePolicy, used: list[bool]) -> bool:
        kind = rule.WhichOneof("Type")
        if kind == "signed_by":
            for j, signer in enumerate(signers):
                if not used[j] and matches(rule.signed_by, signer):
                    used[j] = True
                    return True
            return False
        if kind == "n_out_of":
            verified = 0
            for sub in rule.n_out_of.rules:
                trial = list(used)
                if holds(sub, trial):
                    verified += 1
                    used[:] = trial
            return verified >= int(rule.n_out_of.n)
        return False

    return holds(envelope.rule, [False] * len(signers))


def collection_policy(collection: str) -> bytes | None:
    """The endorsement policy of a private data collection, which applies to a private key without a
    key-level policy instead of the chaincode's: Fabric gives organisation X's implicit collection the
    policy "a peer of X" (a write to it endorsed without X's peer is ENDORSEMENT_POLICY_FAILURE)."""
    org = collection_organisation(collection)
    return None if org is None else KeyPolicy(1, (org,)).to_bytes()


def plan_endorsers(
    chaincode_policy: EndorsementPolicy | None, key_policies: Sequence[bytes], preferred: str
) -> list[str]:
    """The organisations whose peers to ask, the caller's own first: few enough, and enough to
    satisfy the chaincode's policy (when a written key has no key-level policy) and every key-level
    policy of a written key -- the plan Fabric's Gateway makes from a proposal's chaincode interest."""
    wanted: list[tuple[int, tuple[str, ...]]] = []
    for raw in dict.fromkeys(key_policies):
        try:
            policy = KeyPolicy.from_bytes(raw)
        except ValueError as exc:
            raise ValueError(f"cannot plan endorsements for a key-level policy: {exc}") from None
        wanted.append((policy.required, policy.organisations))
    if chaincode_policy is not None:  # last: the members a key-level policy chose often satisfy it
        wanted.append((chaincode_policy.required, chaincode_policy.organisations))
    chosen: list[str] = []
    for required, orgs in wanted:
        have = sum(1 for o in chosen if o in orgs)
        for org in sorted(orgs, key=lambda o: (o != preferred, o)):
            if have >= required:
                break
            if org not in chosen:
                chosen.append(org)
                have += 1
    chosen.sort(key=lambda o: o != preferred)
    return chosen
