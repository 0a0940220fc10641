"""``TransactionContext.scan_summaries``: each distinct stored value is decoded and summarised once
per process, a changed value is summarised again, and the answers equal what ``scan`` gives."""

from __future__ import annotations

import json
from types import SimpleNamespace

from chaincode.context import TransactionContext
from chaincode.learning_process import completed_organisations


class RangeStub:
    def __init__(self, records: dict[str, dict]):
        self.values = {k: json.dumps(v, sort_keys=True).encode() for k, v in records.items()}

    def get_state_by_partial_composite_key(self, object_type, attributes):
        return [SimpleNamespace(key=k, value=v) for k, v in sorted(self.values.items())]


def _ctx(records: dict[str, dict]) -> tuple[TransactionContext, RangeStub]:
    ctx = TransactionContext.__new__(TransactionContext)  # no creator needed to read records
    ctx.stub = stub = RangeStub(records)  # type: ignore[assignment]
    return ctx, stub


def test_each_distinct_value_is_summarised_once_and_a_new_version_again():
    records = {f"k{i}": {"organisation": f"Org{i}MSP", "status": "running", "n": i} for i in range(4)}
    ctx, stub = _ctx(records)
    calls: list[str] = []

    def status_of(r: dict) -> tuple[str, str]:
        calls.append(r["organisation"])
        return r["organisation"], r["status"]

    first = list(ctx.scan_summaries(status_of, "EX", "p"))
    again = list(ctx.scan_summaries(status_of, "EX", "p"))
    stored = [json.loads(v) for _, v in sorted(stub.values.items())]  # what a scan decodes
    assert first == again == [(r["organisation"], r["status"]) for r in stored]
    assert len(calls) == 4  # the second scan decoded nothing
    records["k2"]["status"] = "completed"  # a new version of one record
    stub.values["k2"] = json.dumps(records["k2"], sort_keys=True).encode()
    assert ("Org2MSP", "completed") in list(ctx.scan_summaries(status_of, "EX", "p"))
    assert calls[4:] == ["Org2MSP"]


def test_completed_organisations_follows_status_changes():
    recs = {
        "a": {"organisation": "Org1MSP", "status": "completed"},
        "b": {"organisation": "Org2MSP", "status": "running"},
    }
    ctx, stub = _ctx(recs)
    assert completed_organisations(ctx, "p", 1) == {"Org1MSP"}
    stub.values["b"] = json.dumps({"organisation": "Org2MSP", "status": "completed"}).encode()
    assert completed_organisations(ctx, "p", 1) == {"Org1MSP", "Org2MSP"}
    stub.values["a"] = json.dumps({"organisation": "Org1MSP", "status": "failed"}).encode()
    assert completed_organisations(ctx, "p", 1) == {"Org2MSP"}
