"""Layer crossings of Python calls, traced: which top-level project package each function belongs to, and
which calls cross from one package into another while a chosen method runs (the method of
:mod:`benchmarks.layer_crossings`, where the rules are stated).

A :class:`CrossingTracer` profiles the threads (``sys.setprofile`` + ``threading.setprofile``); a window is
one call of ``method`` on an object whose ``org`` is wanted, kept if it returns an outcome of the wanted
``round`` with status ``completed``. On the window's thread it keeps a shadow stack of the live frames,
each with its own function or, for external code, its nearest project caller's; an entry into a project
function whose package differs from that caller's is one crossing. :func:`self_check` checks the counting on
a synthetic example counted by hand.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

FIGURES = ("distinct_edges", "module_edges", "dynamic_crossings")


class Func(NamedTuple):
    package: str
    module: str  # file relative to the root, e.g. ledger/envelope.py
    name: str  # qualified name

    def __str__(self) -> str:
        return f"{self.module}:{self.name}"


class Classifier:
    """Which project package (and function) a frame's code belongs to, or None (external)."""

    def __init__(self, root: Path, layers: tuple[str, ...]):
        self.root, self.layers = os.path.realpath(root), layers
        self._files: dict[str, tuple[str, str] | None] = {}
        self._codes: dict[int, tuple[Any, Func | None]] = {}  # id(code) -> (code, kept alive; its function)

    def file(self, filename: str) -> tuple[str, str] | None:
        if filename not in self._files:
            rel = os.path.relpath(os.path.realpath(filename), self.root) if filename.endswith(".py") else ""
            parts = Path(rel).parts
            ok = len(parts) > 1 and parts[0] in self.layers
            self._files[filename] = (parts[0], Path(rel).as_posix()) if ok else None
        return self._files[filename]

    def func(self, frame: FrameType) -> Func | None:
        code = frame.f_code
        if (hit := self._codes.get(id(code))) is not None:
            return hit[1]
        where = self.file(code.co_filename)
        key = Func(where[0], where[1], code.co_qualname) if where else None
        # a method generated at run time (dataclass, named tuple): its class's package
        if (
            code.co_filename == "<string>"
            and code.co_argcount
            and code.co_varnames[0] in ("self", "cls", "_cls")
        ):
            first = frame.f_locals.get(code.co_varnames[0])
            cls = first if isinstance(first, type) else type(first)
            mod = sys.modules.get(cls.__module__)
            where = self.file(getattr(mod, "__file__", None) or "")
            key = Func(where[0], where[1], f"{cls.__qualname__}.{code.co_name}") if where else None
        self._codes[id(code)] = (code, key)  # (equal code objects of two files compare equal: keyed by id)
        return key


class Window:
    """The entries recorded on one agent's thread during one round."""

    def __init__(self, org: str):
        self.org = org
        self.crossings: Counter[tuple[Func, Func, bool]] = Counter()  # (caller, callee, in the ledger host)
        self.project_calls = 0
        self.external_calls = 0
        self.resyncs = 0  # shadow stack repaired from the frames (should stay 0)


class CrossingTracer:
    """Profiles this thread and every thread started while active; records the windows of ``orgs``
    (module doc). ``host``: module path prefixes beneath which crossings are marked "in the host"."""

    def __init__(
        self,
        classifier: Classifier,
        orgs: set[str],
        rnd: int,
        method: str,
        host: tuple[str, ...],
    ):
        self.classifier, self.wanted, self.round, self.method = classifier, set(orgs), rnd, method
        self.host = host
        self.windows: dict[str, Window] = {}
        self.closed = False

    def _bootstrap(self, frame: FrameType, event: str, arg: Any) -> None:
        trace = _ThreadTrace(self)
        sys.setprofile(trace.profile)
        trace.profile(frame, event, arg)

    def __enter__(self) -> CrossingTracer:
        threading.setprofile(self._bootstrap)
        sys.setprofile(_ThreadTrace(self).profile)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.closed = True  # threads still alive drop their profile at their next event
        sys.setprofile(None)
        threading.setprofile(None)


class _ThreadTrace:
    def __init__(self, tracer: CrossingTracer):
        self.t, self.cls = tracer, tracer.classifier
        # per live frame: its function, or its nearest project caller's (external code); in the ledger host
        self.stack: list[tuple[FrameType, Func | None, bool]] | None = None  # None: outside a window
        self.root: FrameType | None = None
        self.window: Window | None = None

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.stack is None:
            if self.t.closed:
                sys.setprofile(None)
            elif event == "call" and frame.f_code.co_name == self.t.method:
                org = getattr(frame.f_locals.get("self"), "org", None)
                if org in self.t.wanted:
                    self.root, self.window = frame, Window(org)
                    self.stack = [(frame, self.cls.func(frame), False)]
            return
        if event == "call":
            stack, w = self.stack, self.window
            assert w is not None
            if stack and stack[-1][0] is not frame.f_back:
                w.resyncs += 1
                self._resync(frame.f_back)
            _, caller, host = stack[-1] if stack else (None, None, False)
            callee = self.cls.func(frame)
            if callee is None:
                w.external_calls += 1
                stack.append((frame, caller, host))
                return
            w.project_calls += 1
            if caller is not None and caller.package != callee.package:
                w.crossings[(caller, callee, host)] += 1
            stack.append((frame, callee, host or callee.module.startswith(self.t.host)))
        elif event == "return":
            stack = self.stack
            if stack and stack[-1][0] is frame:
                stack.pop()
            if frame is self.root:
                self._close(arg)

    def _resync(self, parent: FrameType | None) -> None:
        """Pop to ``parent``'s entry (a missed return); rebuild from the frames if it is not there."""
        assert self.stack is not None
        frames = [f for f, _, _ in self.stack]
        if parent is not None and any(f is parent for f in frames):
            while self.stack[-1][0] is not parent:
                self.stack.pop()
            return
        chain, f = [], parent
        while f is not None and f is not self.root:
            chain.append(f)
            f = f.f_back
        self.stack[1:] = []
        for f in reversed(chain):
            _, caller, host = self.stack[-1]
            func = self.cls.func(f)
            self.stack.append((f, func or caller, host or bool(func and func.module.startswith(self.t.host))))

    def _close(self, outcome: Any) -> None:
        w = self.window
        if (
            w is not None
            and getattr(outcome, "round", None) == self.t.round
            and getattr(outcome, "status", None) == "completed"
            and w.org in self.t.wanted
        ):
            self.t.windows[w.org] = w
            self.t.wanted.discard(w.org)
        self.stack = self.root = self.window = None


# --------------------------------------------------------------------------- figures


def figures(crossings: Counter[tuple[Func, Func]], rank: dict[str, int]) -> dict[str, Any]:
    """Distinct function edges, distinct module edges and dynamic crossings, each total/down/up; and per
    target package the distinct callee functions, by module."""
    out: dict[str, Any] = {k: {"total": 0, "down": 0, "up": 0} for k in FIGURES}
    modules: set[tuple[str, str, str]] = set()
    targets: dict[str, dict[str, set[Func]]] = {}
    for (caller, callee), n in crossings.items():
        way = "down" if rank[callee.package] < rank[caller.package] else "up"
        out["distinct_edges"][way] += 1
        out["dynamic_crossings"][way] += n
        modules.add((caller.module, callee.module, way))
        targets.setdefault(callee.package, {}).setdefault(callee.module, set()).add(callee)
    for *_, way in modules:
        out["module_edges"][way] += 1
    for k in FIGURES:
        out[k]["total"] = out[k]["down"] + out[k]["up"]
    out["targets"] = {
        pkg: {
            "functions": sum(len(s) for s in mods.values()),
            "by_module": dict(sorted(((m, len(s)) for m, s in mods.items()), key=lambda kv: (-kv[1], kv[0]))),
        }
        for pkg, mods in sorted(targets.items(), key=lambda kv: rank[kv[0]])
    }
    return out


def summarise(w: Window, layers: tuple[str, ...]) -> dict[str, Any]:
    """The figures of one window (``layers`` bottom-up): over every crossing, and over those outside the host."""
    rank = {p: i for i, p in enumerate(layers)}
    every: Counter[tuple[Func, Func]] = Counter()
    agent: Counter[tuple[Func, Func]] = Counter()
    for (caller, callee, host), n in w.crossings.items():
        every[(caller, callee)] += n
        if not host:
            agent[(caller, callee)] += n
    pairs: dict[str, dict[str, Any]] = {}
    for (caller, callee), n in every.items():
        way = "down" if rank[callee.package] < rank[caller.package] else "up"
        p = pairs.setdefault(
            f"{caller.package}->{callee.package}", {"direction": way, "edges": 0, "events": 0, "in_host": 0}
        )
        p["edges"] += 1
        p["events"] += n
        p["in_host"] += n - agent[(caller, callee)]
    return {
        "organisation": w.org,
        **figures(every, rank),
        "outside_ledger_host": figures(+agent, rank),
        "project_calls": w.project_calls,
        "external_calls": w.external_calls,
        "stack_resyncs": w.resyncs,
        "by_pair": dict(sorted(pairs.items(), key=lambda kv: (rank[kv[0].split("->")[0]], kv[0]))),
        # every distinct edge: caller, callee, dynamic crossings, of which in the ledger host
        "edges": sorted([str(a), str(b), n, n - agent[(a, b)]] for (a, b), n in every.items()),
    }


# --------------------------------------------------------------------------- self-check

_SYNTHETIC = {
    "lo/__init__.py": "",
    "lo/codec.py": "def dump(x, cb=None):\n    return cb(x) if cb else x\n",
    "mid/__init__.py": "",
    "mid/client.py": (
        "from dataclasses import dataclass\nfrom lo.codec import dump\n\n"
        "@dataclass\nclass Rec:\n    v: int\n\n"
        "def get(x):\n    return dump(x)\n\n"
        "def with_cb(f):\n    return dump(1, cb=f)\n\n"
        "def items():\n    yield 1\n    yield 2\n"
    ),
    "top/__init__.py": "",
    "top/agent.py": (
        "import extmod\nfrom mid import client\n\n"
        "class Out:\n    def __init__(self, r):\n        self.round, self.status = r, 'completed'\n\n"
        "class Agent:\n    org = 'OrgX'\n    def __init__(self):\n        self.r = 0\n"
        "    def run_process_round(self):\n        self.r += 1\n"
        "        client.get(1); client.get(2)\n"  # 2 entries top->mid (one edge), 2 mid->lo (one edge)
        "        client.with_cb(self._cb)\n"  # top->mid, mid->lo, lo->top (UP)
        "        extmod.apply(client.get)\n"  # through external code: top->mid, then mid->lo
        "        client.Rec(3)\n"  # generated __init__: top->mid
        "        list(client.items())\n"  # generator entered 3 times: 3 dynamic top->mid, one edge
        "        return Out(self.r)\n"
        "    def _cb(self, x):\n        return x\n"
    ),
}
_EXTERNAL = "def apply(f):\n    return f(0)\n"


def self_check() -> dict[str, Any]:
    """The classification on a synthetic example whose figures were counted by hand (``_SYNTHETIC``):
    round 1 is discarded, round 2 recorded on a thread started while tracing."""
    layers = ("lo", "mid", "top")
    with tempfile.TemporaryDirectory() as tmp:
        root, ext = Path(tmp) / "proj", Path(tmp) / "ext"
        for rel, text in _SYNTHETIC.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        ext.mkdir()
        (ext / "extmod.py").write_text(_EXTERNAL)
        sys.path[:0] = [str(root), str(ext)]
        try:
            from top.agent import Agent  # type: ignore[import-not-found]

            agent = Agent()
            # mid/ plays the ledger host: what runs beneath it (lo, and lo's callback into top) is "in host"
            tracer = CrossingTracer(Classifier(root, layers), {"OrgX"}, 2, "run_process_round", ("mid/",))
            with tracer:
                t = threading.Thread(target=lambda: [agent.run_process_round() for _ in range(3)])
                t.start()
                t.join()
        finally:
            del sys.path[:2]
            for m in [m for m in sys.modules if m.split(".")[0] in (*layers, "extmod")]:
                del sys.modules[m]
    if "OrgX" not in tracer.windows:
        raise SystemExit("self-check failed: the window of round 2 was not recorded")
    s = summarise(tracer.windows["OrgX"], layers)
    expected = {
        # top->mid edges: get, with_cb, Rec.__init__, items; mid->lo: get->dump, with_cb->dump; lo->top: dump->_cb
        "distinct_edges": {"total": 7, "down": 6, "up": 1},
        # top/agent.py->mid/client.py, mid/client.py->lo/codec.py, lo/codec.py->top/agent.py (up)
        "module_edges": {"total": 3, "down": 2, "up": 1},
        # top->mid: get x3 (2 direct + via extmod), with_cb, Rec.__init__, items x3 = 8; mid->lo: 4; lo->top: 1
        "dynamic_crossings": {"total": 13, "down": 12, "up": 1},
        # outside the host: the top->mid crossings only (target functions: mid's 4)
        "outside_ledger_host": {
            "distinct_edges": {"total": 4, "down": 4, "up": 0},
            "module_edges": {"total": 1, "down": 1, "up": 0},
            "dynamic_crossings": {"total": 8, "down": 8, "up": 0},
            "targets": {"mid": 4},
        },
        "targets": {"lo": 1, "mid": 4, "top": 1},
    }

    def counts(f: dict[str, Any]) -> dict[str, Any]:
        return {**{k: f[k] for k in FIGURES}, "targets": {p: t["functions"] for p, t in f["targets"].items()}}

    got = {**counts(s), "outside_ledger_host": counts(s["outside_ledger_host"])}
    if got != expected or s["stack_resyncs"]:
        raise SystemExit(f"self-check failed: expected {expected}, got {got} ({s['edges']})")
    print("self-check passed:", json.dumps(got, sort_keys=True))
    return got
