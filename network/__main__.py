"""``python -m network``: see :mod:`network.cli`."""

from network.cli import main

raise SystemExit(main())
