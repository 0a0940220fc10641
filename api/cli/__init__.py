"""The ``consortia`` command line (Typer + Rich): every user journey of docs/design.md plus operations.

One module per command group (:mod:`api.cli.images`, :mod:`~api.cli.processes`, ...), one session per
command (:func:`api.cli.session.session`), one way to answer (:mod:`api.cli.output`: exit codes, errors on
stderr, ``--json``). docs/cli.md documents the commands and conventions.
"""

from api.cli.main import app, main, version

__all__ = ["app", "main", "version"]
