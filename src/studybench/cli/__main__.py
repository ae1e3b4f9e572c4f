"""``python -m studybench.cli``."""

from studybench.cli import main

main()
