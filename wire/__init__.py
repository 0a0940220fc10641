"""The project's leaf package: conventions every layer shares, with no project imports.

``chaincode`` and ``algorithms`` import no other project package except this one (the one documented
exception, docs/architecture.md), and the algorithm images bundle it next to ``algorithms``:

- :mod:`wire.canonical` -- canonical JSON and SHA-256 digests (what is signed and hashed);
- :mod:`wire.env` -- the environment variables the project reads, in one typed place;
- :mod:`wire.memo` -- bounded memo tables for values derived from exact bytes;
- :mod:`wire.timing` -- per-thread timers of where a node agent's time goes (the store, the workers
  and the node report into one profile).
"""
