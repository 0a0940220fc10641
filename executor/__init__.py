"""The Secure Container Executor (docs/executor.md, docs/design.md "Execution"; seed 003 §IV-B/C, Fig. 2).

Images are built locally and verified against the digest a learning process pins
(:mod:`executor.images`); each task gets a fresh key pair (:mod:`executor.task_keys`) and runs in an
isolated container (:mod:`executor.runtimes.container`) or bubblewrap sandbox
(:mod:`executor.runtimes.sandbox`); outputs go to a content-addressed artifact store with
messages sealed to their recipient (:mod:`exchange.store`); the node agent
(:mod:`executor.node_agent`) follows the ledger and runs each open round for its organisation.
"""
