"""Where things live in a Consortia home: the one layout (docs/configuration.md)::

    <home>/
      consortia.toml          # the home's configuration (home.settings)
      crypto/                 # the consortium's identities (cryptogen layout, ledger.identity)
      ledger.db               # the embedded ledger
      data/<MSP>/<dataset>/   # each organisation's local datasets (dataset.npz)
      artifacts/<MSP>/        # each organisation's content-addressed artifact store
      state/<MSP>/            # each organisation's node-agent state (task keys, progress)
      gateways/<MSP>/         # each organisation's gateway: audit index, API token hashes
      logs/                   # node-agent logs when agents run as OS processes

The folder names are those of ``consortia.toml`` (:class:`home.settings.Settings.paths` builds the
layout from it); relative names are relative to the home.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from wire.env import environment

CONFIG_FILE = "consortia.toml"


def home_root(home: str | os.PathLike[str] | None = None) -> Path:
    """``home``, else ``$CONSORTIA_HOME``, else ``./consortia-home`` (absolute)."""
    return Path(home or environment().home or "consortia-home").resolve()


@dataclass(frozen=True)
class Layout:
    """Where things live in the home ``root`` (the single definition; see the module docstring)."""

    root: Path
    ledger_file: str = "ledger.db"
    crypto_dir: str = "crypto"
    data_dir: str = "data"
    artifacts_dir: str = "artifacts"
    state_dir: str = "state"
    org_data: tuple[tuple[str, str], ...] = ()  # [organisations.<MSP>] data = ... (overrides)

    @property
    def config(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def crypto(self) -> Path:
        return self.root / self.crypto_dir

    @property
    def ledger(self) -> Path:
        return self.root / self.ledger_file

    @property
    def data_root(self) -> Path:
        return self.root / self.data_dir

    @property
    def store_root(self) -> Path:
        return self.root / self.artifacts_dir

    @property
    def state_root(self) -> Path:
        return self.root / self.state_dir

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def data(self, msp_id: str) -> Path:
        """``msp_id``'s data root: its datasets are ``<data>/<dataset name>/dataset.npz``."""
        override = dict(self.org_data).get(msp_id)
        return self.root / override if override else self.data_root / msp_id

    def artifacts(self, msp_id: str) -> Path:
        return self.store_root / msp_id

    def gateway(self, msp_id: str) -> Path:
        return self.root / "gateways" / msp_id

    def relative(self, path: str | os.PathLike[str]) -> str:
        """``path`` relative to the home if it is inside it, else absolute (as consortia.toml names it)."""
        resolved = Path(path).resolve()
        try:
            return str(resolved.relative_to(self.root.resolve()))
        except ValueError:
            return str(resolved)
