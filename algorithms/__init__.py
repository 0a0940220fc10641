"""Learning algorithms as deterministic step functions (docs/design.md, "Algorithms").

Nothing here imports ``api``, ``executor`` or ``ledger``.
"""
