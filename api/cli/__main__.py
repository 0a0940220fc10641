"""``python -m api.cli``: the ``consortia`` command."""

from api.cli import main

main()
