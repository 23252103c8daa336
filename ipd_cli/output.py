"""Where rendered output goes: stdout, or a file written atomically; and the budget gate."""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ipd_cli.errors import ExitCode, InputError, IpdError, did_you_mean
from ipd_cli.render import DOCUMENT_FORMATS, EXTENSION_FORMATS, STREAM_FORMATS, OutputContext, render
from ipd_cli.render.stream import check_chunk, chunk_text, small_table


def format_for(fmt: str, output: Path | None) -> str:
    """--format wins; with `auto` and a file, the extension picks the format."""
    if fmt != "auto" or output is None or str(output) == "-":
        return fmt
    ext = output.suffix.lower()
    if ext not in EXTENSION_FORMATS:
        raise InputError(
            f"{output}: cannot tell the format from '{ext or 'no extension'}'; add --format or use one of "
            f"{', '.join(EXTENSION_FORMATS)}"
        )
    return EXTENSION_FORMATS[ext]


def check_format(fmt: str, output: Path | None, *, stream: bool = False, to_files: bool = True) -> str:
    """The format a command will write, refused before anything is computed when it is unknown,
    cannot go where it is sent (xlsx needs a file), or disagrees with the file's name (a .xlsx file
    holds xlsx, nothing else). ``to_files``: whether the command has -o at all."""
    chosen = format_for(fmt, output)
    allowed = STREAM_FORMATS if stream else DOCUMENT_FORMATS
    if not to_files:
        allowed = tuple(f for f in allowed if f != "xlsx")
    if chosen != "auto" and chosen not in allowed:
        what = " for a sweep" if stream else ""
        raise InputError(f"unknown format '{fmt}'{what}; choose one of: auto, {', '.join(allowed)}")
    to_file = output is not None and str(output) != "-"
    if chosen == "xlsx" and not (to_file and output.suffix.lower() == ".xlsx"):
        raise InputError("xlsx is a binary format: give -o FILE.xlsx")
    if to_file and output.suffix.lower() == ".xlsx" and chosen != "xlsx":
        raise InputError(f"{output}: a .xlsx file holds an xlsx workbook, not {chosen}; use --format xlsx")
    return chosen


def check_target(output: Path | None, force: bool) -> None:
    """Refuse early (before computing) to overwrite a file without --force."""
    if output is None or str(output) == "-":
        return
    if output.is_dir():
        raise InputError(f"{output}: is a directory; give a file name")
    if output.exists() and not force:
        raise InputError(f"{output}: already exists; add --force to replace it")
    if not output.parent.exists():
        raise InputError(f"{output.parent}: no such directory")


def _new_file_mode(path: Path) -> int:
    """mkstemp makes 0600 files; a written report gets the mode a plain open() would give it."""
    try:
        return path.stat().st_mode & 0o777  # --force keeps the replaced file's mode
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _temp_for(path: Path) -> tuple[int, str]:
    fd, tmp = tempfile.mkstemp(dir=path.parent or Path("."), prefix=f".{path.name}.", suffix=".tmp")
    os.chmod(tmp, _new_file_mode(path))
    return fd, tmp


def write_atomic(path: Path, text: str) -> None:
    """Temporary file in the same directory, then rename: readers never see half a file."""
    fd, tmp = _temp_for(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _not_finite(node: Any, path: str = "") -> tuple[str, float] | None:
    """The first NaN or infinite number in a dumped result, with its dotted path."""
    if isinstance(node, float):
        return None if math.isfinite(node) else (path, node)
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        found = _not_finite(value, f"{path}.{key}" if path else str(key))
        if found:
            return found
    return None


def check_finite(result: BaseModel) -> None:
    """Refuse to print NaN or infinity: a silent wrong number is worse than an error."""
    found = _not_finite(result.model_dump(mode="python"))
    if found:
        where, value = found
        raise IpdError(
            f"the result is not a finite number: {where} is {value}; an input is out of range "
            "(check tokens, specs and prices)",
            ExitCode.RUNTIME,
        )


def write_xlsx(result: BaseModel, path: Path) -> None:
    """The result as an xlsx workbook, written atomically."""
    from ipd_cli.render.xlsx import workbook

    wb = workbook(result)
    fd, tmp = _temp_for(path)
    os.close(fd)
    try:
        wb.save(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def emit(result: BaseModel, fmt: str, ctx: OutputContext, output: Path | None = None) -> None:
    check_finite(result)
    fmt = format_for(fmt, output)
    if fmt == "xlsx":
        if output is None or str(output) == "-":
            raise InputError("xlsx is a binary format: give -o FILE.xlsx")
        write_xlsx(result, output)
        sys.stderr.write(f"wrote {output}\n")
        return
    text = render(result, fmt, ctx)
    if output is None or str(output) == "-":
        sys.stdout.write(text)
    else:
        write_atomic(output, text)
        sys.stderr.write(f"wrote {output}\n")


def metric_paths(model: Any, prefix: str = "") -> list[str]:
    """Every dotted path to a number in a result model (pretraining.cost_usd, rl.run.usd_per_year)."""
    import types
    import typing

    model.model_rebuild()  # resolve the forward references of a deferred result model
    out: list[str] = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        args = typing.get_args(ann) if typing.get_origin(ann) in (typing.Union, types.UnionType) else (ann,)
        for arg in args:
            if hasattr(arg, "model_fields"):
                out += metric_paths(arg, f"{prefix}{name}.")
            elif arg in (int, float) and arg is not bool:
                out.append(f"{prefix}{name}")
    return list(dict.fromkeys(out))


def check_budget_options(max_usd: float | None, metric: str | None) -> None:
    """--max-usd and --budget-metric, checked before anything is computed."""
    from ipd_cli.engine.results import SystemResult

    if max_usd is not None and not (math.isfinite(max_usd) and max_usd >= 0):
        raise InputError(f"--max-usd must be a finite number >= 0, got {max_usd}")
    if metric is not None:
        known = metric_paths(SystemResult)
        if metric not in known:
            raise InputError(
                f"--budget-metric {metric}: not a metric of the result{did_you_mean(metric, known)}"
            )


def budget_values(result: BaseModel, metric: str) -> list[tuple[str, float]]:
    """(label, value) of a dotted metric (e.g. pretraining.cost_usd) for each system of a result;
    a system whose block could not be computed (null) has nothing to check."""
    data = result.model_dump(mode="json")
    rows = data["systems"] if "systems" in data else [data]
    out = []
    for row in rows:
        node: Any = row
        for key in metric.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if node is None and row.get("infeasible"):
            continue
        if not isinstance(node, int | float):
            raise InputError(
                f"--budget-metric {metric}: not a number in this output; e.g. pretraining.cost_usd"
            )
        out.append((str(row.get("hardware", "")), float(node)))
    return out


def check_budget(result: BaseModel, max_usd: float | None, metric: str) -> None:
    """Exit 3 (after the output is written) when any system's metric exceeds the budget."""
    if max_usd is None:
        return
    check_budget_options(max_usd, None)
    over = [(label, v) for label, v in budget_values(result, metric) if v > max_usd]
    if over:
        detail = ", ".join(f"{label} {v:,.0f}" for label, v in over)
        raise IpdError(f"budget exceeded: {metric} > {max_usd:,.0f} USD ({detail})", ExitCode.BUDGET_EXCEEDED)


def stream_rows(chunks, fmt: str, ctx: OutputContext, output: Path | None = None, progress=None) -> int:
    """Write column chunks as csv/jsonl/json (streamed) or table/markdown (small results).

    Rows are written whole, chunk by chunk; on Ctrl-C the rows written so far stay valid
    (a JSON array is closed) and, with -o, the partial file is still renamed into place.
    Returns the number of rows written.
    """
    fmt = "table" if fmt == "auto" and ctx.is_tty else ("csv" if fmt == "auto" else fmt)
    if fmt not in STREAM_FORMATS:
        raise InputError(f"unknown format '{fmt}' for a sweep; choose one of: {', '.join(STREAM_FORMATS)}")
    target = None if output is None or str(output) == "-" else output
    if target is None:
        fh = sys.stdout
        tmp = None
    else:
        fd, tmp = _temp_for(target)
        fh = os.fdopen(fd, "w", encoding="utf-8", newline="")
    rows = 0
    buffered: list[dict] = []
    interrupted = False
    complete = False
    try:
        try:
            for cols in chunks:
                check_chunk(cols, rows)
                n = len(next(iter(cols.values())))
                if fmt in ("table", "markdown"):
                    buffered.append(cols)
                else:
                    fh.write(chunk_text(cols, fmt, first=rows == 0))
                rows += n
                if progress:
                    progress(rows)
        except KeyboardInterrupt:
            interrupted = True
        if fmt == "json":
            fh.write("[]\n" if rows == 0 else "\n]\n")
        elif fmt in ("table", "markdown"):
            fh.write(small_table(buffered, fmt, ctx))
        complete = True
    finally:
        if tmp is not None:
            fh.close()
            if complete:  # whole, or cut by Ctrl-C after whole rows: keep it
                os.replace(tmp, target)
            else:  # an error: no partial file under the user's name
                Path(tmp).unlink(missing_ok=True)
    if interrupted:
        raise KeyboardInterrupt
    return rows
