"""``python -m studybench``: the ``studybench`` command."""

from studybench.cli import main

main()
