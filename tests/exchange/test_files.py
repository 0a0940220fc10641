"""Private files of a store: 0600 files in 0700 directories, written whole or not at all."""

from __future__ import annotations

import pytest

from exchange.files import make_private_dirs, write_private_file, write_private_stream


def test_files_are_0600_in_0700_directories(tmp_path):
    tmp_path.chmod(0o755)
    top = tmp_path / "Org1MSP"
    path = top / "a" / "b" / "file"
    write_private_file(path, b"bytes", top)
    assert path.read_bytes() == b"bytes" and path.stat().st_mode & 0o777 == 0o600
    for d in (top, top / "a", top / "a" / "b"):
        assert d.stat().st_mode & 0o777 == 0o700, d
    assert tmp_path.stat().st_mode & 0o777 == 0o755  # above ``top``: left alone


def test_a_loose_directory_is_tightened(tmp_path):
    top = tmp_path / "Org1MSP"
    (top / "x").mkdir(parents=True)
    (top / "x").chmod(0o755)
    make_private_dirs(top / "x" / "y", top)
    assert (top / "x").stat().st_mode & 0o777 == 0o700


def test_a_failed_write_leaves_nothing(tmp_path):
    path = tmp_path / "d" / "file"

    def half(f):
        f.write(b"half")
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        write_private_stream(path, half, tmp_path)
    assert not path.exists() and not list((tmp_path / "d").iterdir())
    write_private_file(path, b"old", tmp_path)
    with pytest.raises(OSError):
        write_private_stream(path, half, tmp_path)
    assert path.read_bytes() == b"old"  # the previous file stays whole


def test_a_directory_removed_since_it_was_made_is_made_again(tmp_path):
    path = tmp_path / "d" / "file"
    write_private_file(path, b"one", tmp_path)
    path.unlink()
    (tmp_path / "d").rmdir()
    write_private_file(path, b"two", tmp_path)
    assert path.read_bytes() == b"two"
