"""``python -m ledger.fabric.network``: see :mod:`ledger.fabric.network.cli`."""

from ledger.fabric.network.cli import main

raise SystemExit(main())
