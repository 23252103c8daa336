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
    reason: str | None = None  # a validator's own sentence, without the path (catalog.validation_error)

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(one_line(str(message)))
        if exit_code is not None:
            self.exit_code = exit_code


def require_extra(module: str, message: str) -> None:
    """Refuse, with ``message`` (the extra to install), where an optional extra's ``module`` is not
    installed: checked with the options, before anything is computed (a review: a sweep ran its
    estimates for 11 s before saying so)."""
    from importlib.util import find_spec

    if find_spec(module) is None:
        raise IpdError(message)


class InputError(IpdError):
    """Bad input: unknown name, invalid file or value (exit 2)."""


class InfeasibleError(IpdError):
    """A valid request that cannot be met (model does not fit, deadline unreachable): exit 1."""

    exit_code = ExitCode.RUNTIME


MAX_SUGGESTIONS = 4


def _model_tokens(name: str) -> list[str]:
    """The parts of a name that carry a digit (h100, nvl72, 3.1, 8b, fp4): they name the machine."""
    return [t for t in re.split(r"[-_.\s]", name.lower()) if any(ch.isdigit() for ch in t)]


def suggestions(word: object, choices: Iterable[object]) -> list[str]:
    """Names the user may have meant, best first: the same name in another case; names that start
    with the word; names that contain it; then close spellings that keep every model number
    (h100 never suggests v100, gb200 never b200: a different machine is worse than no suggestion)."""
    names = sorted({str(c) for c in choices})  # YAML keys may be numbers or null
    w = str(word).lower()
    same = [n for n in names if n.lower() == w]
    if same:
        return same[:1]
    if len(w) >= 2:
        bare = _bare(w)  # separators dropped: 'llama3' finds 'llama-3.1-8b'
        for found in (
            [n for n in names if n.lower().startswith(w)],
            [n for n in names if w in n.lower()],
            [n for n in names if _bare(n.lower()).startswith(bare)] if len(bare) >= 3 else [],
            # every part in order, versions spelled apart: 'llama3-70b' finds 'llama-3.1-70b', the
            # same generation (its first number) only: 'llama-1-70b' never finds 'llama-3.1-70b'
            [n for n in names if _in_order(_parts(w), _parts(n.lower())) and _generation(w) == _generation(n)]
            if len(_parts(w)) >= 2
            else [],
        ):
            if found:
                return sorted(found, key=lambda n: (len(n), n))[:MAX_SUGGESTIONS]
    lowered = {n.lower(): n for n in names}
    # a name with a model number (h100-pcie) must be nearly the same spelling (not h100-sxm)
    cutoff = 0.8 if _model_tokens(w) else 0.5
    close = difflib.get_close_matches(w, list(lowered), n=MAX_SUGGESTIONS, cutoff=cutoff)
    return [lowered[c] for c in close if _model_tokens(c) == _model_tokens(w)][:1]


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


def counted(n: float, noun: str = "GPUs") -> str:
    """``n`` and its plural noun, singular for one: '1,024 GPUs', '1 GPU', '1 trainer GPU'."""
    return f"{n:,} {noun.removesuffix('s') if n == 1 else noun}"


def count_text(n: float) -> str:
    """A count as a reader checks it against a limit: 100,000,001 (not 1e+08), or 1e+15 when huge."""
    return f"{n:,.0f}" if abs(n) < 1e12 else f"{n:.3g}"


def gb_text(n_bytes: float) -> str:
    """Bytes as GB the way a reader compares them: '73.0', or '1.06e+291' when absurd (a what-if
    model of 1e300 parameters printed 300 digits)."""
    gb = n_bytes / 1e9
    return f"{gb:,.1f}" if abs(gb) < 1e12 else f"{gb:.3g}"


def _parts(name: str) -> list[str]:
    """A name's runs of letters and of digits ('llama-3.1-70b': llama, 3, 1, 70, b)."""
    return re.findall(r"[a-z]+|[0-9]+", name)


def _generation(name: str) -> str | None:
    """A name's first number ('llama-3.1-70b': 3), which tells one generation from another."""
    return next((p for p in _parts(name.lower()) if p.isdigit()), None)


def _in_order(parts: list[str], within: list[str]) -> bool:
    """Whether ``parts`` appear in ``within`` in the same order (not necessarily together)."""
    rest = iter(within)
    return all(p in rest for p in parts)


def _bare(name: str) -> str:
    return re.sub(r"[-_. ]", "", name)


def did_you_mean(word: object, choices: Iterable[object], where: str = "") -> str:
    """'; did you mean 'x'?' when a close match exists, else a list of valid choices (the first
    SHOWN_CHOICES, then how many more and ``where``, e.g. ' (ipd hardware list)')."""
    names = sorted({str(c) for c in choices})
    found = suggestions(word, names)
    if found:
        quoted = [f"'{n}'" for n in found]
        alternatives = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
        return f"; did you mean {alternatives}?"
    shown = ", ".join(names[:SHOWN_CHOICES])
    more = len(names) - SHOWN_CHOICES
    rest = f", ... and {more} more{where}" if more > 0 else ""
    return f"; choose one of: {shown}{rest}" if shown else ""


LISTINGS = {"hardware": "ipd hardware list", "model": "ipd models list", "workload": "ipd workloads list"}
SHOWN_CHOICES = 12


def unknown(kind: str, word: str, choices: Iterable[object]) -> InputError:
    where = f" ({LISTINGS[kind]})" if kind in LISTINGS else ""
    return InputError(f"unknown {kind} '{word}'{did_you_mean(word, choices, where)}")
