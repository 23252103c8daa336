"""Shared fixtures: a hermetic environment and the built-in catalog."""

from __future__ import annotations

import os
import sys
from collections import OrderedDict

import helpers
import pytest

from ipd_cli import load
from ipd_cli.engine.search import array_bytes


def _leave_hypothesis_unrewritten() -> None:
    """pytest rewrites the asserts of every module of a distribution that provides a pytest plugin,
    hypothesis's ~80 modules among them; where no bytecode is written (PYTHONDONTWRITEBYTECODE=1)
    each worker rewrites them again on every run: ~0.7 s of a worker's ~6 s collection. Their own
    asserts need no introspection (the tests' asserts, conftest's and the test modules', are still
    rewritten). Through the hook's private set: if pytest renames it, this does nothing."""
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set) and "hypothesis" not in sys.modules:
            marked.discard("hypothesis")


_leave_hypothesis_unrewritten()


# Each pytest-xdist worker collects every test file, and collecting is mostly pytest's assertion
# rewriting (~4 s CPU a worker for ~3,600 asserts, of a worker's ~5 s collection): on a clean
# clone both workers rewrote every file, in the same order at the same time, so neither found the
# other's rewritten bytecode. Where bytecode is written (.ci/run writes it in its clean clone),
# each worker first imports, and so rewrites and writes, its own share of the files (split by
# size); the collection then imports the rest from the bytecode the other worker wrote (pytest
# checks it against the source's mtime and size; a file not written yet is rewritten as before).
# Nothing is skipped or changed: every file is collected and rewritten as before, once a session.
def _rewrite_share(config) -> list:
    """This worker's share of the test files the session collects (none: no sharing)."""
    from pathlib import Path

    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count or int(count) < 2:
        return []
    if config.getoption("assertmode") != "rewrite" or str(config.getoption("importmode")) != "prepend":
        return []  # no rewriting, or test modules imported under other names than here
    here = Path(__file__).resolve().parent
    files: set[Path] = set()
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path.is_dir() and (path == here or path in here.parents):
            files.update(here.glob("test_*.py"))
        elif path.parent == here and path.name.startswith("test_") and path.suffix == ".py":
            files.add(path)
    loads = [0] * int(count)
    share = []
    for path in sorted(files, key=lambda p: (-p.stat().st_size, p.name)):  # the same on every worker
        least = loads.index(min(loads))
        loads[least] += path.stat().st_size
        if least == int(worker.removeprefix("gw")):
            share.append(path)
    return share


# Where no bytecode is written (PYTHONDONTWRITEBYTECODE=1, as a developer's shell may have it),
# pytest writes no rewritten file, so each worker rewrote every file (~3.5 s CPU a worker of its
# ~9 s collection). There the workers share them through the session's temporary directory, never
# the source tree: during the collection, pytest's hook looks for a test file's rewritten code
# there (rewrite.get_cache_dir; it reads there, and writes nowhere without bytecode), and each
# worker first rewrites its own share into it (the same code the hook would make: rewrite's own
# functions). The rest is as above: a file not there yet is rewritten by the hook as before.
def _rewrites_in_the_session_directory(config, share: list):
    """Share the rewritten ``share`` through the session's directory; the undo, or None (pytest's
    internals moved or no session directory: nothing is shared, every file is rewritten as before)."""
    from pathlib import Path

    from _pytest.assertion import rewrite

    names = ("get_cache_dir", "_rewrite_test", "_write_pyc", "assertstate_key", "PYC_TAIL")
    parts = [getattr(rewrite, name, None) for name in names]
    factory = getattr(config, "_tmp_path_factory", None)
    if None in parts or factory is None:
        return None
    get_cache_dir, rewrite_test, write_pyc, key, tail = parts
    here = Path(__file__).resolve().parent
    shared = factory.getbasetemp().parent / "rewritten-tests"  # every worker's basetemp's parent
    shared.mkdir(exist_ok=True)
    rewrite.get_cache_dir = lambda fn: shared if Path(fn).parent == here else get_cache_dir(fn)
    state = config.stash[key]
    for path in share:
        try:
            source_hash, co = rewrite_test(path, config)
        except Exception:  # a file that does not compile: the collection reports it
            continue
        write_pyc(state, co, source_hash, shared / (path.name[:-3] + tail))

    def undo() -> None:
        rewrite.get_cache_dir = get_cache_dir

    return undo


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    import importlib

    share = _rewrite_share(session.config)
    undo = None
    if share and sys.dont_write_bytecode:
        undo = _rewrites_in_the_session_directory(session.config, share)
    try:
        for path in share:
            if path.stem in sys.modules:
                continue
            try:  # as the collection imports it (importmode prepend: tests/ is on sys.path)
                importlib.import_module(path.stem)
            except BaseException as e:  # the collection imports it again and reports what it raises
                sys.modules.pop(path.stem, None)
                if isinstance(e, KeyboardInterrupt):
                    raise
        return (yield)
    finally:
        if undo is not None:
            undo()


# pytest-xdist hands each worker whole test files (``--dist loadfile`` in pyproject.toml): the
# tests of a file share their catalogs, grids, RL steps and plan searches in one process (split
# test by test, both workers computed many of them: one run each evaluated 1,902 serving grids, 1,006
# pre-training plan searches and 511 RL steps, 1,653, 901 and 497 by file, 1,625, 888 and 478
# in one process: ~10 s of ~200 s CPU by their serial cost per call). Files go out heaviest
# first, so that the last ones to start are short and the workers finish together (xdist's own
# order, by number of tests, left the property tests, 12 tests of ~19 s, to the end). The weights
# are each file's CPU seconds, its tests' own and their child processes' (one `-n 2` run of main
# e84980d, 2026-12-06, per test process_time + os.times children; the weights of 2026-12-05 put
# test_search_pruning.py, 22 s, last, at 2.2 s: one worker ran it while the other had finished); a
# file not listed goes first. They order the files only: every test runs either way.
FILE_SECONDS = {
    "test_rl.py": 32.7,
    "test_robustness.py": 28.5,
    "test_docs.py": 27.6,
    "test_search_pruning.py": 22.2,
    "test_properties.py": 20.8,
    "test_sweep.py": 19.4,
    "test_lifecycle.py": 18.2,
    "test_rl_pool.py": 16.4,
    "test_serving_properties.py": 14.4,
    "test_serving.py": 13.3,
    "test_pretraining.py": 13.0,
    "test_readme_figures.py": 10.5,
    "test_output.py": 10.4,
    "test_usability.py": 9.5,
    "test_resultcache.py": 8.8,
    "test_cli.py": 8.0,
    "test_catalog.py": 6.6,
    "test_fuzz.py": 4.4,
    "test_scripting.py": 4.3,
    "test_installed.py": 4.1,
    "test_plot.py": 4.1,
    "test_plausibility.py": 2.4,
    "test_validation.py": 1.9,
    "test_overrides.py": 1.7,
    "test_rl_sync.py": 1.6,
    "test_serving_speed.py": 1.5,
    "test_security.py": 1.0,
    "test_formulas.py": 0.6,
    "test_search.py": 0.1,
    "test_types.py": 0.1,
}


def pytest_configure(config):
    # pytest-xdist would reorder the files by their number of tests (the order set below is kept)
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # serially, the files run in their own order
    weight = {name: -seconds for name, seconds in FILE_SECONDS.items()}
    items.sort(key=lambda item: weight.get(item.path.name, -float("inf")))  # stable: a file's own order


@pytest.fixture(scope="session")
def _cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("ipd-cache")


@pytest.fixture(scope="session", autouse=True)
def _shared_runs(tmp_path_factory):
    """The directory the session's workers share (pytest-xdist gives each worker a basetemp under
    one session directory), where run_cli_once keeps its runs."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    helpers.SHARED = shared / "ipd-shared-runs"
    helpers.SHARED.mkdir(exist_ok=True)


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch, _cache_dir):
    # a user's IPD_CATALOG, IPD_DEBUG or catalog cache must not leak into tests
    monkeypatch.delenv("IPD_CATALOG", raising=False)
    monkeypatch.delenv("IPD_DEBUG", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)  # a table to a pipe is as wide as it needs
    monkeypatch.setenv("IPD_CACHE_DIR", str(_cache_dir))


@pytest.fixture(scope="session")
def catalog():
    return load()


# The built-in catalog, loaded once per worker (the CLI and the library load it on every command:
# ~15 ms each to hash the catalog files and read the cache entry, ~1,200 times a session). The
# session's loads of the built-in catalog alone (no IPD_CATALOG, no --catalog, the session's cache
# directory) get what a load that hits the cache gets: a copy of the decoded catalog with tables of
# its own (cache._own), its frozen entries shared, its overrides applied to that copy. A test that
# takes its own ``monkeypatch`` (it may patch the loader, the cache or the files) or is marked
# ``fresh_grids`` loads afresh. IPD_TEST_CHECK_SHARED=1 checks after each test that neither this
# catalog nor the session's ``catalog`` fixture was changed.
_SHARED_CATALOG: list = []  # [(cache directory, catalog)]: at most one
_LOAD_AFRESH = False
_SHARED_LOADS = [0]


def _shared_load_catalog(extra_dirs=None, sets=None):
    import dataclasses

    from ipd_cli.catalog import cache

    real = _REAL_LOAD_CATALOG
    cache_dir = os.environ.get("IPD_CACHE_DIR")
    if _LOAD_AFRESH or extra_dirs or os.environ.get("IPD_CATALOG") or cache_dir != _SESSION_CACHE_DIR:
        return real(extra_dirs, sets)
    if not _SHARED_CATALOG:
        first = real(None, sets)
        from ipd_cli.catalog.dirs import catalog_dirs

        dirs = catalog_dirs()
        key = cache.fingerprint(dirs)
        stored = cache.read(dirs, key) if key else None
        if stored is not None and not stored.warnings and not cache._pending:
            _SHARED_CATALOG.append((cache_dir, stored))
        return first
    _SHARED_LOADS[0] += 1
    cat = cache._own(_SHARED_CATALOG[0][1])
    notes = cache.drain_warnings()
    if notes:
        cat = dataclasses.replace(cat, warnings=notes)
    return cat.with_overrides(sets) if sets else cat


_REAL_LOAD_CATALOG = None
_SESSION_CACHE_DIR: str | None = None


@pytest.fixture(scope="session", autouse=True)
def _share_builtin_catalog(_cache_dir):
    global _REAL_LOAD_CATALOG, _SESSION_CACHE_DIR
    from ipd_cli import api

    _REAL_LOAD_CATALOG, _SESSION_CACHE_DIR = api.load_catalog, str(_cache_dir)
    api.load_catalog = _shared_load_catalog
    yield
    api.load_catalog = _REAL_LOAD_CATALOG


def _catalog_dump(cat) -> str:
    import dataclasses
    import json

    def plain(v):
        if hasattr(v, "model_dump"):
            return v.model_dump(mode="json")
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        return v

    fields = [f.name for f in dataclasses.fields(cat) if f.name != "resolved"]
    return json.dumps({name: plain(getattr(cat, name)) for name in fields}, sort_keys=True, default=repr)


@pytest.fixture(autouse=True)
def _catalog_afresh(request, _share_builtin_catalog):
    """A test with its own ``monkeypatch`` argument, or marked fresh_grids, loads the catalog afresh
    (see _shared_load_catalog); with IPD_TEST_CHECK_SHARED=1, the shared catalogs are checked."""
    global _LOAD_AFRESH
    import inspect

    own = inspect.signature(request.node.function).parameters if hasattr(request.node, "function") else {}
    _LOAD_AFRESH = "monkeypatch" in own or request.node.get_closest_marker("fresh_grids") is not None
    check = os.environ.get("IPD_TEST_CHECK_SHARED") == "1"
    session_catalog = request.getfixturevalue("catalog") if check else None
    before = (
        [_catalog_dump(c) for c in (session_catalog, *(c for _, c in _SHARED_CATALOG))] if check else None
    )
    yield
    _LOAD_AFRESH = False
    if check:
        after = [_catalog_dump(c) for c in (session_catalog, *(c for _, c in _SHARED_CATALOG))]
        assert after[: len(before)] == before, "a test changed a catalog the session shares"


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """The session's memos (grids, RL results, catalogs, runs) are dropped at the process's exit,
    where the interpreter's shutdown went over the whole heap with the cyclic collector more than
    once: ~1.7 s CPU a worker after its last test, at the end of the run, which waits for every
    worker to exit. Collected once here, what is left is frozen (gc.freeze: the collector skips it
    from now on) and is freed as before, by reference counts (0.56-0.60 s -> 0.24-0.25 s after
    pytest_unconfigure for test_sweep.py and test_rl_pool.py's memos)."""
    import gc

    gc.collect()
    gc.freeze()


def pytest_sessionfinish(session):
    # serially only (-n 0): under pytest-xdist the controller, which prints, loads nothing
    serial = not session.config.getoption("numprocesses", None)
    if os.environ.get("IPD_TEST_CHECK_SHARED") == "1" and serial:
        print(f"\nloads of the shared built-in catalog: {_SHARED_LOADS[0]}")


# The deployment grids the session's tests evaluated, kept as `ipd calibrate` keeps them
# (grid.memoized(): a grid is a pure function of its physics, pins and target, never changed after
# evaluation; the least recently used go first). The README, the --help examples and many tests
# price the same systems and models again (`compare vera-rubin blackwell` alone a dozen times);
# each worker evaluates such a grid once. A test that checks what is evaluated, or that two
# evaluations agree, is marked `fresh_grids` and runs without it.
# With grid.MEMO_GRIDS (16, what one command keeps) a worker evaluated about one grid in five
# again after other tests had pushed it out; here the grids are kept up to SESSION_GRID_BYTES of
# arrays (a grid takes 4 to 80 MB), the least recently used go first.
SESSION_GRID_BYTES = 768 * 2**20


def _grid_bytes(g) -> int:
    seen: set[int] = set()
    parts = (g.lay, g.x, g.rows, g.space.cols, g.space.checks, g.pinned, g.prefill, g.pools)
    return sum(array_bytes(p, seen) for p in parts)


class _SessionGrids(OrderedDict):
    """grid.GridStore kept by the bytes of its grids rather than by their number: ``limit`` is
    read by grid.evaluate after each insertion, and only ever lets it drop the oldest grid, as
    here. Its traffic sizers (each holds a grid, maybe one the store let go) are kept as a
    GridStore keeps them, at most grid.MEMO_GRIDS."""

    def __init__(self, budget: int) -> None:
        super().__init__()
        self.budget = budget
        self.sizers: OrderedDict = _Sizers()
        self._bytes: dict = {}

    def __setitem__(self, key, grid) -> None:
        super().__setitem__(key, grid)
        self._bytes[key] = _grid_bytes(grid)
        while len(self) > 1 and sum(self._bytes.values()) > self.budget:
            self.popitem(last=False)

    def popitem(self, last: bool = True):
        key, grid = super().popitem(last=last)
        self._bytes.pop(key, None)
        return key, grid

    @property
    def limit(self) -> int:
        return max(len(self), 1)


class _Sizers(OrderedDict):
    def __setitem__(self, key, sizer) -> None:
        from ipd_cli.engine.serving.grid import MEMO_GRIDS

        super().__setitem__(key, sizer)
        while len(self) > MEMO_GRIDS:
            self.popitem(last=False)


_GRIDS: _SessionGrids | None = None


def _session_grids() -> OrderedDict:
    global _GRIDS
    if _GRIDS is None:
        _GRIDS = _SessionGrids(SESSION_GRID_BYTES)
    return _GRIDS


@pytest.fixture(autouse=True)
def _shared_grids(request):
    from ipd_cli.engine.serving import grid

    fresh = request.node.get_closest_marker("fresh_grids") is not None
    token = grid._MEMO.set(None if fresh else _session_grids())
    yield
    grid._MEMO.reset(token)


# The RL steps the session's tests estimated (engine.rl.estimate.MEMO, by the content of every
# input): the sweep tests check each row against a single estimate the other tests ran too, and
# the README's, --help's and the comparisons' commands price the same RL steps again. A test that
# replaces a function of the engine (its own ``monkeypatch`` argument) or checks what is evaluated
# (``fresh_grids``) estimates afresh.
_RL_RESULTS: OrderedDict = OrderedDict()


@pytest.fixture(autouse=True)
def _shared_rl_results(request):
    import inspect

    from ipd_cli.engine.rl import estimate

    # only the test's own `monkeypatch` argument counts (the autouse _hermetic fixture takes one for
    # every test): a fixture that patches an RL engine function needs its test marked fresh_grids
    own = inspect.signature(request.node.function).parameters if hasattr(request.node, "function") else {}
    fresh = "monkeypatch" in own or request.node.get_closest_marker("fresh_grids") is not None
    token = estimate.MEMO.set(None if fresh else _RL_RESULTS)
    yield
    estimate.MEMO.reset(token)
