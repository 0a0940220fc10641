"""Learning algorithms as deterministic step functions (DESIGN.md, "Algorithms").

Nothing here imports ``api``, ``executor`` or ``ledger``.
"""
