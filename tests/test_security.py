"""Security of the catalog cache and of output files (issue 14).

The cache holds data only (a JSON header line, then pydantic JSON validated on load), is keyed
by the content of every catalog file, is used only from a directory (and entry) of the current
user that nobody else may write, and never deletes what it did not create. `-o FILE` replaces
regular files atomically and never renames over a device, a FIFO or a symbolic link.
"""

from __future__ import annotations

import os
import pickle
import stat
from pathlib import Path

import pytest
from helpers import write

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
    assert load_catalog().systems
    assert list(cache_dir.iterdir()) == []
    assert "not using the catalog cache" in capsys.readouterr().err
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
