"""The Secure Container Executor (docs/executor.md, docs/design.md "Execution"; seed 003 §IV-B/C, Fig. 2).

By role: :mod:`executor.images` builds algorithm images, distributes them by digest and verifies the
one a learning process pins; :mod:`executor.node` is an organisation's node -- the agent that follows
the ledger and runs each open round for its organisation, its task journal, round files and events,
its worker pool and command line; :mod:`executor.runtimes` runs a task isolated in a container or a
bubblewrap sandbox. Each task gets a fresh key pair (:mod:`executor.task_keys`; one task on the host:
:mod:`executor.tasks`); outputs go to the organisation's artifact store, messages sealed to their
recipient (:mod:`exchange.store`). :mod:`executor.process` launches a process and collects its models.
"""
