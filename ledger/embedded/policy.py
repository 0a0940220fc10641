"""Endorsement policies of the embedded host, with Fabric's ImplicitMeta/Signature meaning.

``MAJORITY`` = endorsements by peers of more than half of the channel's organisations (Fabric's
default ``MAJORITY Endorsement``); ``ANY`` = at least one; ``ALL`` = every organisation;
``OutOf(k, Org1MSP, Org2MSP, ...)`` = k of the listed organisations. Only identities with the
``peer`` NodeOU role count as endorsers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class EndorsementPolicy:
    required: int
    organisations: tuple[str, ...]
    text: str

    @classmethod
    def parse(cls, text: str, channel_organisations: tuple[str, ...]) -> EndorsementPolicy:
        t = text.strip()
        n = len(channel_organisations)
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
