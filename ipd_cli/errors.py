"""Exit codes and the user-facing error type.

An :class:`IpdError` carries one line for the user and the exit code; the CLI
prints the line on stderr and exits with the code, never a traceback (unless
``IPD_DEBUG=1``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from enum import IntEnum

MAX_MESSAGE_CHARS = 2000
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Control characters escaped (a file, key or value may hold a newline), long text cut."""
    text = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ExitCode(IntEnum):
    OK = 0
    RUNTIME = 1  # infeasible request, failure while computing
    USAGE = 2  # bad command line, bad input file or value
    BUDGET_EXCEEDED = 3  # reserved for the --max-usd gate
    INTERRUPTED = 130  # 128 + SIGINT; SIGHUP exits 129, SIGTERM 143


class IpdError(Exception):
    """An error the user can fix; ``str(err)`` is the whole message."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(one_line(str(message)))
        if exit_code is not None:
            self.exit_code = exit_code


class InputError(IpdError):
    """Bad input: unknown name, invalid file or value (exit 2)."""


class InfeasibleError(IpdError):
    """A valid request that cannot be met (model does not fit, deadline unreachable): exit 1."""

    exit_code = ExitCode.RUNTIME


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP arrived (see :mod:`ipd_cli.signals`): exit 128 + the signal.

    A BaseException, like KeyboardInterrupt, so that ``except Exception`` does not swallow it.
    """

    def __init__(self, signum: int) -> None:
        import signal

        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        super().__init__(name)
        self.signum = signum
        self.name = name
        self.exit_code = 128 + signum


def did_you_mean(word: object, choices: Iterable[object]) -> str:
    """'; did you mean 'x'?' when a close match exists, else a list of valid choices."""
    names = sorted({str(c) for c in choices})  # YAML keys may be numbers or null
    close = difflib.get_close_matches(str(word), names, n=1, cutoff=0.5)
    if close:
        return f"; did you mean '{close[0]}'?"
    shown = ", ".join(names[:12])
    return f"; choose one of: {shown}" if shown else ""


def unknown(kind: str, word: str, choices: Iterable[object]) -> InputError:
    return InputError(f"unknown {kind} '{word}'{did_you_mean(word, choices)}")
