"""The numeric profile (algorithms.numeric_profile, docs/reproducibility.md): declared once with a digest,
applied over any host's environment, checked by what the libraries report, required by the simulator;
and, in fresh interpreters emulating other CPU kinds (benchmarks.reproducibility), every algorithm's
state, message and model digests are the same under it although the kinds' own kernels differ."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from algorithms.numeric_profile import (
    HOST,
    PROFILE,
    NumericProfile,
    facts,
    named,
    of_record,
    selected,
)
from benchmarks import reproducibility as repro

ROOT = repro.ROOT


def test_the_profile_is_declared_once_with_a_digest_of_everything_it_pins():
    assert PROFILE.id == "x86-64-v2/1" and named(PROFILE.id) is PROFILE
    assert PROFILE.record() == {"name": "x86-64-v2", "version": 1, "digest": PROFILE.digest}
    assert of_record(PROFILE.record()) is PROFILE
    assert PROFILE.declaration()["environment"]["OPENBLAS_CORETYPE"] == PROFILE.openblas_core == "Nehalem"
    other = NumericProfile(
        PROFILE.name,
        PROFILE.version,
        PROFILE.description,
        {**PROFILE.environment, "OPENBLAS_CORETYPE": "Haswell"},
        PROFILE.unset,
        PROFILE.glibc_masked,
        "Haswell",
        PROFILE.torch_capability,
    )
    assert other.digest != PROFILE.digest  # the digest covers every setting
    with pytest.raises(ValueError, match="is not x86-64-v2/1's"):
        of_record(other.record())
    with pytest.raises(ValueError, match="unknown numeric profile 'x86-64-v3/1'"):
        named("x86-64-v3/1")


def test_the_profile_is_applied_over_a_host_environment():
    host = {
        "OPENBLAS_CORETYPE": "SkylakeX",
        "NPY_DISABLE_CPU_FEATURES": "X86_V4",
        "MKL_ENABLE_INSTRUCTIONS": "AVX512",
        "GLIBC_TUNABLES": "glibc.malloc.check=0:glibc.cpu.hwcaps=-AVX512F",
        "PATH": "/usr/bin",
    }
    problems = PROFILE.environment_problems(host)
    assert "$OPENBLAS_CORETYPE='SkylakeX', the profile needs 'Nehalem'" in problems
    assert "$NPY_DISABLE_CPU_FEATURES is set ('X86_V4'); the profile needs it unset" in problems
    assert "$GLIBC_TUNABLES does not mask FMA, FMA4 (glibc.cpu.hwcaps)" in problems
    env = PROFILE.environ(host)
    assert PROFILE.environment_problems(env) == []
    assert env["PATH"] == "/usr/bin" and env["OPENBLAS_CORETYPE"] == "Nehalem"
    assert "NPY_DISABLE_CPU_FEATURES" not in env and "MKL_ENABLE_INSTRUCTIONS" not in env
    # other glibc tunables and masks are kept, the profile's masks added
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.check=0:glibc.cpu.hwcaps=-AVX512F,-FMA,-FMA4"


def test_this_session_computes_under_the_profile():
    if selected() is None:
        pytest.skip(f"CONSORTIA_NUMERIC_PROFILE={HOST}: this session runs with the machine's own kernels")
    import scipy.linalg  # noqa: F401  (scipy's own OpenBLAS, checked too)

    assert PROFILE.problems() == []
    seen = facts()
    assert seen["numpy"]["enabled"] == [] and seen["glibc_active"]["FMA"] is False
    assert len([r for r in seen["runtimes"] if r["internal_api"] == "openblas"]) >= 2  # numpy's, scipy's
    assert _openblas(seen) == {"Nehalem"}
    assert {r["num_threads"] for r in seen["runtimes"]} == {1}


def _openblas(seen) -> set[str]:
    """The core types the loaded OpenBLAS libraries report (Prescott's kernels report "Katmai")."""
    return {r["architecture"] for r in seen["runtimes"] if r["internal_api"] == "openblas"}


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT, timeout=300
    )


SIMULATE = """
import json
from algorithms.dpsda import DPSDA
from algorithms.simulator import simulate
from benchmarks.reproducibility import cases
case = cases("tiny")["dpsda-c"]
res = simulate(DPSDA(**case.params), case.data("tiny"), 3, 7, case.topology)
print(json.dumps(res.numeric_profile))
"""


def test_a_process_started_without_the_profile_is_refused_by_the_simulator():
    env = repro.child_environment({"OPENBLAS_CORETYPE": "Prescott"}, pinned=False)
    del env["CONSORTIA_NUMERIC_PROFILE"]  # the default: the profile
    proc = _python(SIMULATE, env)
    assert proc.returncode != 0
    assert "NumericProfileError: numeric profile x86-64-v2/1 is not in effect" in proc.stderr
    assert "$OPENBLAS_CORETYPE='Prescott', the profile needs 'Nehalem'" in proc.stderr
    assert "runs Katmai kernels, not Nehalem" in proc.stderr  # what OpenBLAS itself reports
    # with this machine's own kernels, asked for: it simulates and records no profile
    proc = _python(SIMULATE, {**env, "CONSORTIA_NUMERIC_PROFILE": HOST})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) is None
    # under the profile: it records it
    proc = _python(SIMULATE, repro.child_environment({"OPENBLAS_CORETYPE": "Prescott"}, pinned=True))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == PROFILE.record()


def test_the_check_command_reports_what_the_libraries_chose():
    check = [sys.executable, "-m", "algorithms.numeric_profile", "check"]
    pinned = repro.child_environment({}, pinned=True)
    proc = subprocess.run(check, env=pinned, capture_output=True, text=True, cwd=ROOT, timeout=300)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["problems"] == [] and report["profile"] == PROFILE.record()
    assert _openblas(report["facts"]) == {"Nehalem"}
    proc = subprocess.run(
        check,
        env={**pinned, "OPENBLAS_CORETYPE": "Prescott", "GLIBC_TUNABLES": ""},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    problems = json.loads(proc.stdout)["problems"]
    assert proc.returncode == 1
    assert any("runs Katmai kernels, not Nehalem" in p for p in problems)
    if "fma" in repro.host_flags():
        assert "glibc still uses FMA for libm (GLIBC_TUNABLES not in effect)" in problems


def _kinds(*names: str) -> list[repro.CpuKind]:
    flags = repro.host_flags()
    table = {k.name: k for k in repro.cpu_kinds()}
    kinds = [table[n] for n in names]
    missing = [k.name for k in kinds if not set(k.needs) <= flags]
    if missing:
        pytest.skip(f"this CPU cannot run the kinds {missing}")
    return kinds


def _digest_sets(tmp_path, kinds, names, pinned):
    runs = {
        k.name: repro.simulate_under(repro.child_environment(k.environment, pinned), tmp_path, "tiny", names)
        for k in kinds
    }
    return runs, repro.digest_sets(runs, names)


def test_every_digest_is_the_same_on_two_cpu_kinds_under_the_profile(tmp_path):
    """Prescott kernels without numpy's SIMD dispatch and libm without FMA, against Sandybridge
    kernels with numpy dispatching to this host's best: the kinds' own kernels give other GGM digests
    (so the comparison can fail), the profile gives every state, message and model digest equal."""
    names = ["ggm-exact", "dpsda-c", "collab-rf-linreg"]
    kinds = _kinds("Prescott-npy", "Sandybridge+npy")
    repro.write_datasets(tmp_path, names, "tiny")
    unpinned, before = _digest_sets(tmp_path, kinds, names, pinned=False)
    assert before["ggm-exact"] == 2
    assert [_openblas(r["facts"]) for r in unpinned.values()] == [{"Katmai"}, {"Sandybridge"}]
    pinned, after = _digest_sets(tmp_path, kinds, names, pinned=True)
    assert after == {n: 1 for n in names}
    for run in pinned.values():
        assert run["facts"]["numpy"]["enabled"] == [] and run["facts"]["glibc_active"]["FMA"] is False
        assert _openblas(run["facts"]) == {"Nehalem"}
        for case in run["cases"].values():
            assert case["numeric_profile"] == PROFILE.record() and case["count"] > 10


def test_torch_digests_are_the_same_under_its_default_and_vector_capabilities(tmp_path):
    """The VAE (torch float64 with MKL) on ATen's default capability against AVX2: other digests on
    their own, the same under the profile (ATen default, MKL COMPATIBLE)."""
    pytest.importorskip("torch")
    kinds = _kinds("Prescott-npy", "Haswell+npy")
    repro.write_datasets(tmp_path, ["vae"], "tiny")
    unpinned, before = _digest_sets(tmp_path, kinds, ["vae"], pinned=False)
    assert before == {"vae": 2}
    assert {r["facts"]["torch"]["capability"] for r in unpinned.values()} == {"DEFAULT", "AVX2"}
    pinned, after = _digest_sets(tmp_path, kinds, ["vae"], pinned=True)
    assert after == {"vae": 1}
    assert {r["facts"]["torch"]["capability"] for r in pinned.values()} == {"DEFAULT"}
