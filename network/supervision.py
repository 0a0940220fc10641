"""Node supervision of the one-machine network: start the orderer, the peers and the chaincode
services as detached processes (:class:`~network.processes.ProcessSupervisor`: pids in
``state.json``, waiting until they serve, stopping them) and run the Fabric command-line tools
(``peer``, ``osnadmin``, ``configtxgen``) against them."""

from __future__ import annotations

import socket
import sys
import time

from network.config import REPO_ROOT, NetworkError, NetworkLayout
from network.host_view import view_command
from network.processes import ProcessSupervisor, ensure_fabric


class NodeSupervisor(NetworkLayout, ProcessSupervisor):
    def running(self) -> dict[str, bool]:
        pids = self._state()["pids"]
        n = range(len(self.cfg.organisations))
        names = ["orderer", *(self.peer_name(i) for i in n), *(self.chaincode_name(i) for i in n)]
        return {n: bool(pids.get(n)) and self._alive(pids[n], n) for n in names}

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
        ro.append(self.cfg.fabric_home)  # its binaries and their default configuration
        return view_command(argv, own, read_only=ro, hide=[self.net], cwd=REPO_ROOT)

    # ------------------------------------------------------------------ binaries
    def ensure_binaries(self) -> None:
        ensure_fabric(self.cfg.fabric_home, ("core",))

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
            "--msp-id",
            f"{self.cfg.organisations[i]}MSP",
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
