"""Fuzzing the input paths: YAML catalog files, workload files (and stdin), and `--set`.

Every case must end in a result (exit 0) or a clean ipd error: exit 1 or 2 with one line on
stderr and nothing on stdout. An exception no check caught fails the test, whether it escapes
`run_cli` or is turned into main()'s one-line "internal error" (exit 1).
Documents are random bytes, random YAML-ish text, and built-in entries with one part
broken (a leaf replaced, a key removed, an unknown key added), which reach deeper than
random text: past parsing and validation, into the engine.
"""

from __future__ import annotations

import copy
import functools
import io
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from helpers import Run, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipd_cli.catalog import layers, validation, yamlio
from ipd_cli.errors import IpdError

TRAIN = ("train", "--hardware", "hopper", "--model", "llama-3.1-8b", "--tokens", "1e12")
NO_CACHE = {"IPD_CACHE_DIR": "off"}  # each case is a new catalog: writing it to the cache is wasted time


def bounded(n: int):
    return settings(
        max_examples=n, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
    )


def ends_cleanly(r: Run) -> None:
    if r.code == 0:
        assert r.stdout, "exit 0 without output"
        return
    assert r.code in (1, 2), (r.code, r.stderr)
    assert r.stdout == "", r.stdout[:200]
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipd: error: "), r.stderr
    assert "internal error" not in lines[0], r.stderr  # main's catch-all: an exception no check caught


@functools.cache
def raw_builtin() -> layers.RawCatalog:
    return layers.load_raw([])


@functools.cache
def vocabulary() -> list[str]:
    """Real section, entry, field and label names, so that random paths hit real things."""
    from ipd_cli.catalog.schema import PRECISIONS

    raw = raw_builtin()
    words = {*layers.ENTRY_SECTIONS, *layers.MERGED_SECTIONS, "workload", *PRECISIONS}
    words |= {
        "reserved",
        "on-demand",
        "spot",
        "tco-model",
        "value",
        "range",
        "source",
        "hopper",
        "vera-rubin",
    }
    for section, entries in raw.sections.items():
        words.add(section)
        for name, body in entries.items():
            words.add(str(name))
            if isinstance(body, dict):
                words |= {str(k) for k in body}
    for cls in (
        *layers.ENTRY_SECTIONS.values(),
        *layers.MERGED_SECTIONS.values(),
        *validation.WORKLOAD_KINDS.values(),
    ):
        words |= set(cls.model_fields)
    return sorted(words)


FACTORS = [0, -1, 1e-300, 1e-12, 1e-3, 0.5, 2, 1e3, 1e12, 1e300, float("inf"), float("nan")]
YAML_CHARS = "abcxyz019 .-_:,[]{}&*!|>'\"%@`#?~=\n\t\\"
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [0, -1, 1, 0.5, 1e-300, 1e300, -0.0, "1e3", "", "nan", ".inf", "hopper", "fp4", "2026-01-01"]
    ),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(vocabulary()), st.text(max_size=6)), inner, max_size=3),
    ),
    max_leaves=6,
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _is_number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


@st.composite
def broken(draw, doc):
    """``doc`` with one part broken: a number rescaled, a value replaced, a key removed or added."""
    doc = copy.deepcopy(doc)
    action = draw(st.sampled_from(["scale", "scale", "replace", "remove", "add"]))
    paths = [p for p in _paths(doc) if p]
    numeric = [p for p in paths if _is_number(_at(doc, p))]
    path = draw(st.sampled_from(numeric if action == "scale" and numeric else paths))
    parent, key = _at(doc, path[:-1]), path[-1]
    if action == "scale" and _is_number(parent[key]):
        # a number that still parses: validation or the engine must cope with its size
        factor = draw(st.one_of(st.sampled_from(FACTORS), st.floats(-1e6, 1e6)))
        scaled = parent[key] * factor
        parent[key] = int(scaled) if isinstance(parent[key], int) and abs(scaled) < 2**63 else scaled
    elif action in ("scale", "replace"):
        parent[key] = draw(values)
    elif action == "remove" and isinstance(parent, dict):
        del parent[key]
    elif isinstance(parent, dict):
        parent[draw(st.sampled_from(vocabulary()))] = draw(values)
    return doc


def _at(doc, path):
    for key in path:
        doc = doc[key]
    return doc


def documents(doc) -> st.SearchStrategy[bytes]:
    """Bytes of a YAML file: a broken copy of ``doc``, random YAML-ish text, or random bytes."""
    dumped = broken(doc).map(lambda d: yaml.safe_dump(d, allow_unicode=True).encode("utf-8"))
    text = st.text(alphabet=YAML_CHARS, max_size=200).map(lambda t: t.encode("utf-8"))
    return st.one_of(*[dumped] * 6, text, st.binary(max_size=200))


def catalog_doc() -> dict:
    """The entries `ipd train --hardware hopper --model llama-3.1-8b` reads, as one user file."""
    raw = raw_builtin()
    return {
        "systems": {"h100-sxm": raw.sections["systems"]["h100-sxm"]},
        "accelerators": {"h100-sxm": raw.sections["accelerators"]["h100-sxm"]},
        "models": {"llama-3.1-8b": raw.sections["models"]["llama-3.1-8b"]},
        "economics": {
            k: raw.sections["economics"][k] for k in ("pue", "utilisation", "electricity_usd_per_kwh")
        },
        "efficiency": {k: raw.sections["efficiency"][k] for k in ("training_gemm", "hbm_usable_fraction")},
    }


@pytest.mark.slow  # seconds: fifty catalogs, each loaded and run
@bounded(50)
@given(data=st.data())
def test_fuzz_catalog_files(data):
    body = data.draw(documents(catalog_doc()))
    target = data.draw(st.sampled_from([["--gpus", "64"], ["--days", "30"]]))
    pricing = data.draw(st.sampled_from(["rental", "tco"]))
    with tempfile.TemporaryDirectory() as tmp:
        cat = Path(tmp) / "cat"
        cat.mkdir()
        (cat / "x.yaml").write_bytes(body)
        r = run_cli(*TRAIN, *target, "--pricing", pricing, "--catalog", str(cat), "-f", "json", env=NO_CACHE)
        ends_cleanly(r)


@bounded(60)
@given(data=st.data())
def test_fuzz_workload_files_and_stdin(data):
    raw = raw_builtin()
    name = data.draw(st.sampled_from(sorted(raw.sections["workloads"])))
    body = data.draw(documents(raw.sections["workloads"][name]))
    hardware = data.draw(st.sampled_from(["hopper", "vera-rubin", "gb200-nvl72"]))
    if data.draw(st.booleans()):
        old = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(body), encoding="utf-8", errors="surrogateescape")
        try:
            r = run_cli("compare", hardware, "--workload", "-", "-f", "json")
        finally:
            sys.stdin = old
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "w.yaml"
            path.write_bytes(body)
            r = run_cli("compare", hardware, "--workload", str(path), "-f", "json")
    ends_cleanly(r)


# slow (seconds: sixty comparisons, 2.0 s CPU on 2026-12-06), marked here rather than by a decorator:
# hypothesis derandomizes from a digest of the test's source, decorators included, so a decorator
# line would change the examples it draws
test_fuzz_workload_files_and_stdin = pytest.mark.slow(test_fuzz_workload_files_and_stdin)


set_values = st.one_of(
    scalars.map(lambda v: yaml.safe_dump(v, default_flow_style=True).removesuffix("\n...\n").strip()),
    st.text(alphabet=YAML_CHARS, max_size=30),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@bounded(120)
@given(
    parts=st.lists(
        st.one_of(st.sampled_from(vocabulary()), st.text(alphabet="ab.-_1", max_size=4)), max_size=5
    ),
    value=set_values,
    workload=st.booleans(),
)
def test_fuzz_set(parts, value, workload):
    item = f"{'.'.join(parts)}={value}"
    if workload:
        r = run_cli("compare", "hopper", "--workload", "pretrain-10t-moe", f"--set={item}", "-f", "json")
    else:
        r = run_cli(*TRAIN, "--gpus", "64", f"--set={item}", "-f", "json")
    ends_cleanly(r)


@bounded(200)
@given(text=st.one_of(st.text(alphabet=YAML_CHARS, max_size=300), st.text(max_size=100)))
def test_fuzz_read_yaml(text):
    try:
        yamlio.read_yaml("fuzz.yaml", text=text)
    except IpdError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz.yaml: ")
