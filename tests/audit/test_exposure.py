"""audit.exposure: a process's confidential values as needles (which values, which forms, which skipped
and why) and the byte search over files and blocks. The end-to-end measure of a non-member's files is
tests/e2e/test_non_member.py."""

from __future__ import annotations

import pytest

from audit.exposure import KINDS, MIN_BYTES, files_of, process_needles, search, search_blocks
from ledger.client import ExecutionRecord, ProcessRecord
from wire.canonical import canonical_json


@pytest.fixture(scope="module")
def records(ledger_view) -> tuple[ProcessRecord, list[ExecutionRecord]]:
    process, executions, _, _ = ledger_view
    return ProcessRecord.model_validate(process), [ExecutionRecord.model_validate(e) for e in executions]


def _process(process: ProcessRecord, **hyperparameters) -> ProcessRecord:
    return process.replace(hyperparameters=hyperparameters, privacy_budget=None)


def test_each_value_is_a_canonical_pair_and_a_long_float_also_bare(records):
    process, _ = records
    needles = process_needles(_process(process, learning_rate=0.0371234567, depth=7, loss="log_loss"), [])
    forms = {n.labels[0]: n.forms for n in needles.needles}
    assert forms == {
        "hyperparameters.learning_rate": (b'"learning_rate":0.0371234567', b"0.0371234567"),
        "hyperparameters.depth": (b'"depth":7',),
        "hyperparameters.loss": (b'"loss":"log_loss"',),  # a string is never bare
    }


def test_values_that_mean_nothing_are_skipped_with_their_reason(records):
    process, _ = records
    needles = process_needles(_process(process, on=True, off=None, zero=0.0, a=1, b=0.5), [])
    reasons = {s.label: s.reason for s in needles.skipped}
    assert reasons == {
        "hyperparameters.on": "boolean or null",
        "hyperparameters.off": "boolean or null",
        "hyperparameters.zero": "zero",
        "hyperparameters.a": f"shorter than {MIN_BYTES} bytes",  # "a":1
        "hyperparameters.b": f"shorter than {MIN_BYTES} bytes",  # "b":0.5, and 0.5 is short too
    }
    assert needles.needles == ()


def test_a_value_of_two_kinds_is_skipped_in_both(records):
    """The image reports a hyper-parameter among its metrics: a hit could not say which kind leaked."""
    process, executions = records
    done = next(e for e in executions if e.status == "completed" and e.result is not None)
    name, value = next((k, v) for k, v in done.result.metrics.items() if v)
    needles = process_needles(_process(process, **{name: value}), [done])
    skipped = {(s.kind, s.reason) for s in needles.skipped if s.label.endswith(f".{name}")}
    assert skipped == {
        ("hyperparameters", "also a value of metrics"),
        ("metrics", "also a value of hyperparameters"),
    }
    assert not any(n.labels[0].endswith(f".{name}") for n in needles.needles)


def test_a_process_as_stored_is_found_by_kind_and_other_bytes_are_not(records, tmp_path):
    process, executions = records
    needles = process_needles(process, executions)
    counts = needles.count_by_kind()
    assert counts["metrics"] > 0 and counts["data_commitments"] > 0 and counts["hyperparameters"] > 0
    stored = [process.canonical(), *(e.canonical() for e in executions)]
    assert search_blocks(stored, needles).hits_by_kind() == counts  # every value, each once
    nothing = search_blocks([b"\x00" * 4096, canonical_json({"other": [1, 2, 3]})], needles)
    assert nothing.hits == 0 and set(nothing.found) == set(KINDS)
    # a folder is searched recursively; a file with its SQLite side files
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "blockfile_000000").write_bytes(b"head" + stored[0] + b"tail")
    (tmp_path / "store.db").write_bytes(b"nothing here")
    (tmp_path / "store.db-wal").write_bytes(b"\x01" + stored[1])
    in_folder = search(files_of([tmp_path / "deep"]), needles)
    assert in_folder.hits_by_kind()["hyperparameters"] == counts["hyperparameters"]
    assert in_folder.hits_by_kind()["metrics"] == 0 and in_folder.sources == 1
    in_file = search(files_of([tmp_path / "store.db"]), needles)
    assert in_file.sources == 2 and in_file.hits_by_kind()["data_commitments"] == 1
    assert set(in_file.where.values()) == {(str(tmp_path / "store.db-wal"),)}
