"""``python -m kmq.cli``: the ``kmq`` command."""

from kmq.cli import main

main()
