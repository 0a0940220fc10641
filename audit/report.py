"""The one verification report: every check with its outcome, ``ok`` only if all passed.

Every audit returns it: a model verified against the ledger (:func:`audit.verification.verify_model`,
from the gateway, the CLI, the demo and the node side), the offline audit bundle
(:func:`audit.bundles.verify_bundle`). A :class:`Check` names what was checked (``subject``) and the
kind of check (execution, chain, lineage, history, image, artifact, model, index, block, file,
attestation, checkpoint); ``check["check"]`` / ``["ok"]`` / ``["detail"]`` read it as the row the
API's JSON shows. ``facts`` carries what the audit established besides the checks (for a model: its
process, owner, digest, image and the executions of its lineage).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: errors a check function may raise to fail its check (anything else is a bug and propagates)
CHECK_ERRORS: tuple[type[BaseException], ...] = (ValueError, KeyError, TypeError, AttributeError, IndexError)


@dataclass(frozen=True)
class Check:
    kind: str  # see the module docstring; "" when the subject says it all
    subject: str  # what was checked, e.g. "execution proc-0/2/Org2MSP", "lineage links"
    ok: bool
    detail: str = ""

    def row(self) -> dict[str, Any]:
        """The API's JSON form: ``{"check": subject, "kind": ..., "ok": ..., "detail": ...}``."""
        return {"check": self.subject, "kind": self.kind, "ok": self.ok, "detail": self.detail}

    def __getitem__(self, key: str) -> Any:
        return self.row()[key]


@dataclass
class Report:
    """Outcome of a verification of ``subject``."""

    subject: str
    checks: list[Check] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def add(self, name: str, ok: bool, detail: str = "", kind: str = "") -> bool:
        self.checks.append(Check(kind, name, bool(ok), detail))
        return bool(ok)

    def run(self, name: str, fn: Callable[..., str | None], *args: Any, kind: str = "") -> bool:
        """Run ``fn(*args)``: its return value is the detail; a raised :data:`CHECK_ERRORS` error
        fails the check with its message."""
        try:
            detail = fn(*args)
        except CHECK_ERRORS as exc:
            return self.add(name, False, str(exc) or type(exc).__name__, kind)
        return self.add(name, True, detail or "", kind)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def counts(self) -> dict[str, int]:
        """Number of checks per kind."""
        out: dict[str, int] = {}
        for c in self.checks:
            out[c.kind] = out.get(c.kind, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "subject": self.subject,
            "ok": self.ok,
            "checks": [c.row() for c in self.checks],
            "failures": len(self.failures),
        }
        if self.facts:
            out["facts"] = self.facts
        return out
