"""``wire.memo.Memo``: values are made once per key, and the table never grows past its bound."""

from __future__ import annotations

from wire.memo import Memo


def test_made_once_per_key_and_bounded():
    made: list[int] = []
    memo: Memo[int, int] = Memo(3)

    def make(k: int):
        return lambda: made.append(k) or k * 10

    assert [memo.get_or_make(k, make(k)) for k in (1, 2, 1, 2)] == [10, 20, 10, 20]
    assert made == [1, 2]
    for k in (3, 4, 5):
        memo.get_or_make(k, make(k))
    assert len(memo) <= 3  # cleared when full, then refilled
    assert memo.get_or_make(1, make(1)) == 10 and made[-1] == 1  # recomputed after the clear
    assert memo.remember(9, 90) == 90 and memo[9] == 90
