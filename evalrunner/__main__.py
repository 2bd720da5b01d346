"""``python -m evalrunner`` and the ``evalrunner`` script: the command line.

``--version`` is answered here, before the command line (typer, the pipeline) is
imported: a version check in a CI step costs a Python start and nothing more.

Everything else runs in a child process that this one supervises
(:mod:`evalrunner.process_supervisor`), forked before the command line or any project code is
imported: the exit code is then the run's verdict, whatever that code does to its process.
"""

import gc
import sys


def main() -> None:
    """Console-script entry point."""
    if sys.argv[1:] == ["--version"] and _said_version():
        return
    from evalrunner import process_supervisor

    if process_supervisor.can_supervise():
        process_supervisor.supervise(_command_line)
    else:
        _command_line()


def _command_line() -> None:
    from evalrunner.cli import main as command_line

    # This process is evalrunner's alone, so the collector is tuned for it. What the imports
    # built (modules, classes, compiled schemas) lives until exit: frozen, the collector never
    # walks it again, and forked --jobs workers do not copy the pages a walk would touch.
    gc.freeze()
    try:
        command_line()
    finally:
        # Teardown frees modules one by one, each a cue for a collection that would walk
        # everything still alive, a large share of a small run's time; all of it is about to go.
        gc.freeze()


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
