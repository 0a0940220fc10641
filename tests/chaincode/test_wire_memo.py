"""``wire.memo.Memo``: values are made once per key, and the table never grows past its bound."""

from __future__ import annotations

import pytest

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


def test_read_file_sees_a_replaced_or_rewritten_file_at_once(tmp_path, monkeypatch):
    import builtins
    import os

    from wire.memo import read_file

    p = tmp_path / "cert.pem"
    p.write_bytes(b"first")
    opened: list[str] = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: opened.append(str(f)) or real_open(f, *a, **k))
    assert read_file(p) == b"first" and read_file(p) == b"first"
    assert opened == [str(p)]  # unchanged: read once
    tmp = tmp_path / "new.pem"
    tmp.write_bytes(b"other")  # same size, new inode
    os.replace(tmp, p)
    assert read_file(p) == b"other"
    st = os.stat(p)
    p.write_bytes(b"third")  # rewritten in place: same size, same inode
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert read_file(p) == b"third"
    p.unlink()
    with pytest.raises(FileNotFoundError):  # a removed file is not served from the memo
        read_file(p)
