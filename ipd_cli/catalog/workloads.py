"""Workloads by name or from a file: catalog entries, YAML files and stdin, with ``--set workload.*``."""

from __future__ import annotations

from pathlib import Path

from ipd_cli.errors import InputError

from . import overrides
from .catalog import Catalog, check_scenario_refs
from .layers import read_workload_doc
from .schema import PretrainWorkload, RlWorkload, Scenario
from .validation import validate_workload


def read_stdin() -> str:
    """Standard input as text, bounded like a file and decoded strictly (one-line errors)."""
    import sys

    from .yamlio import MAX_FILE_BYTES

    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream without bytes underneath (tests, some shells)
        text = sys.stdin.read(MAX_FILE_BYTES + 1)
        data = None
    else:
        data = buffer.read(MAX_FILE_BYTES + 1)
        text = None
    if len(data if data is not None else text) > MAX_FILE_BYTES:
        raise InputError(f"<stdin>: larger than {MAX_FILE_BYTES:,} bytes; refusing to read it")
    if data is not None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("<stdin>: not UTF-8 text; give UTF-8 YAML") from None
    return text


def refuse_workload_sets(cat: Catalog, command: str, flags: str) -> None:
    """Commands without a workload must not silently drop --set workload.* overrides."""
    for o in cat.overrides:
        if o.path.startswith(overrides.WORKLOAD + ".") or o.path == overrides.WORKLOAD:
            raise InputError(f"--set {o.text}: ipd {command} has no workload; use {flags}")


def resolve_workload(cat: Catalog, ref: str) -> tuple[str, PretrainWorkload | RlWorkload | Scenario, str]:
    """A workload by catalog name, or from a YAML file path (``-``: stdin): (name, workload, origin).

    ``--set workload.FIELD=VALUE`` overrides are applied here, then validated.
    """
    if ref in cat.workloads:
        name, body, origin = (
            ref,
            cat.workloads[ref].model_dump(exclude_none=True),
            cat.origin("workloads", ref),
        )
        extra_sources: dict = {}
    elif ref == "-" or ref.endswith((".yaml", ".yml")) or Path(ref).exists():
        text = read_stdin() if ref == "-" else None
        origin = "<stdin>" if ref == "-" else ref
        body = read_workload_doc(Path(ref), text=text, label=origin)
        extra_sources = body.pop("sources", {}) or {}
        name = "stdin" if ref == "-" else Path(ref).stem
    else:
        return ref, cat.workload(ref), ""
    workload_sets = [o for o in cat.overrides if o.path.startswith(overrides.WORKLOAD + ".")]
    if workload_sets:
        overrides.apply_workload(body, workload_sets)
        origin += " + --set"
    workload = validate_workload(body, f"{origin}: workload")
    if workload.kind == "scenario":
        check_scenario_refs(cat, workload, origin)
    if workload.source not in cat.sources and workload.source not in extra_sources:
        raise InputError(f"{origin}: source: unknown source id '{workload.source}'; add it under sources:")
    cat.model(workload.model)
    return name, workload, origin
