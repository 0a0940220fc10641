"""Node supervision: start the orderer, the peers and the chaincode server as detached processes,
record their process ids in ``state.json``, wait until they serve, stop them, and run the Fabric
command-line tools (``peer``, ``osnadmin``, ``configtxgen``) against them.

A recorded pid is only ever signalled if the process still carries this network's marker in its
environment (:meth:`NodeSupervisor._alive`), so a recycled pid is never taken for a node."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

from network.config import BINARIES, REPO_ROOT, NetworkError, NetworkLayout
from network.host_view import view_command


class NodeSupervisor(NetworkLayout):
    # ------------------------------------------------------------------ state
    def _state(self) -> dict[str, Any]:
        try:
            st: dict[str, Any] = json.loads(self.state_file.read_text())
            return st
        except (FileNotFoundError, ValueError):
            return {"pids": {}}

    def _save_state(self, st: dict[str, Any]) -> None:
        self.state_file.write_text(json.dumps(st, indent=2, sort_keys=True))

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
        """True iff ``pid`` runs, is not a zombie, and is the node ``name`` this network started
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
        """The process id of each node of this network that runs (orderer, peers, chaincode services)."""
        return {n: p for n, p in self._state()["pids"].items() if p and self._alive(p, n)}

    def running(self) -> dict[str, bool]:
        pids = self._state()["pids"]
        n = range(len(self.cfg.organisations))
        names = ["orderer", *(self.peer_name(i) for i in n), *(self.chaincode_name(i) for i in n)]
        return {n: bool(pids.get(n)) and self._alive(pids[n], n) for n in names}

    # ------------------------------------------------------------------ processes
    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CORE_", "ORDERER_"))}
        env.update(extra)
        return env

    def _node_view(self, name: str, argv: list[str]) -> list[str]:
        """``argv`` in a view of the node's own files only when the network is isolated (host_view):
        the orderer its identity and ledger; a peer its own identity and ledger; a chaincode service
        its own TLS material. The network directory (everyone's keys) is otherwise hidden."""
        if not self.cfg.isolate:
            return argv
        config = [self.net / "config"]
        if name == "orderer":
            own, ro = [self.net / "data" / "orderer"], [self.orderer_dir, *config]
        else:
            n = range(len(self.cfg.organisations))
            i = next(i for i in n if name in (self.peer_name(i), self.chaincode_name(i)))
            if name == self.peer_name(i):
                own, ro = [self.net / "data" / name], [self._org_paths(i)["peer"], *config]
            else:
                own, ro = [], [self.chaincode_tls(i)] if self._state().get("chaincode_tls") else []
        for d in own:
            d.mkdir(parents=True, exist_ok=True)
        return view_command(argv, own, read_only=ro, hide=[self.net], cwd=REPO_ROOT)

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
            child = self._children.get(pid) if pid else None
            if child is not None and child.poll() is not None:
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

    # ------------------------------------------------------------------ binaries
    def ensure_binaries(self) -> None:
        # install.sh re-checks what is installed (files, checksums, `peer version`) on every run,
        # in well under a second, and installs or repairs only when that check fails.
        script = REPO_ROOT / "fabric-network" / "install.sh"
        r = subprocess.run(
            ["bash", str(script)],
            env={**os.environ, "FABRIC_HOME": str(self.cfg.fabric_home)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        missing = [b for b in BINARIES if not (self.bin / b).is_file()]
        if r.returncode != 0 or missing:
            why = (r.stderr.strip().splitlines() or [""])[-1]
            raise NetworkError(
                f"Fabric binaries missing in {self.bin}: {missing} (install.sh exit {r.returncode}: {why})"
            )
        for f in ("core.yaml", "orderer.yaml"):
            if not (self.cfg.fabric_home / "config" / f).is_file():
                raise NetworkError(
                    f"{self.cfg.fabric_home / 'config' / f} missing: run fabric-network/install.sh"
                )

    # ------------------------------------------------------------------ nodes
    def start_orderer(self) -> None:
        self._spawn("orderer", [str(self.bin / "orderer")], self.orderer_env())
        self._wait_health("orderer", self.cfg.orderer_host, self.cfg.orderer_ops_port)
        # /healthz answers before the admin endpoint listens; on a loaded machine osnadmin then met
        # "connection refused" (seen in the bare-machine check at load 10 on 2 cores)
        self._wait_listening("orderer", self.cfg.orderer_host, self.cfg.orderer_admin_port)

    def start_peer(self, i: int) -> None:
        name = self.peer_name(i)
        self._spawn(name, [str(self.bin / "peer"), "node", "start"], self.peer_env(i))
        self._wait_health(name, self.cfg.org_host(i), self.cfg.peer_ops_port(i))
        self._wait_listening(name, self.cfg.org_host(i), self.cfg.peer_port(i))

    def start_chaincode_server(self, i: int) -> None:
        """Start organisation ``i``'s own chaincode service on its own address, serving its package."""
        st = self._state()
        pkg = (st.get("package_ids") or {}).get(self.cfg.organisations[i])
        if not pkg:
            raise NetworkError("no chaincode package id yet: run 'network deploy'")
        name, host, port = self.chaincode_name(i), self.cfg.org_host(i), self.cfg.chaincode_port(i)
        argv = [
            sys.executable,
            "-m",
            "ledger.fabric.chaincode_server",
            "--address",
            f"{host}:{port}",
            "--chaincode-id",
            pkg,
            "--dispatch",
            self.cfg.dispatch,
        ]
        if st.get("chaincode_tls"):  # as packaged: the peers' connection.json decides
            d = self.chaincode_tls(i)
            argv += [
                "--tls-cert",
                str(d / "server.crt"),
                "--tls-key",
                str(d / "server.key"),
                "--client-ca",
                str(d / "ca.crt"),
            ]
        self._spawn(name, argv, {"PYTHONPATH": str(REPO_ROOT), "CHAINCODE_LOG_LEVEL": "INFO"})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not self._alive(self._state()["pids"][name], name):
                raise NetworkError(f"{name} exited; see {self.net / 'logs' / (name + '.log')}")
            with socket.socket() as s:
                if s.connect_ex((host, port)) == 0:
                    return
            time.sleep(0.2)
        raise NetworkError(f"{name} did not listen on {host}:{port} within 30 s")

    # ------------------------------------------------------------------ command-line tools
    def _osnadmin(self, *args: str) -> str:
        tls = self.orderer_dir / "tls"
        return self._run(
            [
                str(self.bin / "osnadmin"),
                "channel",
                *args,
                "-o",
                f"{self.cfg.orderer_host}:{self.cfg.orderer_admin_port}",
                "--ca-file",
                str(tls / "ca.crt"),
                "--client-cert",
                str(tls / "server.crt"),
                "--client-key",
                str(tls / "server.key"),
            ],
            {},
            f"osnadmin channel {args[0]}",
        )

    def _peer_cli(self, i: int, *args: str, step: str, timeout: float = 120) -> str:
        return self._run([str(self.bin / "peer"), *args], self.admin_env(i), step, timeout)
