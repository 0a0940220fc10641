"""The dispatcher: function table, argument checks, internal errors never leak as rule errors."""

from __future__ import annotations

import pytest

from chaincode import dispatch
from chaincode.errors import InternalError, InvalidArgument, NotFound


class _Stub:
    def __init__(self, creator: bytes):
        self.creator = creator

    def get_creator(self):
        return self.creator

    def get_tx_id(self):
        return "tx"

    def get_tx_timestamp(self):
        return 0.0

    def get_state(self, key):
        raise RuntimeError("disk on fire")


def test_function_table_names_every_contract_method():
    names = set(dispatch.FUNCTIONS)
    for fn in ["Image:register", "LearningProcess:create", "ExecutionRecord:complete_task", "Model:grant"]:
        assert fn in names
    assert not any(n.split(":")[1].startswith("_") for n in names)


def test_bad_calls(tmp_path):
    from ledger.identity import Consortium

    cons = Consortium.generate(tmp_path, ["Org1"])
    stub = _Stub(cons.identity("Org1").serialized())
    with pytest.raises(NotFound):
        dispatch.invoke(stub, "Image:nothing", [])
    with pytest.raises(InvalidArgument, match="takes 1..1"):
        dispatch.invoke(stub, "Image:get", ["a", "b"])
    with pytest.raises(InternalError, match="RuntimeError"):
        dispatch.invoke(stub, "Image:get", ["a:1"])
