"""An organisation's view (network.host_view, docs/fabric.md "Isolated hosts") on real bubblewrap: of
everything the organisations keep, only its own folder exists, wherever the homes are: in the cache
beside the Python environment, under /var/tmp, in a folder of the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks.deployment import Host
from network import REPO_ROOT
from network.host_view import HostViewError, view_command
from tests.ci import require_program
from wire.env import environment

KEY = Path("msp") / "keystore" / "priv_sk"


def _homes(parent: Path) -> tuple[Host, Host]:
    """Org1 and Org2 under ``parent``, each with a private key of its own."""
    root = parent / f"consortium-{uuid.uuid4().hex[:8]}"
    hosts = Host("Org1", 1, root / "hosts" / "Org1", root), Host("Org2", 2, root / "hosts" / "Org2", root)
    for h in hosts:
        (h.home / KEY).parent.mkdir(parents=True)
        (h.home / KEY).write_text(f"{h.name} private key\n")
    (root / "net" / "crypto").mkdir(parents=True)  # what a founder keeps beside the hosts
    (root / "net" / "crypto" / "everyone.key").write_text("founder's copy\n")
    return hosts


PARENTS = {
    "cache": lambda: environment().cache_root,  # beside the Python environment the views show
    "var-tmp": lambda: Path("/var/tmp"),  # not /tmp: the old view hid only /tmp, /var/tmp and /dev/shm
    "checkout": lambda: REPO_ROOT,  # inside a path every view shows read-only (the project's code)
}


@contextmanager
def _consortium(where: str) -> Iterator[tuple[Host, Host]]:
    require_program("bwrap", "an organisation's view")
    parent = PARENTS[where]()
    parent.mkdir(parents=True, exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix=".host-view-", dir=parent))
    try:
        yield _homes(made)
    finally:
        shutil.rmtree(made, ignore_errors=True)


@pytest.fixture(params=list(PARENTS))
def hosts(request) -> Iterator[tuple[Host, Host]]:
    with _consortium(request.param) as made:
        yield made


def _run(host: Host, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(host.argv([sys.executable, "-c", code]), capture_output=True, text=True, timeout=60)


def test_a_view_cannot_read_another_organisations_key_wherever_the_homes_are(hosts):
    org1, org2 = hosts
    assert (org1.home / KEY).read_text() == "Org1 private key\n"  # there, outside the views
    founder = org1.enclosure / "net" / "crypto" / "everyone.key"
    for me, other in ((org2, org1), (org1, org2)):
        got = _run(me, f"print(open({str(other.home / KEY)!r}).read())")
        assert got.returncode != 0 and "FileNotFoundError" in got.stderr, (got.stdout, got.stderr)
        got = _run(me, f"print(open({str(founder)!r}).read())")
        assert got.returncode != 0 and "FileNotFoundError" in got.stderr, (got.stdout, got.stderr)
        listing = _run(me, f"import os; print(sorted(os.listdir({str(me.root.parent)!r})))")
        assert listing.returncode == 0 and listing.stdout.split() == [f"['{me.name}']"], listing
        own = _run(me, f"print(open({str(me.home / KEY)!r}).read(), end='')")  # its own: readable
        assert own.returncode == 0 and own.stdout == f"{me.name} private key\n", own.stderr
        wrote = _run(me, f"open({str(me.home / 'note')!r}, 'w').write('mine')")  # and writable
        assert wrote.returncode == 0 and (me.home / "note").read_text() == "mine", wrote.stderr


def test_a_view_shows_the_system_and_the_project_read_only_and_nothing_else(hosts):
    org1, _ = hosts
    code = (
        "import os, json, network, numpy\n"
        "seen = {p: os.path.exists(p) for p in ('/usr/bin', '/etc', '/home', '/srv', '/var/lib')}\n"
        f"try:\n    open({str(REPO_ROOT / 'README.md')!r}, 'a')\n    seen['repo_writable'] = True\n"
        "except OSError:\n    seen['repo_writable'] = False\n"
        "print(json.dumps(seen))"
    )
    got = _run(org1, code)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == (
        '{"/usr/bin": true, "/etc": true, "/home": false, "/srv": false, '
        '"/var/lib": false, "repo_writable": false}'
    )


def test_a_folder_to_share_that_does_not_exist_is_refused(tmp_path):
    require_program("bwrap", "an organisation's view")
    with pytest.raises(HostViewError, match="does not exist"):
        view_command(["true"], [tmp_path / "absent"])


@pytest.mark.parametrize("where", ["cache", "var-tmp"])
def test_a_view_shows_no_other_folder_without_being_told_which(where):
    """The view itself, no ``hide``: homes outside the paths it shows are absent from it."""
    with _consortium(where) as (org1, org2):
        read = [sys.executable, "-c", f"print(open({str(org1.home / KEY)!r}).read())"]
        got = subprocess.run(view_command(read, [org2.root]), capture_output=True, text=True, timeout=60)
        assert got.returncode != 0 and "FileNotFoundError" in got.stderr, (got.stdout, got.stderr)


def test_a_checkout_under_tmp_is_in_the_view_and_nothing_else_of_tmp(monkeypatch):
    """The view's /tmp is an empty tmpfs of its own; a checkout that lives under /tmp (a clone made
    there) is bound into it, so its commands import the project, while another folder of /tmp stays
    absent."""
    require_program("bwrap", "an organisation's view")
    import network.host_view as host_view

    with tempfile.TemporaryDirectory(prefix="checkout-", dir="/tmp") as checkout:
        with tempfile.TemporaryDirectory(prefix="other-org-", dir="/tmp") as other:
            (Path(checkout) / "README.md").write_text("the project\n")
            (Path(other) / "priv_sk").write_text("another organisation's key\n")
            monkeypatch.setattr(host_view, "REPO_ROOT", Path(checkout))
            code = (
                f"import os; print(open({str(Path(checkout) / 'README.md')!r}).read(), end=''); "
                f"print(os.path.exists({str(Path(other) / 'priv_sk')!r}))"
            )
            got = subprocess.run(
                view_command([sys.executable, "-c", code], []), capture_output=True, text=True, timeout=60
            )
    assert got.returncode == 0, got.stderr
    assert got.stdout == "the project\nFalse\n"
