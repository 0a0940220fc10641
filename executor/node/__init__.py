"""One organisation's node: the round state machine (:class:`executor.node.agent.NodeAgent`), its task journal,
round files and events, its worker pool with the spare-worker policy, its command line and the supervisor
that runs every organisation's agent of a process on one machine (docs/executor.md "Node agent")."""
