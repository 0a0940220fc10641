"""The numeric profile: which floating-point kernels every task and the simulator compute with
(docs/reproducibility.md).

The numeric libraries pick their kernels for the CPU they find -- OpenBLAS by core type, numpy's
ufuncs by the SIMD extensions present (AVX2, AVX-512), glibc's libm by FMA, torch's ATen by its CPU
capability and MKL by its instruction set -- and kernels round differently: the same task gives other
bytes on another CPU, so a digest recorded on one machine cannot be re-computed on another. The
profile pins every such choice to what every x86-64-v2 CPU has:

* OpenBLAS (numpy's and scipy's copies): core type Nehalem (SSE4.2 kernels, fixed GEMM blocking), one
  thread;
* numpy: runtime dispatch limited to its baseline (``NPY_ENABLE_CPU_FEATURES=X86_V2``: no AVX2 or
  AVX-512 loops);
* glibc's libm: its FMA and FMA4 variants masked (``GLIBC_TUNABLES=glibc.cpu.hwcaps=-FMA,-FMA4``), so
  ``exp``, ``log``, ``pow``, ``sin`` ... run their SSE2 code on every CPU;
* torch: ATen's CPU capability ``default``, oneDNN at most SSE4.1, MKL in conditional numerical
  reproducibility mode ``COMPATIBLE``, deterministic algorithms on, one thread;
* OpenMP (scikit-learn, torch) and MKL: one thread.

Most of it is environment: the libraries read it when they are loaded (glibc when the process starts),
so it must be in place before Python starts -- the image's environment (container), the sandbox's
(:mod:`executor.runtimes.sandbox`), ``scripts/test``/``scripts/demo`` (``eval "$(python -m
algorithms.numeric_profile env)"``), or a re-exec (:meth:`NumericProfile.reexec`). What can be set in a
running process (threads, torch's determinism) :meth:`NumericProfile.apply` sets; :meth:`problems`
checks the rest by what the libraries report (threadpoolctl's OpenBLAS core type, numpy's enabled CPU
features, glibc's active FMA, torch's capability), and :meth:`require` refuses with
:class:`NumericProfileError` when anything differs.

Every algorithm image declares its profile in ``image.json`` (``"numeric_profile": "x86-64-v2/1"``), the
task runtime requires it and records :meth:`NumericProfile.record` in the signed result, and
:func:`algorithms.simulator.simulate` requires the selected profile (``$CONSORTIA_NUMERIC_PROFILE``:
this one by default, ``host`` for this machine's own kernels, whose digests match this machine only).

This module imports only the standard library and :mod:`wire` at import time (it runs inside images,
and must run before numpy is imported).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from wire.canonical import canonical_json
from wire.env import environment, values

GLIBC_TUNABLES = "GLIBC_TUNABLES"
HWCAPS = "glibc.cpu.hwcaps"
HOST = "host"  #: ``$CONSORTIA_NUMERIC_PROFILE=host``: no profile, this machine's own kernels


class NumericProfileError(RuntimeError):
    """The numeric profile is not in effect in this process and cannot be made so from inside it;
    ``problems`` lists what differs."""

    def __init__(self, profile: str, problems: Iterable[str]):
        self.profile = profile
        self.problems = list(problems)
        super().__init__(
            f"numeric profile {profile} is not in effect: " + "; ".join(self.problems) + " (start the "
            'process under it: eval "$(python -m algorithms.numeric_profile env)", docs/reproducibility.md)'
        )


def _hwcaps(tunables: str) -> list[str]:
    """The masks of ``glibc.cpu.hwcaps`` in a ``GLIBC_TUNABLES`` value (``a=b:c=d``)."""
    for item in tunables.split(":"):
        name, _, value = item.partition("=")
        if name == HWCAPS:
            return [m for m in value.split(",") if m]
    return []


def _with_hwcaps(tunables: str, masks: Iterable[str]) -> str:
    """``tunables`` with ``masks`` added to its ``glibc.cpu.hwcaps`` (other tunables kept)."""
    merged = list(dict.fromkeys([*_hwcaps(tunables), *masks]))
    items = [i for i in tunables.split(":") if i and i.partition("=")[0] != HWCAPS]
    return ":".join([*items, f"{HWCAPS}={','.join(merged)}"])


@dataclass(frozen=True)
class NumericProfile:
    """One declared numeric profile (see the module doc).

    ``environment``: variables set exactly; ``unset``: variables that must be absent (they would
    contradict it); ``glibc_masked``: glibc CPU features masked for its ifuncs (``GLIBC_TUNABLES``,
    merged with any other tunable); ``openblas_core``: the core type every loaded OpenBLAS must report;
    ``torch_capability``: what ``torch.backends.cpu.get_cpu_capability()`` must report when torch is
    loaded."""

    name: str
    version: int
    description: str
    environment: Mapping[str, str]
    unset: tuple[str, ...] = ()
    glibc_masked: tuple[str, ...] = ()
    openblas_core: str = ""
    torch_capability: str = ""
    threads: int = 1

    @property
    def id(self) -> str:
        """``name/version``, as ``image.json`` declares it."""
        return f"{self.name}/{self.version}"

    def declaration(self) -> dict[str, Any]:
        """Everything the profile pins (canonical JSON of it is what :attr:`digest` hashes)."""
        return {
            "name": self.name,
            "version": self.version,
            "environment": dict(sorted(self.environment.items())),
            "unset": sorted(self.unset),
            "glibc_masked": list(self.glibc_masked),
            "openblas_core": self.openblas_core,
            "torch_capability": self.torch_capability,
            "threads": self.threads,
        }

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(canonical_json(self.declaration())).hexdigest()

    def record(self) -> dict[str, Any]:
        """What a task's signed result records: ``{name, version, digest}``."""
        return {"name": self.name, "version": self.version, "digest": self.digest}

    # ------------------------------------------------------------------ the environment

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: empty) with the profile applied: its variables set, the conflicting
        ones removed, its glibc masks added to any ``GLIBC_TUNABLES`` already there."""
        env = {k: v for k, v in (base or {}).items() if k not in self.unset}
        env.update(self.environment)
        if self.glibc_masked:
            masks = [f"-{feature}" for feature in self.glibc_masked]
            env[GLIBC_TUNABLES] = _with_hwcaps((base or {}).get(GLIBC_TUNABLES, ""), masks)
        return env

    def variables(self) -> tuple[str, ...]:
        """Every variable the profile sets or removes."""
        names = [*self.environment, *self.unset]
        if self.glibc_masked:
            names.append(GLIBC_TUNABLES)
        return tuple(dict.fromkeys(names))

    def environment_problems(self, current: Mapping[str, str] | None = None) -> list[str]:
        """How the process environment (or ``current``) differs from the profile's."""
        env = values(self.variables()) if current is None else dict(current)
        out = [
            f"${k}={env.get(k)!r}, the profile needs {v!r}"
            for k, v in sorted(self.environment.items())
            if env.get(k) != v
        ]
        out += [f"${k} is set ({env[k]!r}); the profile needs it unset" for k in self.unset if env.get(k)]
        masked = _hwcaps(env.get(GLIBC_TUNABLES, ""))
        missing = [f for f in self.glibc_masked if f"-{f}" not in masked]
        if missing:
            out.append(f"${GLIBC_TUNABLES} does not mask {', '.join(missing)} ({HWCAPS})")
        return out

    # ------------------------------------------------------------------ this process

    def problems(self) -> list[str]:
        """Everything in this process that differs from the profile: its environment, glibc's active
        CPU features, numpy's enabled dispatch targets, every loaded OpenBLAS (core type, threads) and
        OpenMP runtime (threads), torch if loaded (capability, threads, determinism). Empty: in effect."""
        out = self.environment_problems()
        if platform.machine().lower() not in ("x86_64", "amd64"):
            return out + [f"this machine is {platform.machine()}, the profile is for x86-64"]
        out += self._glibc_problems()
        if "numpy" in sys.modules:
            out += self._numpy_problems()
        out += self._pool_problems()
        if "torch" in sys.modules:
            out += self._torch_problems()
        return out

    def apply(self) -> None:
        """Set what can be set in a running process: one thread in every loaded BLAS/OpenMP pool
        (threadpoolctl) and in torch, torch's deterministic algorithms. The environment cannot be
        changed from inside (the libraries have read it): see :meth:`reexec`."""
        if any(p["num_threads"] != self.threads for p in _pools()):
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=self.threads)  # not a context: the limit stays
            _POOLS.clear()
        if "torch" in sys.modules:
            import torch

            if torch.get_num_threads() != self.threads:
                torch.set_num_threads(self.threads)
            if not torch.are_deterministic_algorithms_enabled():
                torch.use_deterministic_algorithms(True)

    def require(self) -> None:
        """:meth:`apply`, then raise :class:`NumericProfileError` if anything still differs."""
        self.apply()
        found = self.problems()
        if found:
            raise NumericProfileError(self.id, found)

    def reexec(self, argv: list[str] | None = None) -> None:
        """If this process's environment is not the profile's, replace the process by the same
        command (``sys.orig_argv``) under the profile's environment; otherwise :meth:`require`. Only
        for programs' entry points (the test session, benchmarks): nothing after it runs twice."""
        if not self.environment_problems():
            self.require()
            return
        args = [sys.executable, *(sys.orig_argv[1:] if argv is None else argv)]
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, args, self.environ(dict(os.environ)))

    # ------------------------------------------------------------------ checks

    def _glibc_problems(self) -> list[str]:
        if not self.glibc_masked:
            return []
        active = glibc_active_features()
        if active is None:
            libc = " ".join(platform.libc_ver()) or "an unknown C library"
            return [
                f"cannot verify libm's kernels: {libc} does not report its active CPU features "
                "(glibc >= 2.33 does)"
            ]
        on = [f for f in self.glibc_masked if active.get(f)]
        return [f"glibc still uses {', '.join(on)} for libm (GLIBC_TUNABLES not in effect)"] if on else []

    def _numpy_problems(self) -> list[str]:
        enabled = numpy_dispatch()["enabled"]
        return [f"numpy dispatches to {', '.join(enabled)} beyond its baseline"] if enabled else []

    def _pool_problems(self) -> list[str]:
        try:
            pools = _pools()
        except ImportError:
            return ["threadpoolctl is not installed: the BLAS kernels cannot be verified"]
        out = []
        for p in pools:
            where = f"{p['internal_api']} {p.get('version') or ''} ({os.path.basename(p['filepath'])})"
            if p["internal_api"] == "openblas" and self.openblas_core:
                if p.get("architecture") != self.openblas_core:
                    out.append(f"{where} runs {p.get('architecture')} kernels, not {self.openblas_core}")
            elif p["user_api"] == "blas":
                out.append(f"{where} is a BLAS whose kernel choice the profile cannot pin")
            if p["num_threads"] != self.threads:
                out.append(f"{where} runs {p['num_threads']} threads, not {self.threads}")
        return out

    def _torch_problems(self) -> list[str]:
        import torch

        out = []
        capability = torch.backends.cpu.get_cpu_capability()
        if self.torch_capability and capability != self.torch_capability:
            out.append(f"torch runs its {capability} kernels, not {self.torch_capability}")
        if torch.get_num_threads() != self.threads:
            out.append(f"torch runs {torch.get_num_threads()} threads, not {self.threads}")
        if not torch.are_deterministic_algorithms_enabled():
            out.append("torch's deterministic algorithms are off")
        return out


# --------------------------------------------------------------------------- what the libraries report

#: glibc's ``__x86_get_cpuid_feature_leaf`` index and (register, bit) of each CPU feature it can mask
_GLIBC_FEATURES = {"FMA": (0, 2, 12), "AVX2": (1, 1, 5), "FMA4": (2, 2, 16), "AVX512F": (1, 1, 16)}


def glibc_active_features() -> dict[str, bool] | None:
    """The CPU features glibc uses for its own ifuncs (libm's kernels among them), as
    ``<sys/platform/x86.h>``'s ``CPU_FEATURE_ACTIVE`` reports them (after ``GLIBC_TUNABLES``); None
    where glibc does not report them (before 2.33, or another C library)."""
    import ctypes

    try:
        leaf_of = ctypes.CDLL(None).__x86_get_cpuid_feature_leaf
    except (AttributeError, OSError):
        return None

    class Leaf(ctypes.Structure):
        _fields_ = [("cpuid", ctypes.c_uint * 4), ("active", ctypes.c_uint * 4)]

    leaf_of.restype = ctypes.POINTER(Leaf)
    leaf_of.argtypes = [ctypes.c_uint]
    return {
        name: bool(leaf_of(index).contents.active[register] >> bit & 1)
        for name, (index, register, bit) in _GLIBC_FEATURES.items()
    }


def numpy_dispatch() -> dict[str, list[str]]:
    """numpy's SIMD baseline (compiled in) and the dispatch targets enabled in this process."""
    import importlib

    umath = importlib.import_module("numpy._core._multiarray_umath")
    features = umath.__cpu_features__
    return {
        "baseline": list(umath.__cpu_baseline__),
        "enabled": [t for t in umath.__cpu_dispatch__ if features.get(t)],
    }


_POOLS: dict[frozenset[str], list[dict[str, Any]]] = {}


def _pools() -> list[dict[str, Any]]:
    """threadpoolctl's report of the loaded BLAS and OpenMP runtimes, remembered while the set of
    loaded runtimes is the same (a report takes tens of milliseconds; a task checks twice)."""
    key = _loaded_runtimes()
    if key not in _POOLS:
        from threadpoolctl import threadpool_info

        _POOLS.clear()
        _POOLS[key] = threadpool_info()
    return _POOLS[key]


_RUNTIME_NAMES = ("openblas", "libgomp", "libomp", "libiomp", "mkl_rt", "libblis", "flexiblas")


def _loaded_runtimes() -> frozenset[str]:
    try:
        with open("/proc/self/maps") as f:
            text = f.read()
    except OSError:
        return frozenset({str(len(sys.modules))})
    return frozenset(
        line.rsplit(" ", 1)[-1] for line in text.splitlines() if any(n in line for n in _RUNTIME_NAMES)
    )


def facts() -> dict[str, Any]:
    """What this process computes with (for reports and refusals): C library, glibc's active
    features, numpy's dispatch, every BLAS/OpenMP runtime, torch's capability if loaded."""
    out: dict[str, Any] = {"machine": platform.machine(), "libc": " ".join(platform.libc_ver())}
    out["glibc_active"] = glibc_active_features()
    if "numpy" in sys.modules:
        out["numpy"] = numpy_dispatch()
    try:
        out["runtimes"] = [
            {k: p.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
            | {"library": os.path.basename(p["filepath"])}
            for p in _pools()
        ]
    except ImportError:
        out["runtimes"] = None
    if "torch" in sys.modules:
        import torch

        out["torch"] = {
            "capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
        }
    return out


# --------------------------------------------------------------------------- the profiles

X86_64_V2 = NumericProfile(
    name="x86-64-v2",
    version=1,
    description="Kernels every x86-64-v2 CPU runs: OpenBLAS Nehalem, numpy baseline, libm without FMA, "
    "torch default capability with MKL COMPATIBLE, one thread.",
    environment={
        "OPENBLAS_CORETYPE": "Nehalem",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NPY_ENABLE_CPU_FEATURES": "X86_V2",
        "ATEN_CPU_CAPABILITY": "default",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "MKL_CBWR": "COMPATIBLE",
    },
    unset=("NPY_DISABLE_CPU_FEATURES", "MKL_ENABLE_INSTRUCTIONS"),
    glibc_masked=("FMA", "FMA4"),
    openblas_core="Nehalem",
    torch_capability="DEFAULT",
)

#: every profile an image may declare, by ``name/version``
PROFILES: dict[str, NumericProfile] = {p.id: p for p in (X86_64_V2,)}
PROFILE = X86_64_V2  #: the profile of the project's images and of the simulator by default


def named(profile_id: str) -> NumericProfile:
    """The profile ``name/version`` (``ValueError`` naming the known ones if there is none)."""
    try:
        return PROFILES[profile_id]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown numeric profile {profile_id!r} (known: {', '.join(sorted(PROFILES))})"
        ) from None


def of_record(record: Any) -> NumericProfile:
    """The profile a task's result names (``{name, version, digest}``); ``ValueError`` if none of
    the known profiles has that digest."""
    if not isinstance(record, Mapping):
        raise ValueError(f"the numeric profile record must be an object, got {record!r}")
    profile = named(f"{record.get('name')}/{record.get('version')}")
    if record != profile.record():
        raise ValueError(f"numeric profile record {dict(record)} is not {profile.id}'s ({profile.digest})")
    return profile


def selected() -> NumericProfile | None:
    """The profile this process is to compute under: ``$CONSORTIA_NUMERIC_PROFILE`` (default
    :data:`PROFILE`; ``host``: none, this machine's own kernels)."""
    choice = environment().numeric_profile
    if choice is None:
        return PROFILE
    if choice == HOST:
        return None
    return named(choice)


def reexec_selected() -> None:
    """For a program's entry point: re-execute it under the selected profile unless it already runs
    under it (:meth:`NumericProfile.reexec`); nothing with ``host``."""
    profile = selected()
    if profile is not None:
        profile.reexec()


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """``python -m algorithms.numeric_profile env|check|run CMD...``:

    * ``env``: the selected profile's environment as ``export`` lines (``eval`` them in a shell before
      starting Python; ``host`` prints nothing);
    * ``check``: this interpreter's problems and facts as JSON, exit 1 if the profile is not in effect;
    * ``run [--] CMD...``: run ``CMD`` under the profile's environment."""
    import json

    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else "env"
    profile = selected()
    if command == "env":
        if profile is not None:
            env = profile.environ(values(profile.variables()))
            for name in profile.variables():
                print(f"export {name}={shlex.quote(env[name])}" if name in env else f"unset {name}")
        return 0
    if command == "check":
        import numpy  # noqa: F401  (what a task imports before it checks)

        found: list[str] = []
        if profile is not None:
            profile.apply()
            found = profile.problems()
        report = {
            "profile": None if profile is None else profile.record(),
            "problems": found,
            "facts": facts(),
        }
        print(json.dumps(report, indent=1, sort_keys=True))
        return 1 if found else 0
    cmd = args[2:] if args[1:2] == ["--"] else args[1:]
    if command == "run" and cmd:
        env = dict(os.environ) if profile is None else profile.environ(dict(os.environ))
        os.execvpe(cmd[0], cmd, env)
    print(main.__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
