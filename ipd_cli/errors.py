"""Exit codes and the user-facing error type.

An :class:`IpdError` carries one line for the user and the exit code; the CLI
prints the line on stderr and exits with the code, never a traceback (unless
``IPD_DEBUG=1``).
"""

from __future__ import annotations

import difflib
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    RUNTIME = 1  # infeasible request, failure while computing
    USAGE = 2  # bad command line, bad input file or value
    BUDGET_EXCEEDED = 3  # reserved for the --max-usd gate
    INTERRUPTED = 130


class IpdError(Exception):
    """An error the user can fix; ``str(err)`` is the whole message."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class InputError(IpdError):
    """Bad input: unknown name, invalid file or value (exit 2)."""


class InfeasibleError(IpdError):
    """A valid request that cannot be met (model does not fit, deadline unreachable): exit 1."""

    exit_code = ExitCode.RUNTIME


def did_you_mean(word: str, choices: list[str] | set[str]) -> str:
    """'; did you mean 'x'?' when a close match exists, else a list of valid choices."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.5)
    if close:
        return f"; did you mean '{close[0]}'?"
    shown = ", ".join(sorted(choices)[:12])
    return f"; choose one of: {shown}" if shown else ""


def unknown(kind: str, word: str, choices: list[str] | set[str]) -> InputError:
    return InputError(f"unknown {kind} '{word}'{did_you_mean(word, choices)}")
