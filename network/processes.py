"""Detached node processes recorded in a directory's ``state.json``: start them, wait until they
serve, stop them, and run the Fabric command-line tools. Shared by the one-machine network
(:class:`~network.supervision.NodeSupervisor`) and one organisation's nodes on its own host
(:class:`~network.member.MemberNodes`).

A recorded pid is only ever signalled if the process still carries its directory's marker in its
environment (:meth:`ProcessSupervisor._alive`), so a recycled pid is never taken for a node."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from network.config import REPO_ROOT, NetworkError


class ProcessSupervisor:
    """The processes of one directory ``net`` (its ``state.json``, ``logs/<node>.log``); a mixin: the
    class using it sets ``net`` and ``_children`` (the processes this object started, by pid)."""

    net: Path
    _children: dict[int, subprocess.Popen[bytes]]

    # ------------------------------------------------------------------ state
    @property
    def state_file(self) -> Path:
        return self.net / "state.json"

    def _state(self) -> dict[str, Any]:
        try:
            st: dict[str, Any] = json.loads(self.state_file.read_text())
            st.setdefault("pids", {})
            return st
        except (FileNotFoundError, ValueError):
            return {"pids": {}}

    def _save_state(self, st: dict[str, Any]) -> None:
        self.net.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(st, indent=2, sort_keys=True))
        os.replace(tmp, self.state_file)

    def _update_state(self, **entries: Any) -> dict[str, Any]:
        """Re-read ``state.json``, set ``entries``, write it back; return the new state."""
        st = self._state()
        st.update(entries)
        self._save_state(st)
        return st

    def _marker(self, name: str) -> bytes:
        """Environment entry every node we start carries: proves a recorded pid is still ours."""
        return f"CONSORTIA_FABRIC_NODE={self.net.resolve()}:{name}".encode()

    def _alive(self, pid: int, name: str) -> bool:
        """True iff ``pid`` runs, is not a zombie, and is the node ``name`` this directory started
        (a recycled pid of another process is never taken for ours, so never signalled)."""
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return False
            with open(f"/proc/{pid}/environ", "rb") as f:
                return self._marker(name) in f.read().split(b"\0")
        except (OSError, IndexError):
            return False

    def pids(self) -> dict[str, int]:
        """The process id of each node of this directory that runs."""
        return {n: p for n, p in self._state()["pids"].items() if p and self._alive(p, n)}

    # ------------------------------------------------------------------ processes
    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CORE_", "ORDERER_", "FABRIC_CA_"))}
        env.update(extra)
        return env

    def _node_view(self, name: str, argv: list[str]) -> list[str]:
        """``argv`` as node ``name`` is started (a subclass may wrap it in a view of its own files)."""
        return argv

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> int:
        (self.net / "logs").mkdir(parents=True, exist_ok=True)
        log = open(self.net / "logs" / f"{name}.log", "ab")
        key, value = self._marker(name).decode().split("=", 1)
        proc = subprocess.Popen(
            self._node_view(name, argv),
            env=self._env({**env, key: value}),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(REPO_ROOT),
        )
        log.close()
        self._children[proc.pid] = proc
        st = self._state()
        st["pids"][name] = proc.pid
        self._save_state(st)
        return proc.pid

    def _run(self, argv: list[str], env: dict[str, str], step: str, timeout: float = 120) -> str:
        try:
            r = subprocess.run(
                argv, env=self._env(env), capture_output=True, text=True, timeout=timeout, cwd=str(self.net)
            )
        except subprocess.TimeoutExpired:
            raise NetworkError(f"{step} did not finish within {timeout} s") from None
        if r.returncode != 0:
            raise NetworkError(
                f"{step} failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}"
            )
        return r.stdout

    def _exited(self, name: str, pid: int | None) -> bool:
        """A node we just started: its own exit status is authoritative; otherwise the marker check."""
        if not pid:
            return False
        child = self._children.get(pid)
        if child is not None:
            return child.poll() is not None
        return not self._alive(pid, name)

    def _wait_health(self, name: str, host: str, port: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        pid = self._state()["pids"].get(name)
        last = ""
        while time.monotonic() < deadline:
            if self._exited(name, pid):
                raise NetworkError(f"{name} exited during start; see {self.net / 'logs' / (name + '.log')}")
            try:
                with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.3)
        raise NetworkError(f"{name} not healthy after {timeout} s ({last}); see logs/{name}.log")

    def _wait_listening(self, name: str, host: str, port: int, timeout: float = 60) -> None:
        """Wait until ``name`` accepts TCP connections on ``host:port`` (it must not exit meanwhile)."""
        deadline = time.monotonic() + timeout
        pid = self._state()["pids"].get(name)
        while time.monotonic() < deadline:
            if self._exited(name, pid):
                raise NetworkError(f"{name} exited during start; see {self.net / 'logs' / (name + '.log')}")
            try:
                with socket.create_connection((host, port), timeout=2):
                    return
            except OSError:
                time.sleep(0.3)
        raise NetworkError(f"{name} does not listen on {host}:{port} after {timeout} s; see logs/{name}.log")

    def stop_node(self, name: str, timeout: float = 20) -> None:
        """Stop one node (e.g. ``peer0.org2``) by its recorded process id."""
        st = self._state()
        pid = st["pids"].pop(name, None)
        self._save_state(st)
        if pid is None or not self._alive(pid, name):
            return
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self._alive(pid, name) and time.monotonic() < deadline:
            time.sleep(0.1)
        if self._alive(pid, name):
            os.killpg(pid, signal.SIGKILL)
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


#: the binaries of each component of fabric-network/install.sh
COMPONENTS = {
    "core": ("peer", "orderer", "configtxgen", "osnadmin"),
    "tools": ("configtxlator", "cryptogen", "discover", "ledgerutil"),
    "ca": ("fabric-ca-server", "fabric-ca-client"),
}


def ensure_fabric(fabric_home: Path, components: tuple[str, ...] = ("core",)) -> None:
    """Install (or re-check) ``components`` of Fabric into ``fabric_home`` with
    ``fabric-network/install.sh``, which re-checks what is installed (files, checksums, version) in
    well under a second and installs or repairs only when that check fails; :class:`NetworkError`
    naming what is missing and why when it cannot."""
    script = REPO_ROOT / "fabric-network" / "install.sh"
    r = subprocess.run(
        ["bash", str(script), *components],
        env={**os.environ, "FABRIC_HOME": str(fabric_home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    missing = [b for c in components for b in COMPONENTS[c] if not (fabric_home / "bin" / b).is_file()]
    if r.returncode != 0 or missing:
        why = (r.stderr.strip().splitlines() or [""])[-1]
        raise NetworkError(
            f"Fabric binaries missing in {fabric_home / 'bin'}: {missing} (install.sh exit {r.returncode}: {why})"
        )
    if "core" in components:
        for f in ("core.yaml", "orderer.yaml"):
            if not (fabric_home / "config" / f).is_file():
                raise NetworkError(f"{fabric_home / 'config' / f} missing: run fabric-network/install.sh")
