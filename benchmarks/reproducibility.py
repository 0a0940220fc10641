"""The same digests on every CPU kind under the numeric profile (issue 28; docs/reproducibility.md).

    python -m benchmarks.reproducibility [--quick]

1. **Digests across emulated CPU kinds.** Each algorithm (CollabDict GGM with consensus aggregation and
   with the exact sum, the CollabDict VAE, DPSDA-C, DPSDA-PS, collaborative RF with the paper's ranking
   and with the authors' code's) is simulated from the same datasets in a fresh interpreter per CPU
   kind. A kind is what a machine of that CPU computes with by itself: OpenBLAS core type Prescott,
   Sandybridge, Haswell or SkylakeX (``OPENBLAS_CORETYPE``), with torch's ATen capability, MKL's
   instruction set and glibc's libm variants of that generation (``ATEN_CPU_CAPABILITY``,
   ``MKL_ENABLE_INSTRUCTIONS``, ``GLIBC_TUNABLES`` masks), each with numpy dispatching up to this
   host's best SIMD target (AVX-512 here) and without (``NPY_ENABLE_CPU_FEATURES=X86_V2``). A kind this
   host's CPU cannot run is skipped and named. Every kind runs twice: *unpinned* (the kind's own kernels,
   ``CONSORTIA_NUMERIC_PROFILE=host``) and *pinned* (the profile applied over the kind's environment, as
   an image does). Each run reports what its libraries chose (OpenBLAS core, numpy targets, glibc FMA,
   torch capability), so the report shows the kinds took effect. Every state digest of every
   (organisation, round), every message digest and every model digest is compared.
2. **What the pin costs.** Per algorithm, ``simulate`` wall time under the profile and under this
   machine's own kernels (one thread in both, as tasks ran before the profile), the two alternating in
   fresh interpreters (3 pairs, 5 in the full run; who goes first alternates too), each case timed
   after an untimed run of itself, ratio of the medians of wall time (``pin_cost_ratio``) and of CPU time
   (``pin_cost_ratio_cpu``, steadier on a shared machine); and per kernel (matrix products, LAPACK, numpy's and torch's elementwise functions),
   the same ratio, so the docs can name which operations lose their vector kernels.
3. **An auditor's replay** (:mod:`benchmarks.audit_replay`): a small collaborative-RF process run with
   sandboxed tasks, disclosed by its members to an organisation outside it and replayed there;
   ``replayed_tasks`` and ``replay_matched`` count the tasks re-run and those whose every digest matched.
4. (full run) **Which part of the profile each algorithm needs**: the profile minus one part at a time
   (OpenBLAS core, numpy dispatch, glibc's FMA mask, torch's capability, MKL's CNR mode, oneDNN's ISA)
   on four kinds between which every part takes two or more values (:data:`ABLATION_KINDS`); a part
   whose removal leaves one digest set per algorithm is not needed by it.

Reports go to ``benchmarks/results/reproducibility[-quick].{json,md}``; the last printed line is JSON
with ``cpu_kinds``, ``algorithms``, ``digest_sets_equal``, ``pin_cost_ratio``, ``replayed_tasks``,
``replay_matched`` and the digest-set counts
before and after the pin. :func:`run_child` is also what the tests use (``tests/algorithms/
test_numeric_profile.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from algorithms.numeric_profile import HOST, PROFILE, facts

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]
ORGS3 = ("Org1MSP", "Org2MSP", "Org3MSP")
ORGS5 = (*ORGS3, "Org4MSP", "Org5MSP")

# ----------------------------------------------------------------------------- CPU kinds


@dataclass(frozen=True)
class CpuKind:
    """An emulated CPU kind: the environment under which this host's libraries choose the kernels a
    machine of that kind would, and the CPU flags the host needs to run them."""

    name: str
    environment: Mapping[str, str]
    needs: tuple[str, ...]


#: per OpenBLAS core type: (CPU flags it needs, torch's capability, MKL's instructions, glibc masks)
GENERATIONS: dict[str, tuple[tuple[str, ...], str, str, str]] = {
    "Prescott": (("pni",), "default", "SSE4_2", "-AVX,-AVX2,-FMA,-AVX512F"),  # pni: SSE3
    "Sandybridge": (("avx",), "default", "AVX", "-AVX2,-FMA,-AVX512F"),
    "Haswell": (("avx2", "fma"), "avx2", "AVX2", "-AVX512F"),
    "SkylakeX": (("avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"), "avx512", "AVX512", ""),
}


def cpu_kinds() -> list[CpuKind]:
    """Every core type of :data:`GENERATIONS`, with numpy dispatching as far as this host allows
    (``+npy``) and limited to its baseline (``-npy``)."""
    out = []
    for core, (needs, aten, mkl, masks) in GENERATIONS.items():
        env = {"OPENBLAS_CORETYPE": core, "ATEN_CPU_CAPABILITY": aten, "MKL_ENABLE_INSTRUCTIONS": mkl}
        if masks:
            env["GLIBC_TUNABLES"] = f"glibc.cpu.hwcaps={masks}"
        out.append(CpuKind(f"{core}+npy", env, needs))
        out.append(CpuKind(f"{core}-npy", {**env, "NPY_ENABLE_CPU_FEATURES": "X86_V2"}, needs))
    return out


def _cpuinfo(field: str) -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        if line.startswith(field):
            return line.split(":", 1)[1].strip()
    return ""


def host_flags() -> set[str]:
    """This CPU's flags (``/proc/cpuinfo``)."""
    return set(_cpuinfo("flags").split())


def host_cpu() -> str:
    """This CPU's model name."""
    return _cpuinfo("model name") or platform.machine()


#: every variable a kind or the profile sets: a child starts from the environment without them
NUMERIC_VARIABLES = (
    *PROFILE.variables(),
    "CONSORTIA_NUMERIC_PROFILE",
    "MKL_ENABLE_INSTRUCTIONS",
    "NPY_DISABLE_CPU_FEATURES",
)


#: unpinned children run one thread too, as tasks did before the profile: only the kernels differ
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def child_environment(kind: Mapping[str, str], pinned: bool, without: Sequence[str] = ()) -> dict[str, str]:
    """The environment of a child on CPU kind ``kind``: the kind's own kernels on one thread
    (``pinned`` False), or the profile over it; ``without``: variables of the profile left as the kind
    has them (ablation)."""
    base = {k: v for k, v in os.environ.items() if k not in NUMERIC_VARIABLES}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [base.get("PYTHONPATH")])])
    env = {**base, **ONE_THREAD, **kind}
    if not pinned:
        return {**env, "CONSORTIA_NUMERIC_PROFILE": HOST}
    env = PROFILE.environ(env)
    for name in without:
        env.pop(name, None)
        if name in kind:
            env[name] = kind[name]
    if without:
        env["CONSORTIA_NUMERIC_PROFILE"] = HOST  # not the profile any more: the simulator must not refuse
    return env


# ----------------------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    """One algorithm's simulation: its class and hyper-parameters, rounds, topology record, datasets."""

    algorithm: str  # module:Class
    params: dict[str, Any]
    rounds: int
    topology: dict[str, Any]
    data: Callable[[str], dict[str, Any]]  # scale -> {org: LocalDataset}
    needs_torch: bool = False


def _mixture(seed: int, n: int, d: int) -> Any:
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = np.zeros((2, d))
    centres[1, :3] = [3.0, -2.0, 1.0]
    z = rng.integers(0, 2, n)
    return centres[z] + rng.standard_normal((n, d))


def _mixtures(orgs: Sequence[str], base: int, scale: str, d: int) -> dict[str, Any]:
    from algorithms.step import LocalDataset

    rows = {"tiny": 30, "quick": 60, "full": 400}[scale]
    return {o: LocalDataset(_mixture(base + i, rows + rows // 3 * i, d), name=o) for i, o in enumerate(orgs)}


def _olr(scale: str) -> dict[str, Any]:
    from algorithms.dpsda.experiments import synthetic_olr
    from algorithms.step import LocalDataset

    horizon = {"tiny": 10, "quick": 30, "full": 200}[scale]
    s = synthetic_olr(4, dimension=6, horizon=horizon)
    return {o: LocalDataset(s.features, s.labels, name=o) for o in ORGS3}


def _fraud(scale: str) -> dict[str, Any]:
    from algorithms.collab_rf.synthetic import synthetic_fraud

    rows = {"tiny": 300, "quick": 1500, "full": 4000}[scale]
    sf = synthetic_fraud(
        n_nodes=4, n_per_node=rows, positive_rate=0.02, n_test=100, seed=1, zero_positive_node=None
    )
    return dict(sf.nodes)


def _rounds_ggm(iterations: int, orgs: int, aggregation: dict[str, Any]) -> int:
    from algorithms.collabdict.aggregation import AggregationConfig
    from algorithms.collabdict.ggm import rounds_for

    return rounds_for(iterations, orgs, AggregationConfig(**aggregation))


def cases(scale: str = "quick") -> dict[str, Case]:
    """The algorithms of the comparison at ``scale`` (``tiny``: the tests; ``quick``; ``full``)."""
    it = {"tiny": 1, "quick": 3, "full": 4}[scale]
    rf = {"n_new": 10, "n_share": 10, "n_max": 30, "max_depth": 8, "n_rep": 5}
    rf_rounds = {"tiny": 3, "quick": 9, "full": 12}[scale]
    dpsda = {"n_nodes": 3, "dimension": 6, "laplace_scale": 2.0}
    rounds_dpsda = {"tiny": 10, "quick": 30, "full": 200}[scale]
    vae = {"hidden": 8 if scale != "full" else 32, "optimizer": "adam", "mc_score": 4}
    ggm = {"n_components": 3}
    return {
        "ggm-consensus": Case(
            "algorithms.collabdict.ggm:CollabDictGGM",
            {**ggm, "aggregation": {}},
            _rounds_ggm(it, 5, {}),
            {"kind": "complete", "seed": 3},
            lambda s: _mixtures(ORGS5, 30, s, 4),
        ),
        "ggm-exact": Case(
            "algorithms.collabdict.ggm:CollabDictGGM",
            {**ggm, "aggregation": {"mode": "exact"}},
            _rounds_ggm(it, 3, {"mode": "exact"}),
            {"kind": "complete", "seed": 3},
            lambda s: _mixtures(ORGS3, 30, s, 4),
        ),
        "vae": Case(
            "algorithms.collabdict.vae:CollabDictVAE",
            {**vae, "aggregation": {"mode": "exact"}},
            _rounds_ggm(it, 3, {"mode": "exact"}),
            {"kind": "complete", "seed": 4},
            lambda s: _mixtures(ORGS3, 40, s, 4),
            needs_torch=True,
        ),
        "dpsda-c": Case(
            "algorithms.dpsda.step_function:DPSDA",
            {**dpsda, "variant": "C", "weights": "metropolis"},
            rounds_dpsda,
            {"kind": "ring", "seed": 9},
            _olr,
        ),
        "dpsda-ps": Case(
            "algorithms.dpsda.step_function:DPSDA",
            {**dpsda, "variant": "PS"},
            rounds_dpsda,
            {"kind": "random_link", "seed": 9},
            _olr,
        ),
        "collab-rf": Case(
            "algorithms.collab_rf.algorithm:CollaborativeRandomForest",
            {**rf, "schedule": ["FIT", "SHARE", "GET"] * (rf_rounds // 3)},
            rf_rounds,
            {"kind": "ring", "seed": 5},
            _fraud,
        ),
        "collab-rf-linreg": Case(
            "algorithms.collab_rf.algorithm:CollaborativeRandomForest",
            {**rf, "ranking": "linreg_bootstrap", "schedule": ["FIT", "SHARE", "GET"] * (rf_rounds // 3)},
            rf_rounds,
            {"kind": "ring", "seed": 5},
            _fraud,
        ),
    }


def write_datasets(directory: Path, names: Sequence[str], scale: str) -> None:
    """Each case's datasets as the task runtime's files (``<dir>/<case>/<org>.npz``), made once: every
    child reads the same bytes, whatever its kernels."""
    from algorithms.task_runtime import save_dataset

    table = cases(scale)
    for name in names:
        (directory / name).mkdir(parents=True, exist_ok=True)
        for org, data in table[name].data(scale).items():
            save_dataset(directory / name / f"{org}.npz", data)


# ----------------------------------------------------------------------------- one child


def simulate_case(name: str, directory: Path, scale: str, warm_up: bool = False) -> dict[str, Any]:
    """Simulate case ``name`` from its dataset files: every digest, and the wall and CPU time of
    ``simulate``; ``warm_up``: after simulating the case once untimed (imports and first-call set-up
    would otherwise be timed: GGM imports its graphical lasso in its first M-step, the VAE's first
    ``torch.use_deterministic_algorithms`` imports ``torch._inductor.config``, seconds each)."""
    import importlib

    from algorithms.simulator import simulate
    from algorithms.task_runtime import load_dataset
    from wire.canonical import sha256_digest

    case = cases(scale)[name]
    module, _, cls = case.algorithm.partition(":")
    algorithm = getattr(importlib.import_module(module), cls)(**case.params)
    orgs = sorted(p.stem for p in (directory / name).glob("*.npz"))
    datasets = {o: load_dataset(directory / name / f"{o}.npz") for o in orgs}
    if warm_up:
        simulate(algorithm, datasets, case.rounds, 7, case.topology, tuple(orgs))
    t0, c0 = time.perf_counter(), time.process_time()
    res = simulate(algorithm, datasets, case.rounds, 7, case.topology, tuple(orgs))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    digests = {
        "states": res.state_digests,
        "messages": [{f"{a}>{b}": d for (a, b), d in sorted(m.items())} for m in res.message_digests],
        "models": {o: sha256_digest(b) for o, b in sorted(res.models.items())},
    }
    return {
        "digests": digests,
        "digest_set": sha256_digest(json.dumps(digests, sort_keys=True).encode()),
        "count": sum(len(r) for r in res.state_digests)
        + sum(len(m) for m in res.message_digests)
        + len(res.models),
        "wall_s": wall,
        "cpu_s": cpu,
        "numeric_profile": res.numeric_profile,
    }


KERNELS = (
    "matmul 256x256",
    "matvec 2000x200",
    "cholesky 300",
    "lstsq gelsd 600x60",
    "exp float64",
    "log float64",
    "tanh float64",
    "sin float64",
    "power float64",
    "sum float64",
    "sort float64",
    "argsort float64",
    "maximum float64",
    "exp float32",
    "torch mm float64 256",
    "torch exp float64",
)


def time_kernels(repeats: int) -> dict[str, float]:
    """Seconds of one call of each of :data:`KERNELS` (median of ``repeats``), on fixed inputs."""
    import numpy as np
    import scipy.linalg

    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((256, 256)), rng.standard_normal((256, 256))
    M, v = rng.standard_normal((2000, 200)), rng.standard_normal(200)
    S = rng.standard_normal((300, 300))
    S = S @ S.T + 300 * np.eye(300)
    L, b = rng.standard_normal((600, 60)), rng.standard_normal(600)
    x = rng.standard_normal(1_000_000)
    p = np.abs(x) + 1e-3
    x32 = x.astype(np.float32)
    ops: dict[str, Callable[[], Any]] = {
        "matmul 256x256": lambda: A @ B,
        "matvec 2000x200": lambda: M @ v,
        "cholesky 300": lambda: np.linalg.cholesky(S),
        "lstsq gelsd 600x60": lambda: scipy.linalg.lstsq(L, b, lapack_driver="gelsd"),
        "exp float64": lambda: np.exp(x),
        "log float64": lambda: np.log(p),
        "tanh float64": lambda: np.tanh(x),
        "sin float64": lambda: np.sin(x),
        "power float64": lambda: np.power(p, 1.7),
        "sum float64": lambda: x.sum(),
        "sort float64": lambda: np.sort(x),
        "argsort float64": lambda: np.argsort(x, kind="stable"),
        "maximum float64": lambda: np.maximum(x, p),
        "exp float32": lambda: np.exp(x32),
    }
    try:
        import torch

        ta, tb, tx = torch.from_numpy(A), torch.from_numpy(B), torch.from_numpy(x)
        ops["torch mm float64 256"] = lambda: ta @ tb
        ops["torch exp float64"] = lambda: torch.exp(tx)
    except ImportError:
        pass
    out = {}
    for name, op in ops.items():
        op()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            op()
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times)
    return out


def child_main(argv: list[str]) -> int:
    """``--child DIR SCALE [--timed] CASE...`` (or ``--kernels REPEATS``): print one JSON line."""
    if argv[0] == "--kernels":
        result: dict[str, Any] = {"kernels": time_kernels(int(argv[1]))}
    else:
        directory, scale, names = Path(argv[1]), argv[2], argv[3:]
        timed = names[:1] == ["--timed"]
        names = names[1:] if timed else names
        result = {"cases": {n: simulate_case(n, directory, scale, warm_up=timed) for n in names}}
    result["facts"] = facts()
    print(json.dumps(result, sort_keys=True))
    return 0


def run_child(env: Mapping[str, str], args: Sequence[str], timeout: float = 1800.0) -> dict[str, Any]:
    """Run :func:`child_main` with ``args`` in a fresh interpreter under ``env``; its JSON."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.reproducibility", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {list(args)[:3]} failed ({proc.returncode}): {proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def simulate_under(
    env: Mapping[str, str], directory: Path, scale: str, names: Sequence[str], timed: bool = False
) -> dict[str, Any]:
    """Each case of ``names`` simulated in a fresh interpreter under ``env`` (``timed``: each after an
    untimed run of itself)."""
    return run_child(env, ["--child", str(directory), scale, *(["--timed"] if timed else []), *names])


# ----------------------------------------------------------------------------- the benchmark


def _chosen(f: Mapping[str, Any]) -> str:
    """One line of what a child's libraries chose."""
    cores = sorted({r["architecture"] for r in f.get("runtimes") or [] if r.get("architecture")})
    numpy_targets = ",".join(f.get("numpy", {}).get("enabled", [])) or "baseline"
    fma = (f.get("glibc_active") or {}).get("FMA")
    torch_cap = (f.get("torch") or {}).get("capability", "-")
    return f"OpenBLAS {'/'.join(cores)}, numpy {numpy_targets}, libm {'FMA' if fma else 'SSE2'}, torch {torch_cap}"


def digest_sets(runs: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> dict[str, int]:
    """Per case, how many different digest sets the runs produced."""
    return {n: len({r["cases"][n]["digest_set"] for r in runs.values()}) for n in names}


def compare_digests(runs: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """Per case: digests compared (states + messages + models per run) and how many differ from the
    first kind's, digest by digest."""
    out = {}
    kinds = list(runs)
    for n in names:
        ref = runs[kinds[0]]["cases"][n]["digests"]
        flat_ref = _flatten(ref)
        differing = {
            k: sum(1 for key, d in _flatten(runs[k]["cases"][n]["digests"]).items() if flat_ref.get(key) != d)
            for k in kinds[1:]
        }
        out[n] = {"digests_per_run": len(flat_ref), "differing_from_first": differing}
    return out


def _flatten(digests: Mapping[str, Any]) -> dict[str, str]:
    flat = {}
    for r, states in enumerate(digests["states"]):
        flat.update({f"state/{r}/{o}": d for o, d in states.items()})
    for r, msgs in enumerate(digests["messages"], start=1):
        flat.update({f"message/{r}/{k}": d for k, d in msgs.items()})
    flat.update({f"model/{o}": d for o, d in digests["models"].items()})
    return flat


#: the kinds the ablation runs on: between them every knob of the profile takes two or more values
ABLATION_KINDS = ("Prescott-npy", "Sandybridge+npy", "Haswell-npy", "SkylakeX+npy")
ABLATION = {
    "OpenBLAS core": ("OPENBLAS_CORETYPE",),
    "numpy dispatch": ("NPY_ENABLE_CPU_FEATURES",),
    "glibc FMA mask": ("GLIBC_TUNABLES",),
    "torch capability": ("ATEN_CPU_CAPABILITY",),
    "MKL CNR": ("MKL_CBWR",),
    "oneDNN ISA": ("ONEDNN_MAX_CPU_ISA",),
}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("--child", "--kernels"):
        raise SystemExit(child_main(argv))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller cases, 3 timing pairs, no ablation")
    args = ap.parse_args(argv)
    scale = "quick" if args.quick else "full"
    pairs = 3 if args.quick else 5
    table = cases(scale)
    try:
        import torch  # noqa: F401
    except ImportError:
        table = {n: c for n, c in table.items() if not c.needs_torch}
    names = list(table)
    flags = host_flags()
    kinds = [k for k in cpu_kinds() if set(k.needs) <= flags]
    skipped = {k.name: sorted(set(k.needs) - flags) for k in cpu_kinds() if k not in kinds}
    t_start = time.perf_counter()
    print(f"[reproducibility] profile {PROFILE.id} ({PROFILE.digest}); host: {host_cpu()}")
    print(f"  kinds: {', '.join(k.name for k in kinds)}; skipped (CPU lacks): {skipped or 'none'}")
    with tempfile.TemporaryDirectory(prefix="consortia-repro-") as tmp:
        data = Path(tmp)
        write_datasets(data, names, scale)
        runs: dict[str, dict[str, dict[str, Any]]] = {"unpinned": {}, "pinned": {}}
        for kind in kinds:
            for mode in runs:
                r = simulate_under(child_environment(kind.environment, mode == "pinned"), data, scale, names)
                runs[mode][kind.name] = r
                print(f"  {kind.name:14s} {mode:8s} {_chosen(r['facts'])}", flush=True)
        before = digest_sets(runs["unpinned"], names)
        after = digest_sets(runs["pinned"], names)
        for n in names:
            print(f"  {n:17s} digest sets: unpinned {before[n]}, pinned {after[n]}")
        # the pin's cost: this machine's own kernels against the profile, alternating (and which of
        # the two goes first), one thread each
        walls: dict[str, dict[str, list[float]]] = {"unpinned": {}, "pinned": {}}
        cpus: dict[str, dict[str, list[float]]] = {"unpinned": {}, "pinned": {}}
        kernels: dict[str, list[dict[str, float]]] = {"unpinned": [], "pinned": []}
        for i in range(pairs):
            for mode in ("pinned", "unpinned") if i % 2 == 0 else ("unpinned", "pinned"):
                env = child_environment({}, mode == "pinned")
                r = simulate_under(env, data, scale, names, timed=True)
                for n in names:
                    walls[mode].setdefault(n, []).append(r["cases"][n]["wall_s"])
                    cpus[mode].setdefault(n, []).append(r["cases"][n]["cpu_s"])
                kernels[mode].append(run_child(env, ["--kernels", "5"])["kernels"])

        def ratio(times: dict[str, dict[str, list[float]]], n: str) -> float:
            return round(statistics.median(times["pinned"][n]) / statistics.median(times["unpinned"][n]), 3)

        cost = {n: ratio(walls, n) for n in names}
        cost_cpu = {n: ratio(cpus, n) for n in names}
        kernel_cost = {
            op: {mode: statistics.median(k[op] for k in kernels[mode]) for mode in ("pinned", "unpinned")}
            for op in kernels["pinned"][0]
        }
        for k in kernel_cost.values():
            k["ratio"] = round(k["pinned"] / k["unpinned"], 3)
        print("  pin cost (pinned / unpinned wall): " + ", ".join(f"{n} {r}" for n, r in cost.items()))
        ablation: dict[str, dict[str, int]] = {}
        if not args.quick:
            for part, variables in ABLATION.items():
                partial = {
                    k.name: simulate_under(
                        child_environment(k.environment, True, variables), data, scale, names
                    )
                    for k in kinds
                }
                ablation[part] = digest_sets(partial, names)
                print(f"  profile without {part}: digest sets {ablation[part]}", flush=True)
        # an auditor's replay of a real process's tasks on its own machine (benchmarks.audit_replay)
        from benchmarks.audit_replay import measure as measure_replay

        (data / "replay").mkdir()
        replay = measure_replay(data / "replay")
        print(
            f"  auditor replay: {replay['replay_matched']}/{replay['replayed_tasks']} tasks matched",
            flush=True,
        )
    comparison = {m: compare_digests(runs[m], names) for m in runs}
    report = {
        "profile": PROFILE.record() | {"environment": PROFILE.environ()},
        "host": {"cpu": host_cpu(), "avx512": "avx512f" in flags, "facts": facts()},
        "scale": scale,
        "kinds": {k.name: dict(k.environment) for k in kinds},
        "kinds_skipped": skipped,
        "chosen": {m: {k: _chosen(r["facts"]) for k, r in runs[m].items()} for m in runs},
        "digest_sets": {"unpinned": before, "pinned": after},
        "comparison": comparison,
        "pin_cost_ratio": cost,
        "pin_cost_ratio_cpu": cost_cpu,
        "simulate_wall_s": {m: {n: statistics.median(v) for n, v in walls[m].items()} for m in walls},
        "simulate_cpu_s": {m: {n: statistics.median(v) for n, v in cpus[m].items()} for m in cpus},
        "kernel_cost": kernel_cost,
        "ablation": ablation,
        "replay": replay,
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    tag = "reproducibility-quick" if args.quick else "reproducibility"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{tag}.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    (RESULTS / f"{tag}.md").write_text(markdown(report))
    headline = {
        "cpu_kinds": len(kinds),
        "kinds_skipped": sorted(skipped),
        "algorithms": len(names),
        "digest_sets_equal": all(v == 1 for v in after.values()),
        "digest_sets_unpinned": before,
        "digest_sets_pinned": after,
        "digests_compared": sum(c["digests_per_run"] * len(kinds) for c in comparison["pinned"].values()),
        "pin_cost_ratio": cost,
        "pin_cost_ratio_cpu": cost_cpu,
        "profile": PROFILE.id,
        "replayed_tasks": replay["replayed_tasks"],
        "replay_matched": replay["replay_matched"],
    }
    print(json.dumps(headline, sort_keys=True))
    return headline


def markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown tables."""
    names = list(report["digest_sets"]["pinned"])
    lines = [
        f"# Reproducibility across CPU kinds ({report['scale']})",
        "",
        f"Profile `{report['profile']['name']}/{report['profile']['version']}` ({report['profile']['digest']}); "
        f"host {report['host']['cpu']}; {len(report['kinds'])} emulated kinds, skipped "
        f"(CPU lacks): {report['kinds_skipped'] or 'none'}; wall {report['wall_s']} s.",
        "",
        "## Kernels each kind chose",
        "",
        "| kind | unpinned | pinned |",
        "|---|---|---|",
    ]
    for k in report["kinds"]:
        lines.append(f"| {k} | {report['chosen']['unpinned'][k]} | {report['chosen']['pinned'][k]} |")
    lines += [
        "",
        "## Digest sets per algorithm (1 = every state, message and model digest equal on every kind)",
        "",
        "| algorithm | digests per run | unpinned | pinned |",
        "|---|---|---|---|",
    ]
    for n in names:
        per = report["comparison"]["pinned"][n]["digests_per_run"]
        lines.append(
            f"| {n} | {per} | {report['digest_sets']['unpinned'][n]} | {report['digest_sets']['pinned'][n]} |"
        )
    lines += [
        "",
        "## What the pin costs (pinned / unpinned, this machine's own kernels, alternating)",
        "",
        "| algorithm | unpinned s | pinned s | ratio |",
        "|---|---|---|---|",
    ]
    for n in names:
        w = report["simulate_wall_s"]
        lines.append(
            f"| {n} | {w['unpinned'][n]:.3f} | {w['pinned'][n]:.3f} | {report['pin_cost_ratio'][n]} |"
        )
    lines += ["", "| kernel | unpinned ms | pinned ms | ratio |", "|---|---|---|---|"]
    for op, k in report["kernel_cost"].items():
        lines.append(f"| {op} | {1e3 * k['unpinned']:.3f} | {1e3 * k['pinned']:.3f} | {k['ratio']} |")
    if report["ablation"]:
        lines += [
            "",
            "## The profile minus one part (digest sets across the kinds)",
            "",
            "| removed | " + " | ".join(names) + " |",
            "|---|" + "---|" * len(names),
        ]
        for part, sets in report["ablation"].items():
            lines.append(f"| {part} | " + " | ".join(str(sets[n]) for n in names) + " |")
    r = report.get("replay")
    if r:
        lines += [
            "",
            "## An auditor's replay (benchmarks.audit_replay)",
            "",
            f"{r['process']}: run {r['run_process_s']} s; disclosures {r['disclose_s']} s; replay of "
            f"{r['replayed_tasks']} tasks {r['replay_process_s']} s; {r['replay_matched']} matched, "
            f"{r['digests_compared']} digests compared, {r['models_matched']} final models matched.",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] not in (["--child"], ["--kernels"]):
        from algorithms.numeric_profile import reexec_selected

        reexec_selected()  # the datasets are made here: under the profile, the same bytes everywhere
    main()
