"""The Consortia home, at the top of the stack: everything that is read from a home folder and its
``consortia.toml`` (with the environment's overrides) is read here, and the layers below are given
what they need.

Modules:

* :mod:`home.layout` -- where things live in a home (:class:`~home.layout.Layout`), ``$CONSORTIA_HOME``;
* :mod:`home.settings` -- ``consortia.toml``: its schema (pydantic-settings, TOML source, unknown or
  mistyped keys reported), :func:`~home.settings.load` and the writer (tomli-w);
* :mod:`home.ledger` -- :func:`~home.ledger.open_ledger`, the one way to open a home's ledger;
* :mod:`home.create` -- ``consortia init`` (a new consortium, or a home on a running Fabric network);
* :mod:`home.join` -- ``consortia join`` (the home of one organisation of an existing consortium);
* :mod:`home.agent` -- :func:`~home.agent.build_agent`, the one way to build a node agent (its places,
  :class:`~home.agent.NodePlaces`, from a home or given one by one), as
  :func:`~home.ledger.open_ledger` is for ledgers;
* :mod:`home.platform` -- :class:`~home.platform.Platform`, where the nodes of a consortium simulated on
  one machine keep their things (the demo, benchmarks, end-to-end tests);
* :mod:`home.errors` -- what goes wrong with a home.
"""
