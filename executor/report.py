"""The one verification report: every check with its outcome, ``ok`` only if all passed.

Used by the lineage verification (:func:`executor.lineage.verify_model_lineage`, whose
:class:`~executor.lineage.LineageReport` adds the model's facts), the gateway's live verification
and the offline audit bundle (``api.verification``, ``api.bundle``). A :class:`Check` names what was
checked (``subject``) and, for the lineage, the kind of check (signature, identity, image, chain,
history, artifact, model); ``check["check"]`` / ``["ok"]`` / ``["detail"]`` read it as the row the
API's JSON shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: errors a check function may raise to fail its check (anything else is a bug and propagates)
CHECK_ERRORS: tuple[type[BaseException], ...] = (ValueError, KeyError, TypeError, AttributeError, IndexError)


@dataclass(frozen=True)
class Check:
    kind: str  # signature | identity | image | chain | history | artifact | model | "" (API checks)
    subject: str  # what was checked, e.g. "Org1MSP round 3", "execution proc-0/2/Org2MSP"
    ok: bool
    detail: str = ""

    def row(self) -> dict[str, Any]:
        """The API's JSON form: ``{"check": subject, "ok": ..., "detail": ...}``."""
        return {"check": self.subject, "ok": self.ok, "detail": self.detail}

    def __getitem__(self, key: str) -> Any:
        return self.row()[key]


@dataclass
class Report:
    """Outcome of a verification of ``subject``."""

    subject: str
    checks: list[Check] = field(default_factory=list)

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
        return {
            "subject": self.subject,
            "ok": self.ok,
            "checks": [c.row() for c in self.checks],
            "failures": len(self.failures),
        }
