"""``python -m evalrunner``: the same command line as the ``evalrunner`` script."""

from evalrunner.cli import main

main()
