"""``python -m evalrunner`` and the ``evalrunner`` script: the command line.

``--version`` is answered here, before the command line (typer, rich, the pipeline) is
imported: a version check in a CI step costs a Python start and nothing more.
"""

import sys


def main() -> None:
    """Console-script entry point."""
    if sys.argv[1:] == ["--version"] and _said_version():
        return
    from evalrunner.cli import main as command_line

    command_line()


def _said_version() -> bool:
    """Print the version; ``False`` when stdout refuses it (closed or full), so that the full
    command line says why, with its exit code."""
    from evalrunner import __version__

    try:
        sys.stdout.write(f"evalrunner {__version__}\n")
        sys.stdout.flush()
    except (OSError, AttributeError):
        return False
    return True


if __name__ == "__main__":
    main()
