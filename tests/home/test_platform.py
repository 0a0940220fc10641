"""home.platform.Platform opened from a Consortia home: the layout and ledger of home/."""

from __future__ import annotations

import pytest

from home.create import init_home
from home.errors import LedgerNotFound
from home.platform import Platform
from home.settings import load


def test_platform_from_home_uses_the_home_layout_and_ledger(tmp_path):
    home = tmp_path / "h"
    init_home(home, ["A", "B"])
    p = Platform.from_home(home)
    try:
        assert p.ledger_path == load(home).ledger_path and list(p.consortium.msp_ids) == ["AMSP", "BMSP"]
        assert p.layout.data("AMSP") == home / "data" / "AMSP" and p.store_root == home / "artifacts"
    finally:
        p.ledger.close()
    (home / "ledger.db").unlink()
    with pytest.raises(LedgerNotFound):
        Platform.from_home(home)
