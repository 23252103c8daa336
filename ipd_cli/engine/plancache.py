"""The plan searches' results, kept on disk by their inputs, so a repeated command does not search
again (the 10T deadline search of `ipd compare vera-rubin blackwell` costs most of a second).

The file lives next to the catalog cache (``$IPD_CACHE_DIR``; ``off`` disables both). Its name
hashes the ipd version and the path, size and mtime of the engine modules, so a change to the
model never reads old answers; the key of an entry is every input of the search, exactly. Any
failure to read or write is silent: the search then simply runs.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

from ipd_cli.catalog.cache import cache_dir

MAX_ENTRIES = 512
_ENGINE = ("trainplan.py", "trainstep.py", "pretraining.py", "search.py", "formulas.py", "plancache.py")
_loaded: dict[str, dict] = {}
_dirty: set[str] = set()


def _path() -> Path | None:
    d = cache_dir()
    if d is None:
        return None
    from ipd_cli._version import __version__

    h = hashlib.sha256(__version__.encode())
    for name in _ENGINE:
        st = (Path(__file__).parent / name).stat()
        h.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return d / f"plans-{h.hexdigest()[:24]}.pickle"


def _entries(path: Path) -> dict:
    key = str(path)
    if key not in _loaded:
        try:
            with open(path, "rb") as fh:
                _loaded[key] = pickle.load(fh)
        except Exception:
            _loaded[key] = {}
    return _loaded[key]


def get(key: tuple) -> Any | None:
    try:
        path = _path()
        return None if path is None else _entries(path).get(key)
    except Exception:
        return None


def put(key: tuple, value: Any) -> None:
    """Keep an answer; the file is written once, when the process exits."""
    try:
        path = _path()
        if path is None:
            return
        entries = _entries(path)
        entries[key] = value
        while len(entries) > MAX_ENTRIES:
            entries.pop(next(iter(entries)))
        if not _dirty:
            atexit.register(_flush)
        _dirty.add(str(path))
    except Exception:
        return


def _flush() -> None:
    for name in list(_dirty):
        _write(Path(name), _loaded.get(name, {}))
    _dirty.clear()


def _write(path: Path, entries: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob("plans-*.pickle"):
            if old != path:
                old.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(entries, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except Exception:
        return
