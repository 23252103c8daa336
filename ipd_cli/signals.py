"""SIGINT, SIGTERM and SIGHUP: stop cleanly, keep only whole output, exit 128 + the signal.

The CLI installs one handler for the three signals (:func:`installed`). It raises
:class:`~ipd_cli.errors.Interrupted`, so that every ``finally`` on the way out runs: temporary
files are removed, or a sweep's complete rows are closed and kept. While output is being
written (:func:`deferred`), the first signal is only recorded; the writer finishes the row it
is in, then stops (:func:`pending`, :func:`check`). A second signal stops at once.
A signal that was ignored when ipd started (``nohup``, a background job) stays ignored.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ipd_cli.errors import Interrupted

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

_depth = 0
_pending: int | None = None


def _handler(signum: int, frame: Any) -> None:
    global _pending
    if _depth and _pending is None:
        _pending = signum  # the writer stops after the row it is writing
        return
    raise Interrupted(signum)


@contextmanager
def installed() -> Iterator[None]:
    """The handler for SIGINT, SIGTERM and SIGHUP while the block runs (main thread only)."""
    global _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}
    for sig in SIGNALS:
        current = signal.getsignal(sig)
        if current is not signal.SIG_IGN:
            old[sig] = current
            signal.signal(sig, _handler)
    _pending = None
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)  # None: set outside Python


@contextmanager
def deferred() -> Iterator[None]:
    """A block that a first signal does not cut: it is raised when the block ends."""
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
    if not _depth:
        check()


def pending() -> bool:
    """Whether a signal arrived during a deferred block (the writer should stop at a row end)."""
    return _pending is not None


def check() -> None:
    """Raise the signal that arrived during a deferred block, if any."""
    global _pending
    if _pending is not None and not _depth:
        signum, _pending = _pending, None
        raise Interrupted(signum)


def discard_stdout() -> None:
    """Point stdout's descriptor at /dev/null, so what is still buffered goes nowhere rather than
    to a second error when Python flushes stdout at exit (a reader gone, a full disk). A stream
    without a descriptor is left as it is."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        pass
