"""Writing reports: :func:`write_atomic`, the one writer behind ``--output``, ``--json`` and
``--junit-xml``, and :func:`prepare_output`, which readies a report's path before the run so
that a path that cannot be written is refused before any case runs, not after.
:func:`prepare_report_files` and :func:`write_report_files` apply both to a run's set of
report files.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from evalrunner.fixture.load import file_kind
from evalrunner.stop_signals import signals_ignored
from evalrunner.text import (
    control_character,
    describe_character,
    encodable_path,
    printable_path,
)


class UnsafeOutput(OSError):
    """An output path that is refused: it names something that is neither a regular file nor
    a stream, or its file name holds a control character."""


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one.

    The text goes to a temporary file in the same directory, is flushed to disk, then renamed
    over ``path``; on any failure the temporary file is removed and ``path`` is untouched.
    The file gets the permissions a plain write would give it: those of the file it replaces,
    else the default for new files (``0o666`` less the umask), not ``mkstemp``'s private 0600.

    What ``path`` may name, and what happens:

    * a regular file, or nothing: replaced (or created) atomically, as above;
    * a symbolic link: followed, as a shell redirection would; the file it points at (all
      links resolved) is replaced atomically and the link itself stays. A dangling link
      creates its target;
    * a FIFO, a pipe (``/dev/fd/N``, ``>(...)``) or a character device (``/dev/null``, a
      terminal): written directly, in place; a stream has no old version to keep, and a
      device must never be replaced by a file (as root, a rename would do exactly that).
      A FIFO that no process reads is refused rather than waited on;
    * anything else (a directory, a block device, a socket): refused with
      :class:`UnsafeOutput`, nothing written.

    A file name holding a control character or a bidi override is refused too: it is far more
    likely a stray ``\\r`` from a script with CRLF line endings than a name anyone wants.
    """
    _check_name(path)
    try:
        mode: int | None = os.stat(path).st_mode  # through any symlinks
    except FileNotFoundError:
        mode = None  # nothing there yet, or a dangling link: its target is created
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            # Opened by the given name: /dev/fd/N resolves to no path a process could open.
            _write_stream(path, text)
            return
        raise UnsafeOutput(errno.EINVAL, f"{_is_a(mode)}; {_WHAT_OUTPUT_CAN_BE}")
    _replace_file(Path(os.path.realpath(path)), text)


def write_new(path: Path, text: str) -> None:
    """Create ``path`` holding ``text``, whole or not at all, and never over anything: if
    something is there (a file, a link, even one made while this one was written) it is left
    as it is and :class:`FileExistsError` is raised. The text is written to a temporary file
    in the same directory and hard-linked into place, which fails rather than replaces; where
    the file system has no hard links, the file is created exclusively and written."""
    _check_name(path)
    mode = _file_mode(path)
    tmp = _written_beside(path, text, mode)
    try:
        try:
            os.link(tmp, path, follow_symlinks=False)
            return
        except FileExistsError:
            raise
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK):
                raise
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        out = os.open(path, flags, mode)
        with os.fdopen(out, "w", encoding="utf-8") as handle:
            handle.write(text)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _check_name(path: Path) -> None:
    # Bytes that are not UTF-8 are a valid name, just shown escaped; control characters not.
    bad = control_character(encodable_path(path.name))
    if bad is not None:
        raise UnsafeOutput(
            errno.EINVAL,
            f"the file name holds {describe_character(bad)}, a control character; give a "
            "name without it (a script with CRLF line endings adds a \\r)",
        )


_WHAT_OUTPUT_CAN_BE = "give the path of a regular file (or of a FIFO or a terminal)"


def _is_a(mode: int) -> str:
    return f"is {file_kind(mode)}, not a regular file"


def _write_stream(target: Path, text: str) -> None:
    """Write to a FIFO, pipe or character device in place, never blocking on the open."""
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO with no reader: opening it would block
            raise UnsafeOutput(
                errno.ENXIO, "is a FIFO that no process is reading; start the reader first"
            ) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):  # swapped since the stat
            raise UnsafeOutput(errno.EAGAIN, "changed while it was being opened; try again")
        # Blocking again for the writes: a pipe that is momentarily full must be waited on.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def _replace_file(path: Path, text: str) -> None:
    tmp = _written_beside(path, text, _file_mode(path))
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _written_beside(path: Path, text: str, mode: int) -> str:
    """A temporary file in ``path``'s directory holding ``text``, on disk, with ``mode``;
    removed again if any of that fails."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def _file_mode(path: Path) -> int:
    """Permission bits for a report written to ``path``."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def prepare_output(path: Path) -> None:
    """Make ``path`` ready to receive a report, before the run: create its missing parent
    directories, and refuse (:class:`UnsafeOutput`, or the ``OSError`` of the failed step)
    what :func:`write_atomic` would refuse later: a bad file name, a directory or socket, a
    parent that is not a directory or cannot be written.

    Nothing is created but the directories; an existing file is left as it is until the
    report replaces it.
    """
    _check_name(path)
    try:
        mode: int | None = os.stat(path).st_mode  # through any symlinks
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        raise _not_a_directory(path) from None
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            return  # written in place; a FIFO's reader may well start later
        raise UnsafeOutput(errno.EINVAL, f"{_is_a(mode)}; {_WHAT_OUTPUT_CAN_BE}")
    # Through a symlink, the directory that matters is that of the file it points at.
    directory = Path(os.path.realpath(path)).parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a parent is something else
        raise _not_a_directory(directory / path.name) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UnsafeOutput(
            errno.EACCES,
            "its directory is not writable; give a path in a directory you can write to",
        )


def _not_a_directory(path: Path) -> UnsafeOutput:
    """The refusal of a path one of whose parents exists and is not a directory."""
    for parent in reversed(path.parents):
        if os.path.exists(parent) and not os.path.isdir(parent):
            shown = printable_path(parent)
            return UnsafeOutput(
                errno.ENOTDIR,
                f"{shown} is not a directory, so no directory can be made there; give a path "
                "whose parents are directories or do not exist yet",
            )
    return UnsafeOutput(errno.ENOTDIR, "a parent of it is not a directory")


ReportFiles = Mapping[str, Path | None]
"""Report files by the flag (or name) that asked for each; ``None``: not asked for."""


def prepare_report_files(files: ReportFiles) -> list[str]:
    """Before a run: ready each report file (:func:`prepare_output`) and return the problems,
    one line each: a path that cannot be written, and two reports sent to one regular file
    (the second would silently replace the first). Streams (``/dev/null``, a FIFO) may take
    several reports."""
    problems: list[str] = []
    claimed: dict[str, str] = {}
    for flag, path in files.items():
        if path is None:
            continue
        shown = printable_path(path)
        try:
            prepare_output(path)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            problems.append(f"{shown}: cannot write report: {reason}")
            continue
        if os.path.exists(path) and not os.path.isfile(path):
            continue
        real = os.path.realpath(path)
        if real in claimed:
            problems.append(
                f"{shown}: {flag} names the file {claimed[real]} writes; give each report its "
                "own file"
            )
        claimed.setdefault(real, flag)
    return problems


def write_report_files(files: ReportFiles, render: Callable[[str], str]) -> list[str]:
    """Write each report file, ``render(flag)`` giving its text; the problems, one line each
    (a file that fails does not keep the others from being written)."""
    problems = []
    for flag, path in files.items():
        if path is None:
            continue
        try:
            # A report half-renamed by a second Ctrl-C helps nobody; but a stream (a FIFO, a
            # terminal) has nothing to half-rename, and a reader that never reads must not
            # make the run deaf to signals.
            guard = contextlib.nullcontext() if _is_stream(path) else signals_ignored()
            with guard:
                write_atomic(path, render(flag))
        except OSError as exc:
            problems.append(f"{printable_path(path)}: cannot write report: {exc.strerror or exc}")
    return problems


def _is_stream(path: Path) -> bool:
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)
