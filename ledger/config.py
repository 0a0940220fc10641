"""Configuration in one place: ``consortia.toml`` in the Consortia home, plus environment overrides.

The home directory is ``$CONSORTIA_HOME`` (default ``./consortia-home``). Its default layout, for
the embedded setup:

    consortia-home/
      consortia.toml        # optional; every key below has a default
      crypto/               # the consortium's identities (cryptogen layout)
      ledger.db             # the embedded ledger
      orgs/<MSP>/artifacts  # each organisation's content-addressed artifact store
      orgs/<MSP>/data       # each organisation's local datasets

Keys (``[ledger]``: ``backend = "embedded" | "fabric"``, ``path``, ``policy``, ``batch_timeout``;
``[consortium]``: ``crypto``, ``organisations``). Environment overrides: ``CONSORTIA_LEDGER_BACKEND``,
``CONSORTIA_LEDGER_PATH``, ``CONSORTIA_CRYPTO``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    home: Path
    ledger_backend: str = "embedded"
    ledger_path: Path = field(default=Path("ledger.db"))
    policy: str = "MAJORITY"
    batch_timeout: float = 0.01
    crypto: Path = field(default=Path("crypto"))
    organisations: tuple[str, ...] = ("Org1", "Org2", "Org3")

    def org_dir(self, msp_id: str) -> Path:
        return self.home / "orgs" / msp_id


def load(home: str | os.PathLike | None = None) -> Settings:
    root = Path(home or os.environ.get("CONSORTIA_HOME", "consortia-home")).resolve()
    data: dict = {}
    cfg = root / "consortia.toml"
    if cfg.exists():
        with cfg.open("rb") as fh:
            data = tomllib.load(fh)
    led = data.get("ledger", {})
    con = data.get("consortium", {})
    backend = os.environ.get("CONSORTIA_LEDGER_BACKEND", led.get("backend", "embedded"))
    if backend not in ("embedded", "fabric"):
        raise ValueError(f"ledger backend must be 'embedded' or 'fabric', not {backend!r}")
    return Settings(
        home=root, ledger_backend=backend,
        ledger_path=root / os.environ.get("CONSORTIA_LEDGER_PATH", led.get("path", "ledger.db")),
        policy=led.get("policy", "MAJORITY"), batch_timeout=float(led.get("batch_timeout", 0.01)),
        crypto=root / os.environ.get("CONSORTIA_CRYPTO", con.get("crypto", "crypto")),
        organisations=tuple(con.get("organisations", ("Org1", "Org2", "Org3"))),
    )
