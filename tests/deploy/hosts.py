"""A consortium deployed as separate hosts on one machine (issue 12): each organisation's processes
run in a bubblewrap view of its own home only (ledger.fabric.network.host_view) and listen on its
own loopback address. The founder's steps (network, hand-off folders) run outside every view."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ledger.fabric.network.host_view import view_command
from ledger.join import ORDERER_PUBLIC, PUBLIC_FILES

ROOT = Path(__file__).resolve().parents[2]


def copy_public(src: Path, dst: Path, patterns: tuple[str, ...]) -> None:
    """The public part of a cryptogen folder (what an organisation hands the others): certificates only."""
    for pattern in patterns:
        for f in src.glob(pattern):
            (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dst / f.relative_to(src))


class Host:
    """One organisation's host: ``root`` holds everything it has (home, hand-off, logs)."""

    def __init__(self, name: str, n: int, root: Path):
        self.name, self.msp, self.address = name, f"{name}MSP", f"127.0.{n}.1"
        self.root = root
        self.home = root / "home"
        self.handoff = root / "handoff"
        self.logs = root / "logs"
        self.procs: dict[str, subprocess.Popen] = {}
        for d in (self.home, self.handoff, self.logs):
            d.mkdir(parents=True, exist_ok=True)

    @property
    def env(self) -> dict[str, str]:
        return {
            "PYTHONPATH": str(ROOT),
            "CONSORTIA_HOME": str(self.home),
            "CONSORTIA_CACHE": str(self.root / "cache"),  # bundles pulled or built: its own
        }

    def argv(self, argv: list[str], host_proc: bool = False, read_only: tuple[Path, ...] = ()) -> list[str]:
        (self.root / "cache").mkdir(exist_ok=True)
        return view_command(argv, [self.root], read_only=read_only, host_proc=host_proc, env=self.env)

    def consortia(self, *args: str, code: int = 0, timeout: float = 600, read_only=()) -> dict | list:
        """``consortia ARGS --json`` run on this host; its parsed JSON answer."""
        proc = subprocess.run(
            self.argv([sys.executable, "-m", "api.cli", *args, "--json"], read_only=read_only),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert proc.returncode == code, (self.name, args, proc.stdout[-2000:], proc.stderr[-3000:])
        return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}

    def python(self, code: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """A Python snippet run on this host (its view), e.g. a client call of its own."""
        return subprocess.run(
            self.argv([sys.executable, "-c", code]), capture_output=True, text=True, timeout=timeout
        )

    def start(self, name: str, argv: list[str], host_proc: bool = False) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(
            self.argv(argv, host_proc=host_proc),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        return self.procs[name]

    def start_artifact_service(self, port: int) -> None:
        argv = [
            sys.executable,
            "-m",
            "executor.artifact_service",
            "--org",
            self.name,
            "--home",
            str(self.home),
        ]
        self.start("artifacts", [*argv, "--listen", f"{self.address}:{port}"])

    def start_gateway(self, port: int) -> None:
        """The organisation's gateway (REST API and explorer) on its own address."""
        argv = [sys.executable, "-m", "api.cli", "serve", "--home", str(self.home), "--org", self.name]
        self.start("gateway", [*argv, "--host", self.address, "--port", str(port)])
        self.gateway_url = f"http://{self.address}:{port}"

    def start_agent(self) -> None:
        """The node agent following the ledger (its tasks in sandboxes of its own: host /proc)."""
        argv = [sys.executable, "-m", "api.cli", "node", "run", "--home", str(self.home)]
        self.start("agent", [*argv, "--runtime", "sandbox", "--warm"], host_proc=True)

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def stop_all(self) -> None:
        for name in list(self.procs):
            proc = self.procs.pop(name)
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def log(self, name: str) -> str:
        f = self.logs / f"{name}.log"
        return f.read_text(errors="replace")[-4000:] if f.is_file() else ""


def listening(pids: list[int]) -> set[tuple[str, int]]:
    """The (address, port) pairs the processes ``pids`` (and their descendants) listen on (TCP)."""
    inodes: set[str] = set()
    todo, seen = list(pids), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
    out = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and parts[9] in inodes:  # LISTEN
                hexip, hexport = parts[1].split(":")
                ip = ".".join(str(int(hexip[i : i + 2], 16)) for i in (6, 4, 2, 0))
                out.add((ip, int(hexport, 16)))
    return out


def wait_for(predicate, timeout: float, what: str, every: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


__all__ = ["ORDERER_PUBLIC", "PUBLIC_FILES", "Host", "copy_public", "listening", "wait_for"]
