"""The embedded ledger host (see :mod:`ledger.embedded.ledger`)."""

from ledger.embedded.ledger import EmbeddedLedger

__all__ = ["EmbeddedLedger"]
