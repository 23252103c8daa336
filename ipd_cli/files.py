"""Reading input files safely: regular files only, with a size bound.

A FIFO blocks ``open`` until a writer comes and a device such as ``/dev/zero`` never ends, so
every input file (catalog YAML, workload files, ``diff`` JSON, ``plot sweep`` CSV) is opened
without blocking, checked to be a regular file, and read up to a bound. Standard input is
read with ``-`` where a command offers it.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Any

from ipd_cli.errors import InputError


def shown_name(path: Path | str) -> str:
    """A file as messages name it (``-``: standard input, ``<stdin>``)."""
    return "<stdin>" if str(path) == "-" else str(path)


def kind(mode: int) -> str:
    """What a file is, in words, for messages."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def read_stdin_bounded(limit: int) -> bytes:
    """Standard input's bytes, at most ``limit`` of them (``-`` where a command offers it)."""
    import sys

    if sys.stdin is None:
        raise InputError("<stdin>: standard input is closed; give a file")
    buffer = getattr(sys.stdin, "buffer", None)  # none under a text stream (tests, some shells)
    data = (
        buffer.read(limit + 1)
        if buffer is not None
        else sys.stdin.read(limit + 1).encode("utf-8", "surrogateescape")
    )
    if len(data) > limit:
        raise InputError(f"<stdin>: larger than {limit:,} bytes; refusing to read it")
    return data


def read_bounded(path: Path | str, limit: int, name: str | None = None, hint: str = "give a file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; anything else is an InputError.

    Opened with O_NONBLOCK so that a FIFO cannot hang the open; refused unless it is a regular
    file (a symbolic link to one is fine); read with the bound, as a file may grow while read.
    """
    with _open_regular(path, limit, name or str(path), hint, f"{hint} (or - for stdin)") as stream:
        return stream.read(limit + 1)


class _Bounded(io.RawIOBase):
    """A raw binary reader that refuses to go past ``limit`` bytes (a file may grow while read)."""

    def __init__(self, fd: int, limit: int, name: str) -> None:
        self.fd, self.limit, self.name, self.count = fd, limit, name, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            n = os.readv(self.fd, [buffer])
        except OSError as e:
            raise InputError(f"{self.name}: cannot read ({e.strerror or e})") from None
        self.count += n
        if self.count > self.limit:
            raise InputError(f"{self.name}: larger than {self.limit:,} bytes; refusing to read it")
        return n

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


def open_bounded(path: Path | str, limit: int, name: str | None = None, hint: str = "give a file") -> Any:
    """A binary stream over a regular file that fails once more than ``limit`` bytes are read."""
    return _open_regular(path, limit, name or str(path), hint, hint)


def _open_regular(path: Path | str, limit: int, name: str, hint: str, other_hint: str) -> Any:
    """Open without blocking and refuse what is not a regular file of at most ``limit`` bytes
    (``hint``: the fix for a directory, ``other_hint`` for a FIFO, device or socket)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{name}: is a directory; {hint}") from None
    except OSError as e:
        raise InputError(f"{name}: cannot read ({e.strerror or e})") from None
    st = os.fstat(fd)
    problem = None
    if stat.S_ISDIR(st.st_mode):
        problem = f"is a directory; {hint}"
    elif not stat.S_ISREG(st.st_mode):
        problem = f"is {kind(st.st_mode)}, not a regular file; {other_hint}"
    elif st.st_size > limit:
        problem = f"larger than {limit:,} bytes; refusing to read it"
    if problem:
        os.close(fd)
        raise InputError(f"{name}: {problem}")
    return io.BufferedReader(_Bounded(fd, limit, name))
