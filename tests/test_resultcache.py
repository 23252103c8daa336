"""The console script's cache of estimate outputs (ipd_cli/resultcache.py, issue 16)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_cli, write

from ipd_cli import resultcache

SERVE = ("serve", "--hardware", "h100", "--model", "llama-3.1-8b", "-f", "json")


def ipd(*args: str, cache: Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The console script as a user runs it (``python -m ipd_cli``), output piped."""
    full = {**os.environ, "IPD_CACHE_DIR": str(cache), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ipd_cli", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=cwd,
        timeout=120,
    )


def started(*args: str, cache: Path, cwd: Path) -> subprocess.Popen:
    """The console script started with its stdout and stderr on pipes the test reads (or not)."""
    env = {**os.environ, "IPD_CACHE_DIR": str(cache)}
    return subprocess.Popen(
        [sys.executable, "-m", "ipd_cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("result-*.json"))


def stored_once(cache: Path) -> Path:
    """The one entry a first run stored, its time set to the epoch: a hit touches it (the tests
    of the replay's own exits check that the replay, not the full path, ran)."""
    [entry] = entries(cache)
    os.utime(entry, ns=(0, 0))
    return entry


@pytest.fixture
def cache(tmp_path):
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    return d


_SERVED: dict = {}


@pytest.fixture
def served(tmp_path, tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """A first run of SERVE and the cache directory holding what it stored: the tests that start
    from a stored SERVE share one first run per worker (a subprocess and a serving search). The
    directory is one per worker (IPD_CACHE_DIR is part of an entry's key), emptied for each test
    but for that entry, as the first run left it (the replays below check that it is the entry
    they print)."""
    if not _SERVED:
        cache = tmp_path_factory.mktemp("served", numbered=True) / "cache"
        cache.mkdir(mode=0o700)
        first = ipd(*SERVE, cache=cache, cwd=tmp_path)
        assert first.returncode == 0 and len(entries(cache)) == 1, first.stderr
        [entry] = entries(cache)
        _SERVED.update(run=first, cache=cache, name=entry.name, data=entry.read_bytes())
    cache = _SERVED["cache"]
    for path in cache.iterdir():
        path.unlink()
    entry = cache / _SERVED["name"]
    entry.write_bytes(_SERVED["data"])
    entry.chmod(0o600)
    return _SERVED["run"], cache


@pytest.mark.slow  # seconds: three processes besides the shared first run
def test_a_second_run_prints_the_stored_output(served, tmp_path):
    first, cache = served
    assert first.returncode == 0 and len(entries(cache)) == 1
    second = ipd(*SERVE, cache=cache, cwd=tmp_path)
    assert (second.returncode, second.stdout, second.stderr) == (0, first.stdout, first.stderr)
    # the hit is the entry: a body rewritten with a valid checksum is what gets printed
    entry = entries(cache)[0]
    header, _, rest = entry.read_bytes().partition(b"\n")
    writes = json.loads(rest.partition(b" ")[2])
    writes[0][1] = writes[0][1].replace('"hardware"', '"kind_from_the_entry"', 1)
    body = json.dumps(writes).encode()
    entry.write_bytes(header + b"\n" + hashlib.sha256(body).hexdigest().encode() + b" " + body)
    assert "kind_from_the_entry" in ipd(*SERVE, cache=cache, cwd=tmp_path).stdout
    # a body that does not match its checksum is a miss: computed again and stored again
    entry.write_bytes(entry.read_bytes().replace(b"kind_from_the_entry", b"kind_from_a_tamperer"))
    third = ipd(*SERVE, cache=cache, cwd=tmp_path)
    assert third.stdout == first.stdout
    assert b"kind_from" not in entries(cache)[0].read_bytes()


def test_warnings_are_replayed_in_order(cache, tmp_path):
    args = ("train", "--hardware", "h100", "--model", "llama-3.1-8b", "--tokens", "1e12", "--gpus", "64")
    args += ("-f", "json")  # (its fp4 fallback's warning was the first line: `train` now refuses fp4 on H100)
    first = ipd(*args, cache=cache, cwd=tmp_path)
    assert first.returncode == 0 and first.stderr.startswith(
        "ipd: note: pre-training is charged for the days"
    )
    second = ipd(*args, cache=cache, cwd=tmp_path)
    assert (second.stdout, second.stderr) == (first.stdout, first.stderr)
    writes = json.loads(entries(cache)[0].read_bytes().partition(b"\n")[2].partition(b" ")[2])
    # the data, then the reserved contract's note and the ranges' note, as the run wrote them
    assert [n for n, _ in writes] == [1, 2, 2]
    assert [w for _, w in writes][1:] == [ln + "\n" for ln in first.stderr.splitlines()]


def price(run: subprocess.CompletedProcess) -> float:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["serving"]["price_usd_per_gpu_hour"]


@pytest.mark.slow  # seconds: four processes, each a serving search
def test_a_catalog_edit_or_another_argument_is_a_new_key(served, tmp_path):
    first, cache = served
    rental = price(first)
    tco = price(ipd(*SERVE, "--pricing", "tco", cache=cache, cwd=tmp_path))
    assert tco != rental
    user = tmp_path / "user"
    user.mkdir()
    pue = "economics:\n  pue: {{value: {}, source: uptime-2024}}\n"
    write(user / "economics.yaml", pue.format(2.0))
    env = {"IPD_CATALOG": str(user)}
    assert price(ipd(*SERVE, "--pricing", "tco", cache=cache, cwd=tmp_path, env=env)) > tco
    assert len(entries(cache)) == 3
    # the same directory edited again: its content is in the key
    write(user / "economics.yaml", pue.format(1.0))
    assert price(ipd(*SERVE, "--pricing", "tco", cache=cache, cwd=tmp_path, env=env)) < tco


def test_a_failed_run_is_not_stored(cache, tmp_path):
    # a table, -o and arguments naming paths are refused before any run (test_which_runs_...)
    out = ipd(
        "serve", "--hardware", "h100", "--model", "no-such-model", "-f", "json", cache=cache, cwd=tmp_path
    )
    assert out.returncode == 2 and entries(cache) == []


def test_the_library_and_in_process_main_never_use_it(monkeypatch, tmp_path):
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("IPD_CACHE_DIR", str(cache))
    assert run_cli(*SERVE).code == 0
    assert entries(cache) == []


def test_off_disables_it(monkeypatch):
    monkeypatch.setenv("IPD_CACHE_DIR", "off")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    assert resultcache.cacheable(list(SERVE))
    assert resultcache.replay_or_record(list(SERVE)) is None


@pytest.mark.parametrize(
    ("args", "tty", "expected"),
    [
        (["compare", "a", "b", "-f", "json"], True, True),
        (["compare", "a", "b", "--format=csv"], True, True),
        (["compare", "a", "b", "-fyaml"], True, True),
        (["compare", "a", "b"], False, True),  # auto and piped: JSON
        (["compare", "a", "b"], True, False),  # auto on a terminal: a table
        (["compare", "a", "b", "-f", "markdown"], False, False),
        (["compare", "a", "b", "-f", "json", "-f", "csv"], False, False),
        (["compare", "a", "b", "-f"], False, False),
        (["compare", "a", "b", "--output=x.json"], False, False),
        (["compare", "a", "b", "-ox.json"], False, False),
        (["compare", "a", "b", "--help"], False, False),
        (["compare", "a", "b", "--scenario", "-"], False, False),
        (["sweep", "a", "-f", "json"], False, False),
        (["hardware", "list", "-f", "json"], False, False),
        ([], False, False),
    ],
)
def test_which_runs_are_cacheable(monkeypatch, args, tty, expected):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty, raising=False)
    assert resultcache.cacheable(args) is expected


def test_an_argument_naming_an_existing_path_is_not_cacheable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "s.yaml", "x: 1\n")
    for args in (
        ["serve", "--scenario", "s.yaml", "-f", "json"],
        ["serve", "--scenario=s.yaml", "-f", "json"],
    ):
        assert not resultcache.cacheable(args)


def test_a_stream_used_around_the_recorder_spoils_the_recording(monkeypatch, tmp_path):
    monkeypatch.setenv("IPD_CACHE_DIR", str(tmp_path))
    tmp_path.chmod(0o700)
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    rec = resultcache.Recording(resultcache.key(list(SERVE)), list(SERVE))
    sys.stdout.write("data\n")
    assert sys.stdout.isatty() in (True, False) and not rec.spoiled[0]
    sys.stdout.buffer  # noqa: B018 - bytes written there would not be recorded
    assert rec.spoiled[0]
    rec.store()
    assert entries(tmp_path) == []


def test_the_least_recently_used_entries_go_first(tmp_path, monkeypatch):
    tmp_path.chmod(0o700)
    monkeypatch.setenv("IPD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(resultcache, "MAX_ENTRIES", 3)
    for i in range(3):
        (tmp_path / f"result-{i}.json").write_text("x")
        os.utime(tmp_path / f"result-{i}.json", ns=(i * 10**9, i * 10**9))
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    rec = resultcache.Recording(resultcache.key(list(SERVE)), list(SERVE))
    sys.stdout.write("data\n")
    rec.store()
    names = {p.name for p in tmp_path.iterdir()}  # a set: the new entry's name is a hash
    assert names == {"notes.txt", "result-1.json", "result-2.json", f"result-{rec.key[:32]}.json"}


def test_an_input_edited_during_the_run_is_not_stored_under_the_old_key(tmp_path, monkeypatch):
    # a script rewrites a catalog file and starts ipd: the run may read the new content after
    # the key was made from the old one; storing it would replay the new answer for the old file
    cache, user = tmp_path / "c", tmp_path / "user"
    cache.mkdir(mode=0o700)
    user.mkdir()
    write(user / "economics.yaml", "economics:\n  pue: {value: 1.2, source: uptime-2024}\n")
    monkeypatch.setenv("IPD_CACHE_DIR", str(cache))
    monkeypatch.setenv("IPD_CATALOG", str(user))
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    rec = resultcache.Recording(resultcache.key(list(SERVE)), list(SERVE))
    sys.stdout.write("the answer for pue 1.5\n")
    write(user / "economics.yaml", "economics:\n  pue: {value: 1.5, source: uptime-2024}\n")
    rec.store()
    assert entries(cache) == []


def test_the_streams_error_handlers_are_in_the_key(monkeypatch):
    # output that ascii:replace wrote as 'Caf?' must not be replayed where ascii escapes it
    import io

    keys = set()
    for errors in ("strict", "replace"):
        monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors=errors))
        keys.add(resultcache.key(list(SERVE)))
    assert len(keys) == 2


def test_a_closed_stream_takes_the_full_path(monkeypatch):
    monkeypatch.setattr(sys, "stderr", None)
    assert resultcache.replay_or_record(list(SERVE)) is None


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_on_a_replay_is_one_line(served, tmp_path):
    cache = served[1]
    entry = stored_once(cache)
    env = {**os.environ, "IPD_CACHE_DIR": str(cache)}
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [sys.executable, "-m", "ipd_cli", *SERVE], stdout=full, stderr=subprocess.PIPE, text=True,
            env=env, cwd=tmp_path, timeout=120,
        )  # fmt: skip
    assert (
        r.returncode == 1
        and r.stderr.startswith("ipd: error: cannot write the output")
        and "Traceback" not in r.stderr
    )
    assert entry.stat().st_mtime_ns > 0  # replayed


def test_a_reader_that_goes_away_gets_the_full_paths_exit(served, tmp_path):
    # `ipd ... | head`: the stored output meets a closed pipe as the full path does (exit 0, no
    # message: a reader that stops reading is no error), not with a BrokenPipeError traceback
    cache = served[1]
    entry = stored_once(cache)
    p = started(*SERVE, cache=cache, cwd=tmp_path)
    p.stdout.close()  # before the child writes
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and "Traceback" not in err and err == ""
    assert entry.stat().st_mtime_ns > 0  # replayed


def test_a_signal_during_a_replay_exits_as_on_the_full_path(cache, tmp_path):
    # the stored output blocks on a full pipe; SIGTERM then ends it with the CLI's message and 143
    # (it was killed by the signal: no message, -15)
    import signal
    import time

    curve = ("serve", "--hardware", "h100", "--model", "llama-3.1-8b", "--curve", "-f", "json")
    first = ipd(*curve, cache=cache, cwd=tmp_path)
    assert first.returncode == 0 and len(first.stdout) > 70_000  # more than a pipe holds
    entry = stored_once(cache)
    p = started(*curve, cache=cache, cwd=tmp_path)
    assert p.stdout.read(1) == b"{"  # replaying (its handlers are in place before it writes)
    time.sleep(0.3)  # blocked on the pipe nobody reads
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 143 and err.decode() == "ipd: interrupted (SIGTERM)\n"
    assert entry.stat().st_mtime_ns > 0  # replayed


def test_python_m_from_a_checkout_shares_the_console_scripts_entries(tmp_path, monkeypatch):
    # `python -m ipd_cli` puts the working directory on sys.path; a checkout's egg-info there made
    # its key differ from the `ipd` script's for the same code and installation
    (tmp_path / "intelligence_per_dollar.egg-info").mkdir()
    monkeypatch.chdir(tmp_path)
    before = resultcache._distributions()
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert resultcache._distributions() == before
