"""Test helpers: a CLI runner that goes through main(), file writing, golden files."""

from __future__ import annotations

import io
import json
import os
import re
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from ipd_cli.cli import main

GOLDEN = Path(__file__).parent / "golden"


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def run_cli(*args: str, env: dict[str, str] | None = None, encoding: str | None = None) -> Run:
    """Run `ipd ARGS` in-process through main(): real exit codes, stdout and stderr apart.
    ``encoding``: stdout is a text stream of that encoding (strict: a character it cannot encode
    is an error), as under ``PYTHONIOENCODING``; else a str buffer, encoding nothing."""
    err = io.StringIO()
    raw = io.BytesIO() if encoding else None
    out: io.TextIOBase = io.TextIOWrapper(raw, encoding=encoding) if raw else io.StringIO()
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if raw is None:
        return Run(code, out.getvalue(), err.getvalue())  # type: ignore[attr-defined]
    out.flush()
    return Run(code, raw.getvalue().decode(encoding or ""), err.getvalue())


_ONCE: dict[tuple[str, ...], Run] = {}


# The frontier scenario's 10T SWE step grows its GPUs to what each system needs
# (grow_gpus_to_fit); with this, its 2,048 GPUs stay fixed and cannot hold the training state on
# H100: a stage that cannot run, for the tests of how that is reported.
FIXED_RL_GPUS = ("--set", "workload.post_training.grow_gpus_to_fit=false")


# A directory every pytest-xdist worker of the session shares (conftest.py sets it): run_cli_once
# keeps its runs there too, so `ipd calibrate` runs once per session, not once per worker. The
# xdist_group marks were meant to do that, but pytest-xdist 3.8 renames items through
# ``item._nodeid``, which pytest 9 no longer reads: the groups are silently ignored there.
SHARED: Path | None = None


def run_cli_once(*args: str) -> Run:
    """``run_cli(*args)`` run once per test session: for commands that write no file, read no stdin
    and do not depend on the working directory, which the README, the --help examples and the tests
    repeat (``ipd calibrate`` alone takes seconds). Every test runs in the same hermetic environment
    (conftest.py), so the same arguments give the same output; across workers the first to ask runs
    it (under a file lock) and the others read its result."""
    if args not in _ONCE:
        _ONCE[args] = _shared_run(args) if SHARED is not None else run_cli(*args)
    return _ONCE[args]


def _shared_run(args: tuple[str, ...]) -> Run:
    import fcntl
    import hashlib

    assert SHARED is not None
    name = hashlib.sha256("\0".join(args).encode()).hexdigest()[:24]
    done = SHARED / f"run-{name}.json"
    with open(SHARED / f"run-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker running the same command: wait for it
        if done.exists():
            return Run(**json.loads(done.read_text(encoding="utf-8")))
        r = run_cli(*args)
        tmp = done.with_suffix(".tmp")
        tmp.write_text(json.dumps({"code": r.code, "stdout": r.stdout, "stderr": r.stderr}), encoding="utf-8")
        tmp.replace(done)
        return r


CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def builtin_yaml(relpath: str):
    """A built-in catalog file (``relpath`` under configs/) as raw YAML data, read with libyaml's
    safe loader where PyYAML has it: the validation cases take ~1.1 s CPU with PyYAML's
    pure-Python loader, ~0.09 s with libyaml's (the same data)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((CONFIGS / relpath).read_text(encoding="utf-8"), Loader=loader)  # noqa: S506


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# A decimal number in a golden's text: digits with a point or an exponent (integers stay exact).
_FLOAT = re.compile(r"(?<![\w.])-?(?:\d+\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)(?![\w.])")


def _to_12_digits(text: str) -> str:
    """``text`` with every decimal number rounded to 12 significant digits."""
    return _FLOAT.sub(lambda m: format(float(m.group()), ".12g"), text)


def golden(name: str, text: str) -> None:
    """Compare with tests/golden/NAME; IPD_REGEN_GOLDEN=1 rewrites it (review the diff!).

    Decimal numbers are compared to 12 significant digits: numpy picks its exp/log kernels by the
    CPU's instruction set (AVX-512 or AVX2), whose results may differ in the last bit, so the
    queueing figures' 16th digit differs between machines (2026-12-06: 0.36796476644157583 on the
    machine that wrote the golden, 0.3679647664415768 on an AMD EPYC). Any change of the model
    moves a figure by far more than 1e-12 of itself; the structure, names and integers stay exact.
    """
    path = GOLDEN / name
    if os.environ.get("IPD_REGEN_GOLDEN") == "1":
        write(path, text)
    assert path.exists(), f"missing golden file {path}; run with IPD_REGEN_GOLDEN=1"
    want = path.read_text(encoding="utf-8")
    assert text == want or _to_12_digits(text) == _to_12_digits(want), (
        f"{name} drifted; IPD_REGEN_GOLDEN=1 after review"
    )


def plan_inputs(cat, hardware, model, precision="bf16", seq=8192, tokens=1e12, pins=None):
    """The plan search's inputs (``trainplan``'s x) for a model on a system, read from ``cat``
    (``pins``: the run's own, e.g. ``{"f8r": 2}`` for MXFP8, ``{"tpo": 0}`` without userbuffers)."""
    from ipd_cli.engine import trainplan as tpn
    from ipd_cli.engine.inputs import Inputs

    inp = Inputs(cat)
    x = {
        **tpn.model_inputs(inp, cat, model),
        **tpn.hardware_inputs(inp, cat, hardware, precision, pins),
        **tpn.step_inputs(inp, precision),
        "seq": seq,
        "tokens": tokens,
    }
    return tpn.derive(x)


def queue_groups_of(sv) -> list[tuple[float, float]]:
    """A serving block's queues behind its router, from its reported fields, as
    ``queueing.mdc_copies_for_wait`` takes them (engine: ``point.queue_groups`` from grid rows):
    its sequence slots (decode instances x concurrency, each held output_tokens /
    tokens_per_s_per_user seconds) and, disaggregated, its prefill instances."""
    return [
        (sv.output_tokens / sv.tokens_per_s_per_user, sv.decode_instances * sv.concurrency),
        (sv.prefill_instance_s, sv.prefill_instances if sv.disaggregated else 0),
    ]
