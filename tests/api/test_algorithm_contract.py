"""``consortia algorithm check``'s contract checks (api.algorithm_kit.contract, .instrument): a folder made
from a template passes; a step that reads the clock, draws from an unseeded generator (numpy's global
one, torch's without ``torch.manual_seed``) or reaches the network is refused with its file and line, as
is a ``params()`` that does not rebuild the object, a message to a non-neighbour, a label read by a
label-free declaration and an import of the project's internals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.algorithm_kit.contract import check_folder
from api.algorithm_kit.scaffold import new_folder


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract")
    return {t: new_folder(f"kit-{t}", t, root) for t in ("sklearn", "torch")}


def variant(made, template: str, tmp_path: Path, name: str, old: str, new: str) -> tuple[Path, int]:
    """A copy of a template's folder (module renamed ``name``) with ``old`` replaced by ``new``; the line
    of the folder's module where ``new`` starts."""
    src = made[template]
    folder = tmp_path / name.replace("_", "-")
    folder.mkdir()
    meta = json.loads((src.folder / "image.json").read_text())
    meta["algorithm"] = f"{name}:{src.cls}"
    (folder / "image.json").write_text(json.dumps(meta))
    code = (src.folder / f"{src.module}.py").read_text()
    assert old in code
    code = code.replace(old, new, 1)
    (folder / f"{name}.py").write_text(code)
    line = code[: code.index(new.strip().splitlines()[-1])].count("\n") + 1
    return folder, line


def failures(report) -> dict[str, str]:
    return {c.check: c.detail for c in report.checks if not c.ok}


MODEL = '        model = {"coef": coef, "intercept": intercept}\n'


def test_a_template_folder_passes_every_check(made):
    report = check_folder(made["sklearn"].folder, rounds=2)
    assert report.ok, failures(report)
    assert [c.check for c in report.checks][:3] == ["image.json", "imports", "loads"]
    assert "validation score" in {c.check for c in report.checks}
    assert set(report.digests) == {"Org1MSP", "Org2MSP", "Org3MSP", "Org4MSP"}


@pytest.mark.parametrize(
    "case, new, check, finding",
    [
        (
            "clock",
            '        import time\n\n        model = {"coef": coef, "intercept": intercept + (time.time() % 1)}\n',
            "no clock",
            "time.time() reads the clock",
        ),
        (
            "unseeded",
            '        model = {"coef": coef + 1e-6 * np.random.rand(len(coef)), "intercept": intercept}\n',
            "seeded randomness",
            "np.random.rand() draws from numpy's global generator",
        ),
        (
            "network",
            '        import socket\n\n        socket.create_connection(("127.0.0.1", 9), timeout=0.1)\n'
            + MODEL,
            "no network",
            "reaches the network",
        ),
    ],
)
def test_a_nondeterministic_step_is_refused_naming_its_line(made, tmp_path, case, new, check, finding):
    folder, line = variant(made, "sklearn", tmp_path, f"kit_{case}", MODEL, new)
    if case == "network":
        line -= 1  # the connection, not the model line after it
    report = check_folder(folder, rounds=2)
    fails = failures(report)
    assert check in fails and f"kit_{case}.py:{line}: " in fails[check] and finding in fails[check], fails
    if case != "network":  # the bytes differ between two runs too; a refused connection stops the run
        assert "two runs differ" in fails["identical runs"]
    else:
        assert "PermissionError: no network" in fails["runs"]
    others = set(fails) - {check, "identical runs", "runs"}
    assert others == set(), fails


def test_torch_drawing_from_its_global_generator_without_manual_seed_is_refused(made, tmp_path):
    folder, _ = variant(
        made,
        "torch",
        tmp_path,
        "kit_torchseed",
        "    torch.manual_seed(int(rng.integers(2**62)))\n",
        "    pass\n",
    )
    fails = failures(check_folder(folder, rounds=1))
    net = (folder / "kit_torchseed.py").read_text().splitlines()
    line = next(i for i, t in enumerate(net, start=1) if "torch.nn.Linear(features, self.hidden)" in t)
    assert (
        f"kit_torchseed.py:{line}: torch kaiming_uniform_ draws from torch's global generator"
        in fails["seeded randomness"]
    ), fails
    assert "two runs differ" in fails["identical runs"]


def test_params_that_do_not_rebuild_the_object_are_refused(made, tmp_path):
    folder, _ = variant(
        made,
        "sklearn",
        tmp_path,
        "kit_params",
        '"alpha": self.alpha}',
        '"alpha": self.alpha * 2}',
    )
    fails = failures(check_folder(folder, rounds=1))
    assert "differs from a.params() in ['alpha']" in fails["parameters rebuild"]
    assert "alpha: the schema's default 0.0001 is not the class's 0.0002" in fails["parameter schema"]


def test_a_message_to_a_non_neighbour_labels_read_undeclared_and_internal_imports_are_refused(made, tmp_path):
    folder, _ = variant(
        made,
        "sklearn",
        tmp_path,
        "kit_rude",
        "            outbox={j: model for j in ctx.out_neighbours},",
        "            outbox={j: model for j in ctx.consortium if j != ctx.organisation},",
    )
    fails = failures(check_folder(folder, rounds=1))
    assert (
        "ProtocolViolation" in fails["neighbours only"] and "not an out-neighbour" in fails["neighbours only"]
    )
    meta = json.loads((folder / "image.json").read_text())
    meta["input"] = {"features": "numeric", "label": False}
    (folder / "image.json").write_text(json.dumps(meta))
    code = (folder / "kit_rude.py").read_text()
    code = code.replace(
        "from consortia_sdk import",
        "from algorithms.step import SDK_VERSION  # noqa\nfrom consortia_sdk import",
    )
    (folder / "kit_rude.py").write_text(code)
    fails = failures(check_folder(folder, rounds=1))
    assert 'declares no label ("label": false) but reads data.labels' in fails["inputs as declared"]
    assert "kit_rude.py:" in fails["inputs as declared"]
    assert "imports algorithms.step (use consortia_sdk)" in fails["imports"]


def test_an_unreadable_declaration_fails_every_check_never_passes_one(tmp_path):
    (tmp_path / "image.json").write_text(json.dumps({"name": "x", "algorithm": "x:X", "sdk": "9.0.0"}))
    report = check_folder(tmp_path)
    assert not report.ok and all(not c.ok for c in report.checks)
    assert "a major version this platform" in report.checks[0].detail
