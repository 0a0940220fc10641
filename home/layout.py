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
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from home.errors import NotPrivate
from wire.env import environment

CONFIG_FILE = "consortia.toml"


def home_root(home: str | os.PathLike[str] | None = None) -> Path:
    """``home``, else ``$CONSORTIA_HOME``, else ``./consortia-home`` (absolute)."""
    return Path(home or environment().home or "consortia-home").resolve()


DIR_MODE = 0o700  #: a home and the folders Consortia makes in it
FILE_MODE = 0o600  #: the files it writes there (configuration, ledger, indexes)


def make_private_dir(d: Path) -> Path:
    """``mkdir -p d`` (every folder it makes 0700) and ``d`` itself 0700: Consortia made it, it is this
    user's."""
    missing = [d, *(p for p in d.parents if not p.exists())]
    for p in reversed(missing):
        p.mkdir(exist_ok=True, mode=DIR_MODE)
    if stat.S_IMODE(d.stat().st_mode) != DIR_MODE:
        d.chmod(DIR_MODE)
    return d


def check_private(paths: Iterable[Path], what: str = "home") -> None:
    """Every existing path of ``paths`` is this user's and neither readable, writable nor enterable by
    anyone else (no bit of 0o077); else :class:`NotPrivate` saying how to fix it. Refused rather than
    repaired: a file others could read may already have been read, and only its owner can judge that
    (and rotate what leaked); a silent chmod would hide it."""
    for p in paths:
        try:
            st = os.stat(p)
        except FileNotFoundError:
            continue
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077 or st.st_uid != os.getuid():
            want = "700" if stat.S_ISDIR(st.st_mode) else "600"
            whose = "" if st.st_uid == os.getuid() else f", owned by uid {st.st_uid}"
            raise NotPrivate(
                f"{what} {p} is open to other users of this machine (mode {mode:04o}{whose}): it holds keys "
                f"or records the contracts refuse to non-members. Consortia refuses it rather than repair it, "
                f"so that you learn it was exposed; when you have judged that, run `chmod {want} {p}`",
                Path(p),
            )


def create_private_file(path: Path) -> Path:
    """Create ``path`` empty and 0600 unless it exists (never through a link); its folder 0700."""
    make_private_dir(path.parent)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE))
    except FileExistsError:
        pass
    return path


def sqlite_files(path: Path) -> tuple[Path, Path, Path]:
    """A SQLite database and its write-ahead log and shared-memory files."""
    return path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


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
