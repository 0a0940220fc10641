import numpy as np
import pytest

from algorithms.collab_rf import registry as reg


def est(creator, counter):
    return {"creator": creator, "counter": counter, "value": np.zeros(1)}


def test_paper_slot_is_overwritten_and_read_does_not_clear():
    r = reg.new_registry("paper")
    r = reg.write(r, "b", [est("b", 0), est("b", 1)])
    r = reg.write(r, "c", [est("c", 0)])
    r = reg.write(r, "b", [est("b", 2)])  # second SHARE from b replaces its slot
    got, r2 = reg.read(r)
    assert [(e["creator"], e["counter"]) for e in got] == [("b", 2), ("c", 0)]
    assert reg.size(r2) == 2 and reg.read(r2)[0] == got


def test_code_inbox_unions_by_id_and_read_clears():
    r = reg.new_registry("code")
    r = reg.write(r, "b", [est("b", 0), est("b", 1)])
    r = reg.write(r, "b", [est("b", 2), est("b", 0)])
    r = reg.write(r, "c", [est("c", 0)])
    got, r2 = reg.read(r)
    assert [(e["creator"], e["counter"]) for e in got] == [("b", 0), ("b", 1), ("b", 2), ("c", 0)]
    assert reg.size(r2) == 0 and reg.read(r2)[0] == []


def test_paper_bound_n_share_times_senders():
    r = reg.new_registry("paper")
    for rnd in range(5):
        for s in "bcd":
            r = reg.write(r, s, [est(s, 3 * rnd + i) for i in range(3)])
            assert reg.size(r) <= 3 * 3


def test_validation():
    with pytest.raises(ValueError, match="semantics"):
        reg.new_registry("gossip")
    with pytest.raises(ValueError, match="sender"):
        reg.write(reg.new_registry(), "", [])
