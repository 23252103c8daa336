"""Security of the catalog cache and of output files (issue 14).

The cache holds data only (a JSON header line, a checksummed line of listings, then pydantic JSON
validated on load), is keyed by the content of every catalog file, is used only from a directory
(and entry) of the current user that nobody else may write, and never deletes what it did not
create. `-o FILE` replaces
regular files atomically and never renames over a device, a FIFO or a symbolic link.
"""

from __future__ import annotations

import json
import os
import pickle
import stat
from pathlib import Path

import pytest
from helpers import run_cli, write

from ipd_cli.catalog import cache
from ipd_cli.catalog.layers import catalog_dirs
from ipd_cli.catalog.loader import load_catalog

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
USER_CATALOG = "sources:\n  s: {title: t, date: 2026}\neconomics:\n  pue: {value: 1.2, source: s}\n"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("IPD_CACHE_DIR", str(d))
    return d


def _entry(cache_dir: Path, extra: list[Path] | None = None) -> Path:
    return cache_dir / cache.entry_name(catalog_dirs(extra))


class _Planted:
    """Unpickling this runs os.system: proof that a pickle in the cache would run code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_pickle_is_never_run(cache_dir, tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Planted(marker))
    _entry(cache_dir).write_bytes(payload)
    for name in ("catalog-0.pickle", f"catalog-{'0' * 32}.pickle"):
        (cache_dir / name).write_bytes(payload)
    assert load_catalog().systems
    assert not marker.exists()
    assert _entry(cache_dir).read_bytes().startswith(b'{"format": "ipd-catalog-cache"')  # rewritten


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x80\x04K\x01.",  # the pickle of 1: the wrong type broke every later run
        b"[1, 2, 3]\n",
        b'{"format": "ipd-catalog-cache", "version": 2, "key": "KEY"}\n{"sources": {}}',
        b'{"format": "ipd-catalog-cache", "version": 2, "key": "KEY"}\n{"sources": 1' + b"0" * 100,
    ],
)
def test_an_invalid_entry_is_a_miss(cache_dir, body):
    key = cache.fingerprint(catalog_dirs())
    _entry(cache_dir).write_bytes(body.replace(b"KEY", key.encode()))
    assert load_catalog().systems["h100-sxm"].accelerators == 8
    assert cache.read(catalog_dirs(), key) is not None  # rewritten whole


def test_an_entry_that_fails_validation_is_a_miss(cache_dir, catalog):
    load_catalog()
    entry = _entry(cache_dir)
    text = entry.read_text()
    assert '"utilisation":{"value":' in text
    entry.write_text(text.replace('"utilisation":{"value":', '"utilisation":{"value":7,"x":', 1))
    assert load_catalog().economics.utilisation.value == catalog.economics.utilisation.value


def test_a_same_size_edit_with_the_old_mtime_is_seen(cache_dir, tmp_path):
    user = tmp_path / "mycat"
    f = write(user / "e.yaml", USER_CATALOG)
    assert load_catalog([user]).economics.pue.value == 1.2
    assert load_catalog([user]).economics.pue.value == 1.2  # from the cache
    before = f.stat()
    f.write_text(USER_CATALOG.replace("1.2", "1.4"))  # same size, then `touch -r` the old time
    os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert f.stat().st_size == before.st_size and f.stat().st_mtime_ns == before.st_mtime_ns
    assert load_catalog([user]).economics.pue.value == 1.4


def test_a_cache_write_deletes_nothing_it_did_not_create(cache_dir):
    others = ["catalog-1234.pickle", "catalog-abcd.json", "notes.txt", ".catalog-x.tmp"]
    for name in others:
        (cache_dir / name).write_text("mine")
    load_catalog()
    assert all((cache_dir / name).read_text() == "mine" for name in others)
    assert _entry(cache_dir).exists()


def test_a_failed_write_leaves_no_temporary_file(cache_dir, monkeypatch):
    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    assert load_catalog().systems
    assert sorted(p.name for p in cache_dir.iterdir()) == []


def test_a_directory_others_may_write_is_not_used(cache_dir, capsys):
    cache_dir.chmod(0o770)
    cat = load_catalog()
    assert cat.systems
    assert list(cache_dir.iterdir()) == []
    # the library prints nothing: the line is in the catalog's warnings, which the CLI prints
    assert [w for w in cat.warnings if w.startswith(f"not using the catalog cache {cache_dir}")]
    assert capsys.readouterr().err == ""
    # a valid entry written by someone in the group is not read either
    cache_dir.chmod(0o700)
    load_catalog()
    cache_dir.chmod(0o777)
    assert cache.read(catalog_dirs(), cache.fingerprint(catalog_dirs())) is None


def test_an_entry_others_may_write_or_a_link_is_not_read(cache_dir, tmp_path):
    load_catalog()
    dirs, key = catalog_dirs(), cache.fingerprint(catalog_dirs())
    entry = _entry(cache_dir)
    assert cache.read(dirs, key) is not None
    entry.chmod(0o666)
    assert cache.read(dirs, key) is None
    entry.chmod(0o600)
    elsewhere = tmp_path / "elsewhere.json"
    entry.rename(elsewhere)
    entry.symlink_to(elsewhere)
    assert cache.read(dirs, key) is None


@pytest.mark.skipif(not ROOT, reason="changing a file's owner needs root")
def test_a_directory_or_entry_of_another_user_is_not_used(cache_dir):
    load_catalog()
    dirs, key = catalog_dirs(), cache.fingerprint(catalog_dirs())
    os.chown(_entry(cache_dir), 65534, -1)
    assert cache.read(dirs, key) is None
    os.chown(_entry(cache_dir), 0, -1)
    os.chown(cache_dir, 65534, -1)
    assert cache.read(dirs, key) is None


def test_the_cache_directory_follows_the_platform_rules(tmp_path, monkeypatch):
    monkeypatch.delenv("IPD_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    assert cache.cache_dir() is None  # not /.cache, nor the password file's home
    nowhere = tmp_path / "gone" / "home"
    monkeypatch.setenv("HOME", str(nowhere))
    assert cache.cache_dir() is None
    assert load_catalog().systems
    assert not (tmp_path / "gone").exists()  # no made-up home
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert cache.cache_dir() == (home / ".cache" / "ipd", False)
    load_catalog()
    made = home / ".cache" / "ipd"
    assert stat.S_IMODE(made.stat().st_mode) == 0o700 and any(made.iterdir())
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # ignored, as the XDG rules say
    assert cache.cache_dir() == (home / ".cache" / "ipd", False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == (tmp_path / "xdg" / "ipd", False)


def test_a_cached_catalog_equals_the_loaded_one(cache_dir):
    fresh = load_catalog()  # built from YAML, then written
    cached = load_catalog()  # read back
    assert cache.read(catalog_dirs(), cache.fingerprint(catalog_dirs())) is not None
    for name in ("sources", "systems", "models", "workloads", "economics", "serving", "rl", "origins"):
        assert getattr(cached, name) == getattr(fresh, name), name
    assert cached.aliases == fresh.aliases


# --- output files: atomic replace for regular files only ---------------------------------------

TRAIN = ("train", "--hardware", "hopper", "--model", "llama-3.1-8b", "--tokens", "1e12", "--gpus", "64")


def _temps(d: Path) -> list[str]:
    return [p.name for p in d.iterdir() if p.name.endswith(".tmp")]


def _char_device(tmp_path: Path) -> Path:
    """A character device to write to: a private copy of /dev/null as root, else /dev/null."""
    if ROOT and hasattr(os, "mknod"):
        dev = tmp_path / "null"
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        return dev
    return Path("/dev/null")


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="no /dev/null")
@pytest.mark.parametrize("force", [False, True])
def test_a_device_is_written_in_place_never_replaced(tmp_path, force):
    # as root, `-o /dev/null --force` used to rename a regular file over the system's /dev/null
    dev = _char_device(tmp_path)
    before = os.stat(dev)
    r = run_cli(*TRAIN, "-f", "json", "-o", str(dev), *(["--force"] if force else []))
    assert r.code == 0, r.stderr
    after = os.stat(dev)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert _temps(tmp_path) == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize(
    "args", [TRAIN, ("sweep", "--vary", "hardware=hopper", "--workload", "pretrain-10t-moe")]
)
def test_a_fifo_is_written_in_place(tmp_path, args):
    import threading

    fifo = tmp_path / "out.pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    try:
        r = run_cli(*args, "-f", "json", "-o", str(fifo), "--force")
    finally:
        reader.join(timeout=10)
        if reader.is_alive():  # ipd never opened the FIFO: give the reader its end of file
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            reader.join(timeout=10)
    assert r.code == 0, r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(got[0])  # the whole document came through the pipe
    assert _temps(tmp_path) == []


def test_a_symlink_is_followed_never_replaced(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    r = run_cli(*TRAIN, "-o", str(link))
    assert r.code == 2 and "link.json: already exists; add --force" in r.stderr
    r = run_cli(*TRAIN, "-o", str(link), "--force")
    assert r.code == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)  # the link stays
    assert json.loads(real.read_text())["pretraining"]["gpus"] == 64  # the file it names is new
    assert _temps(tmp_path) == []
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere.json")
    r = run_cli(*TRAIN, "-o", str(dangling), "--force")
    assert r.code == 2 and "a symbolic link to a missing file" in r.stderr
    assert dangling.is_symlink() and not (tmp_path / "nowhere.json").exists()


def test_sockets_and_block_devices_are_refused(tmp_path):
    import socket

    if not hasattr(socket, "AF_UNIX"):
        pytest.skip("no Unix sockets here")
    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        r = run_cli(*TRAIN, "-o", str(path), "--force")
    assert r.code == 2 and "s.json: is a socket; ipd writes regular files" in r.stderr
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_an_unwritable_directory_is_an_input_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        targets = [locked / "out.json"]
        if os.access(locked, os.W_OK):  # root writes anywhere; /sys refuses new files even to root
            targets = [Path("/sys/ipd-test.json")] if Path("/sys").is_dir() else []
        if not targets:
            pytest.skip("no directory this user cannot write")
        for out in targets:
            r = run_cli(*TRAIN, "-o", str(out))
            assert r.code == 2, r.stderr
            assert r.stderr.startswith(f"ipd: error: {out.parent}: cannot write in this directory")
            assert r.stderr.count("\n") == 1 and "internal error" not in r.stderr
    finally:
        locked.chmod(0o700)


def test_the_cli_says_once_that_it_does_not_use_an_untrusted_cache_directory(tmp_path):
    shared = tmp_path / "group-cache"
    shared.mkdir(mode=0o770)
    shared.chmod(0o770)
    r = run_cli("hardware", "show", "h100", "-f", "json", env={"IPD_CACHE_DIR": str(shared)})
    assert r.code == 0 and json.loads(r.stdout)
    lines = [ln for ln in r.stderr.splitlines() if "not using the catalog cache" in ln]
    assert len(lines) == 1 and lines[0].startswith(f"ipd: warning: not using the catalog cache {shared}: ")
    assert list(shared.iterdir()) == []
