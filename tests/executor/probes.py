"""A hostile task: tries to escape its isolation and reports what it managed (JSON on stdout)."""

PROBE = r"""
import json, os, socket, sys
other = sys.argv[1]
r = {}
try:
    s = socket.create_connection(("1.1.1.1", 53), timeout=2)
    r["connect"] = "connected"
except OSError as e:
    r["connect"] = type(e).__name__
try:
    socket.getaddrinfo("deb.debian.org", 80)
    r["dns"] = "resolved"
except OSError as e:
    r["dns"] = type(e).__name__
r["interfaces"] = sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []
for p in ("/etc/probe", "/usr/probe", "/probe", "/data/probe", "/task/in/probe", "/run/task-key/probe",
          "/task/out/probe"):
    try:
        with open(p, "w") as f:
            f.write("x")
        r[p] = "written"
    except OSError as e:
        r[p] = type(e).__name__
try:
    with open(other, "rb") as f:
        f.read()
    r["other_data"] = "read"
except OSError as e:
    r["other_data"] = type(e).__name__
r["own_data"] = os.path.getsize("/data/dataset.npz")
r["key_readable"] = open("/run/task-key/task_key.pem").read().startswith("-----BEGIN PRIVATE KEY")
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
r["uid"] = os.getuid()
r["cap_eff"] = status["CapEff"].strip()
r["no_new_privs"] = status.get("NoNewPrivs", "").strip()
r["pids_visible"] = len([p for p in os.listdir("/proc") if p.isdigit()])
print("PROBE" + json.dumps(r))
"""


def parse(logs: str) -> dict:
    import json

    line = next(l for l in logs.splitlines() if l.startswith("PROBE"))
    return json.loads(line[len("PROBE") :])


def assert_isolated(r: dict) -> None:
    assert r["connect"] != "connected", r
    assert r["dns"] != "resolved", r
    assert set(r["interfaces"]) <= {"lo"}, r
    for p in ("/etc/probe", "/usr/probe", "/probe", "/data/probe", "/task/in/probe", "/run/task-key/probe"):
        assert r[p] != "written", (p, r)
    assert r["/task/out/probe"] == "written", r
    assert r["other_data"] in ("FileNotFoundError", "PermissionError"), r
    assert r["own_data"] > 0 and r["key_readable"] is True
    assert r["uid"] == 10001
    assert int(r["cap_eff"], 16) == 0, r
    assert r["no_new_privs"] == "1", r
    assert r["pids_visible"] <= 3, r  # a fresh PID namespace: the task and its children only
