"""Where rendered output goes: stdout, or a file written atomically; and the budget gate."""

from __future__ import annotations

import io
import math
import os
import stat
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipd_cli import signals
from ipd_cli.errors import ExitCode, InputError, Interrupted, IpdError, did_you_mean
from ipd_cli.files import kind
from ipd_cli.render import DOCUMENT_FORMATS, EXTENSION_FORMATS, STREAM_FORMATS, OutputContext, render
from ipd_cli.render.stream import check_chunk, chunk_pieces, rows_in, small_table

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic import BaseModel


class Folded(str):
    """A -f value in lower case, as the commands read it, that keeps how it was typed for the
    message that refuses it (-f XLSX was refused as 'xlsx')."""

    typed: str


def folded_format(value: str) -> str:
    """-f/--format in any case (the option's callback and the stored-listing path)."""
    folded = Folded(value.lower())
    folded.typed = value
    return folded


def format_for(fmt: str, output: Path | None, allowed: tuple[str, ...] | None = None) -> str:
    """--format wins; with `auto` and a file, the extension picks the format (``allowed``: the
    formats the command writes, whose extensions an unknown one is told)."""
    if fmt != "auto" or output is None or str(output) == "-":
        return fmt
    ext = output.suffix.lower()
    if ext not in EXTENSION_FORMATS:
        exts = [e for e, f in EXTENSION_FORMATS.items() if allowed is None or f in allowed]
        raise InputError(
            f"{output}: cannot tell the format from '{ext or 'no extension'}'; add --format or use one of "
            f"{', '.join(exts)}"
        )
    return EXTENSION_FORMATS[ext]


def check_format(fmt: str, output: Path | None, *, stream: bool = False, to_files: bool = True) -> str:
    """The format a command will write, refused before anything is computed when it is unknown,
    cannot go where it is sent (xlsx needs a file), or disagrees with the file's name (a .xlsx file
    holds xlsx, nothing else). ``to_files``: whether the command has -o at all."""
    allowed: tuple[str, ...] = STREAM_FORMATS if stream else DOCUMENT_FORMATS
    if not to_files:
        allowed = tuple(f for f in allowed if f != "xlsx")
    chosen = format_for(fmt, output, allowed)
    if chosen != "auto" and chosen not in allowed:
        what = " for a sweep" if stream else ""
        if fmt == "auto" and output is not None:  # the file's extension picked it
            raise InputError(
                f"{output}: {chosen} is not a format{what}; name a file ending in one of "
                f"{', '.join(e for e, f in EXTENSION_FORMATS.items() if f in allowed)}, or give --format"
            )
        typed = getattr(fmt, "typed", fmt)
        choose = f"choose one of: auto, {', '.join(allowed)}"
        if chosen == "xlsx":  # it was "unknown format 'xlsx'" (the input review's leftovers)
            raise InputError(
                f"--format {typed}: xlsx is a binary format, and this command prints to stdout only "
                f"(it has no -o); {choose}"
            )
        raise InputError(f"unknown format '{typed}'{what}; {choose}")
    xlsx_file = output is not None and str(output) != "-" and output.suffix.lower() == ".xlsx"
    if chosen == "xlsx" and not xlsx_file:
        raise InputError("xlsx is a binary format: give -o FILE.xlsx")
    if xlsx_file and chosen != "xlsx":
        raise InputError(f"{output}: a .xlsx file holds an xlsx workbook, not {chosen}; use --format xlsx")
    if chosen == "xlsx":
        from ipd_cli.render.xlsx import check_installed

        check_installed()
    return chosen


def check_target(output: Path | None, force: bool) -> None:
    """Refuse early (before computing) what :func:`_target` would refuse when writing."""
    if output is None or str(output) == "-":
        return
    _target(output, force)


@dataclass(frozen=True)
class _Target:
    """Where output goes: a regular file replaced atomically, or a FIFO or character device
    (``/dev/stdout``, ``>(gzip > x.gz)``) written in place, like stdout."""

    path: Path  # for a symbolic link to a regular file: the file it names
    special: bool = False


def _target(output: Path, force: bool) -> _Target:
    """What writing ``output`` means; refuses directories, block devices, sockets, dangling
    links and (without ``force``) existing files. Never renames over a link or a device."""
    try:
        link = os.lstat(output)
    except FileNotFoundError:
        return _Target(_writable_dir(output))
    except OSError as e:
        raise InputError(f"{output}: cannot use it ({e.strerror or e})") from None
    mode = link.st_mode
    if stat.S_ISLNK(mode):
        try:
            mode = os.stat(output).st_mode
        except FileNotFoundError:
            raise InputError(
                f"{output}: a symbolic link to a missing file ({os.readlink(output)}); give that path"
            ) from None
        except OSError as e:
            raise InputError(f"{output}: cannot use it ({e.strerror or e})") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{output}: is a directory; give a file name")
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return _Target(output, special=True)  # nothing is replaced: written like stdout
    if not stat.S_ISREG(mode):
        raise InputError(f"{output}: is {kind(mode)}; ipd writes regular files, FIFOs and character devices")
    if not force:
        raise InputError(f"{output}: already exists; add --force to replace it")
    if stat.S_ISLNK(link.st_mode):
        # the file the link names is replaced and the link kept; opening it first lets the kernel
        # refuse a link it protects (fs.protected_symlinks: a link planted in /tmp)
        try:
            os.close(os.open(output, os.O_WRONLY | getattr(os, "O_NOCTTY", 0)))
        except OSError as e:
            raise InputError(f"{output}: cannot write through this link ({e.strerror or e})") from None
        return _Target(_writable_dir(Path(os.path.realpath(output))))
    return _Target(_writable_dir(output))


def _writable_dir(path: Path) -> Path:
    """``path`` if a temporary file can be made next to it."""
    parent = path.parent
    if not parent.is_dir():
        raise InputError(f"{parent}: no such directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{parent}: cannot write in this directory (permission denied); choose another")
    return path


def _new_file_mode(path: Path) -> int:
    """mkstemp makes 0600 files; a written report gets the mode a plain open() would give it."""
    try:
        return path.stat().st_mode & 0o777  # --force keeps the replaced file's mode
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _temp_for(path: Path) -> tuple[int, str]:
    try:
        import tempfile

        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise InputError(f"{path.parent}: cannot write in this directory ({e.strerror or e})") from None
    os.fchmod(fd, _new_file_mode(path)) if hasattr(os, "fchmod") else os.chmod(tmp, _new_file_mode(path))
    return fd, tmp


def _open_special(path: Path) -> int:
    try:
        return os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        raise InputError(f"{path}: cannot write ({e.strerror or e})") from None


def _write_all(fd: int, data: bytes | memoryview, path: Path | str) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view[:_SLICE]) :]
    except BrokenPipeError:
        raise
    except OSError as e:
        raise IpdError(f"{path}: could not write ({e.strerror or e})", ExitCode.RUNTIME) from None


_SLICE = 1 << 20  # between two slices a pending signal is looked at


def write_bytes(output: Path, data: bytes) -> None:
    """Write ``data`` to ``output``: a regular file atomically (temporary file in the same
    directory, then rename: readers never see half a file), a FIFO or device in place.

    A first signal waits until the file is whole (or gone); a second stops at once.
    """
    t = _target(output, force=True)  # the command checked --force before computing
    with signals.deferred():
        if t.special:
            fd = _open_special(t.path)
            try:
                _write_all(fd, data, output)
            finally:
                os.close(fd)
            return
        fd, tmp = _temp_for(t.path)
        try:
            try:
                _write_all(fd, data, output)
            finally:
                os.close(fd)
            os.replace(tmp, t.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def write_atomic(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_stdout(text: str) -> None:
    """A document on stdout, whole: a first signal waits for the end of it. On a terminal or
    pipe that cannot encode it (PYTHONIOENCODING=ascii), characters are escaped, not fatal."""
    with signals.deferred():
        try:
            try:
                sys.stdout.write(text)
            except UnicodeEncodeError:
                encoding = getattr(sys.stdout, "encoding", None) or "ascii"
                sys.stdout.write(text.encode(encoding, "backslashreplace").decode(encoding))
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as e:  # `> /dev/full`: one line, and nothing left to fail again at exit
            signals.discard_stdout()
            raise IpdError(
                f"could not write to standard output ({e.strerror or e}); give -o FILE elsewhere",
                ExitCode.RUNTIME,
            ) from None


def _not_finite(
    node: Any, isfinite: Callable[[float], bool] = math.isfinite
) -> tuple[list[Any], float] | None:
    """The first NaN or infinite number in a dumped result: the keys down to it, deepest first,
    and the number. Only what is found gets a path: one built at every node made the walk over a
    comparison's dump 2.4 ms, 1.4 ms without; a tuple of the container types (``dict | list``
    built a union object at each value) and ``isfinite`` bound once made it 0.9 ms."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        if isinstance(value, float):
            if not isfinite(value):
                return [key], value
        elif isinstance(value, (dict, list)):
            found = _not_finite(value)
            if found:
                found[0].append(key)
                return found
    return None


def check_finite(result: BaseModel) -> None:
    """Refuse to print NaN or infinity: a silent wrong number is worse than an error."""
    found = _not_finite(result.model_dump(mode="python"))
    if found:
        keys, value = found
        where = ""
        for key in reversed(keys):
            where = f"{where}.{key}" if where else str(key)
        raise IpdError(
            f"the result is not a finite number: {where} is {value}; an input is out of range "
            "(check tokens, specs and prices)",
            ExitCode.RUNTIME,
        )


def write_xlsx(result: BaseModel, path: Path) -> None:
    """The result as an xlsx workbook, written atomically."""
    from ipd_cli.render.xlsx import workbook

    buf = io.BytesIO()
    workbook(result).save(buf)
    write_bytes(path, buf.getvalue())


def emit(
    result: BaseModel,
    fmt: str,
    ctx: OutputContext,
    output: Path | None = None,
    data: dict[str, Any] | None = None,
) -> Path | None:
    """Render ``result`` to stdout or, atomically, to ``output``; the file written, if any (the
    caller says so with :func:`wrote`, after its notes). ``data``: the result's
    ``model_dump(mode="json")`` where the caller has it (read, never changed)."""
    # the Python dump: the JSON one writes an untyped field's NaN (a listing item's) as null
    check_finite(result)
    fmt = format_for(fmt, output)
    if fmt == "xlsx":
        if output is None or str(output) == "-":
            raise InputError("xlsx is a binary format: give -o FILE.xlsx")
        write_xlsx(result, output)
        return output
    to_stdout = output is None or str(output) == "-"
    text = render(result, fmt, ctx if to_stdout else replace(ctx, ascii_only=False), data)  # files: UTF-8
    if output is None or to_stdout:
        write_stdout(text)
        return None
    write_atomic(output, text)
    return output


def wrote(path: Path, rows: int | None = None) -> None:
    """The line every command prints on stderr once its file is complete, after its warnings and
    notes (an audit: it had no ``ipd:`` prefix, and compare printed it before its notes where sweep
    printed it after its warnings)."""
    counted = "" if rows is None else f" ({rows:,} rows)"
    sys.stderr.write(f"ipd: wrote {path}{counted}\n")


def check_budget_options(max_usd: float | None, metric: str | None) -> None:
    """--max-usd and --budget-metric, checked before anything is computed."""
    if max_usd is not None and not (math.isfinite(max_usd) and max_usd >= 0):
        raise InputError(f"--max-usd must be a finite number >= 0, got {max_usd}")
    if metric is not None and max_usd is None:
        raise InputError(
            f"--budget-metric {metric} needs --max-usd USD (the budget it checks); give both, or drop "
            "--budget-metric"
        )
    if metric is not None:
        from ipd_cli.engine.results import SystemResult, metric_paths

        known = metric_paths(SystemResult)
        costs = [k for k in known if "usd" in k and "per_kusd" not in k]
        if metric not in known:  # a suggestion among the costs it can check (a review: a count)
            raise InputError(
                f"--budget-metric {metric}: not a metric of the result{did_you_mean(metric, costs)}"
            )
        if metric not in costs:  # --max-usd is in dollars: a rate or a count would pass or fail by accident
            raise InputError(
                f"--budget-metric {metric}: not a cost in USD; --max-usd checks one, e.g. "
                f"{', '.join([c for c in costs if c.count('.') == 1][:5])}"
            )


def budget_values(
    result: BaseModel, metric: str, unchecked: list[str] | None = None, example: str = "pretraining.cost_usd"
) -> list[tuple[str, float]]:
    """(label, value) of a dotted metric (e.g. pretraining.cost_usd) for each system of a result;
    a system whose block could not be computed (null) has nothing to check (its name goes to
    ``unchecked``). ``example``: the metric the refusal suggests (this result's default)."""
    data = result.model_dump(mode="json")
    rows = data["systems"] if "systems" in data else [data]
    out = []
    for row in rows:
        node: Any = row
        for key in metric.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if node is None and row.get("infeasible"):
            if unchecked is not None:
                unchecked.append(str(row.get("hardware", "")))
            continue
        if not isinstance(node, int | float):
            blocks = sorted(k for k, v in row.items() if v and isinstance(v, dict) and k != "infeasible")
            raise InputError(
                f"--budget-metric {metric}: not a number in this output (its blocks: {', '.join(blocks)}); "
                f"e.g. --budget-metric {example}"
            )
        out.append((str(row.get("hardware", "")), float(node)))
    return out


def check_budget(result: BaseModel, max_usd: float | None, metric: str) -> None:
    """Exit 3 (after the output is written) when any system's metric exceeds the budget."""
    if max_usd is None:
        return
    check_budget_options(max_usd, None)
    unchecked: list[str] = []
    over = [(label, v) for label, v in budget_values(result, metric, unchecked) if v > max_usd]
    for hw in unchecked:  # a gate that checks nothing there should not read as passed
        sys.stderr.write(f"ipd: warning: budget gate: {hw} not checked: its {metric} cannot be computed\n")
    if over:
        detail = ", ".join(f"{label} {_over(v, max_usd)}" for label, v in over)
        raise IpdError(
            f"budget exceeded: {metric} > {max_usd:,.15g} USD ({detail})",
            ExitCode.BUDGET_EXCEEDED,
        )


def _usd(v: float, digits: int = 3) -> str:
    """``v`` with at least ``digits`` significant digits, whole dollars from 10**digits up
    (1.07, 0.228, 2,380, 156,825,741)."""
    if v == 0 or not math.isfinite(v):
        return f"{v:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    return f"{v:,.{decimals}f}"


def _over(v: float, limit: float) -> str:
    """A value over the budget, with the digits that tell it from the budget (1.0004 > 1)."""
    for digits in range(3, 16):
        if _usd(v, digits) != _usd(limit, digits):
            break
    return _usd(v, digits)


def _row_end(data: bytes, p: int, fmt: str) -> int:
    """The first row boundary at or after byte ``p`` of a chunk's text.

    csv and jsonl rows end with a newline; json rows are separated by ",\\n" (the first follows
    "[\\n") and hold no raw newline; any other text (``fmt`` "whole") is written whole.
    """
    if fmt not in ("csv", "jsonl", "json"):
        return len(data)
    if p == 0 or p >= len(data):
        return p
    if fmt == "json":
        i = data.find(b",\n", p)
        return len(data) if i < 0 else i
    if data[p - 1 : p] == b"\n":
        return p
    i = data.find(b"\n", p)
    return len(data) if i < 0 else i + 1


class _RowSink:
    """Streamed rows into a file descriptor, stopping only at row boundaries.

    ``whole`` is True while the bytes out end at a row boundary: a signal during a write is
    deferred, the row in flight is finished, then the signal is raised; only a second signal
    cuts a row (``whole`` stays False and a temporary file is then removed, not kept).
    """

    def __init__(self, target: _Target | None) -> None:
        self.target, self.tmp, self.stream, self.whole, self.started = target, None, None, True, False
        self.encoding = "utf-8"
        if target is None:
            try:
                sys.stdout.flush()
                self.fd = sys.stdout.fileno()
                self.encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
            except (AttributeError, OSError, ValueError):  # a text stream without a descriptor
                self.fd, self.stream = -1, sys.stdout
        elif target.special:
            self.fd = _open_special(target.path)
        else:
            self.fd, self.tmp = _temp_for(target.path)

    def write(self, text: str, fmt: str) -> None:
        if self.stream is not None:
            self.stream.write(text)
            self.started = self.started or bool(text)
            return
        self.write_bytes(text.encode("utf-8", "backslashreplace"), fmt)

    def write_bytes(self, data: bytes, fmt: str) -> None:
        """UTF-8 ``data`` (re-encoded for a terminal that cannot take it), whole rows only."""
        if self.stream is not None:
            self.write(data.decode("utf-8"), fmt)
            return
        if self.encoding.lower().replace("-", "") != "utf8" and not data.isascii():
            data = data.decode("utf-8").encode(self.encoding, "backslashreplace")
        view, p = memoryview(data), 0
        self.whole = False
        with signals.deferred():
            while p < len(data):
                if signals.pending():
                    end = _row_end(data, p, fmt)
                    _write_all(self.fd, view[p:end], self.name)
                    p = end
                    break
                _write_all(self.fd, view[p : p + _SLICE], self.name)
                p = min(p + _SLICE, len(data))
            self.whole = True
            self.started = self.started or p > 0

    @property
    def name(self) -> str:
        return "<stdout>" if self.target is None else str(self.target.path)

    def close(self, keep: bool) -> None:
        """Close; a temporary file is renamed into place when ``keep``, else removed."""
        if self.target is None:
            return
        with signals.deferred():
            os.close(self.fd)
            if self.tmp is None:
                return
            if keep:
                os.replace(self.tmp, self.target.path)
            else:
                Path(self.tmp).unlink(missing_ok=True)


def stream_rows(chunks, fmt: str, ctx: OutputContext, output: Path | None = None, progress=None) -> int:
    """Write column chunks as csv/jsonl/json (streamed), table/markdown (small results) or an xlsx
    workbook (``-o FILE.xlsx``; a sweep's ``results`` give its inputs and sources sheets).

    Rows are written whole, chunk by chunk. On SIGINT, SIGTERM or SIGHUP (or KeyboardInterrupt)
    the rows written so far stay and stay valid: the row in flight is finished, a JSON array is
    closed, and with -o the file is renamed into place; then the interruption is raised again.
    On an error, -o leaves no file. Returns the number of rows written.
    """
    fmt = "table" if fmt == "auto" and ctx.is_tty else ("csv" if fmt == "auto" else fmt)
    if fmt not in STREAM_FORMATS:
        raise InputError(f"unknown format '{fmt}' for a sweep; choose one of: {', '.join(STREAM_FORMATS)}")
    if fmt == "xlsx":
        return _stream_xlsx(chunks, output, progress)
    target = None if output is None or str(output) == "-" else _target(output, force=True)
    if target is not None:
        ctx = replace(ctx, ascii_only=False)  # files are UTF-8
    sink = _RowSink(target)
    rows = 0
    buffered: list[dict] = []
    stop: BaseException | None = None
    keep = False
    try:
        try:
            for cols in chunks:
                check_chunk(cols, rows)
                if fmt in ("table", "markdown"):
                    buffered.append(cols)
                else:
                    for piece in chunk_pieces(cols, fmt, first=rows == 0):
                        sink.write_bytes(piece, fmt)
                rows += rows_in(cols)
                if progress:
                    progress(rows)
        except (KeyboardInterrupt, Interrupted) as e:
            stop = e
            if not sink.whole:  # a second signal cut a row: nothing valid to keep
                raise
        with signals.deferred():  # the end is written whole, and the file kept, whatever comes
            if fmt == "json":
                sink.write("\n]\n" if sink.started else "[]\n", "whole")
            elif fmt in ("table", "markdown"):
                sink.write(small_table(buffered, fmt, ctx), "whole")
            keep = True
    finally:
        sink.close(keep)  # whole, or cut by a signal after whole rows: keep it; an error: remove
    if stop is not None:
        raise stop
    return rows


def _stream_xlsx(chunks, output: Path | None, progress=None) -> int:
    """The rows into a workbook (openpyxl's write-only mode: rows are not held as cells), written
    atomically at the end; an interruption keeps the complete rows, like the text formats."""
    from ipd_cli.render.xlsx import SweepBook

    if output is None or str(output) == "-":
        raise InputError("xlsx is a binary format: give -o FILE.xlsx")
    _target(output, force=True)
    book = SweepBook()
    rows = 0
    stop: BaseException | None = None
    try:
        for cols in chunks:
            check_chunk(cols, rows)
            book.add(cols)
            rows += rows_in(cols)
            if progress:
                progress(rows)
    except (KeyboardInterrupt, Interrupted) as e:
        stop = e
        if not book.whole:  # a second signal cut a row: nothing valid to keep
            book.discard()
            raise
    except BaseException:
        book.discard()
        raise
    with signals.deferred():
        plan = getattr(chunks, "plan", None)  # a sweep's: the inputs its axes vary are marked
        axes = {a.path: a.values for a in plan.numeric} if plan is not None else {}
        data = book.finish(getattr(chunks, "inputs", None) or [], axes)
    write_bytes(output, data)
    if stop is not None:
        raise stop
    return rows
