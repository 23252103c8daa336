"""A cache of the validated catalog, so each command does not re-parse and re-validate YAML.

Parsing and validating the catalog costs more than the whole estimate, and every command
(and every TAB completion) pays it. The cache lives in ``$IPD_CACHE_DIR`` (default
``$XDG_CACHE_HOME/ipd`` or ``~/.cache/ipd``); ``IPD_CACHE_DIR=off`` disables it. The key
hashes the ipd version and the path, size and mtime of each catalog file and of each
catalog schema module. Any failure to read or write the cache is silent: the catalog is
then loaded from YAML as usual.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

ENV = "IPD_CACHE_DIR"


def cache_dir() -> Path | None:
    value = os.environ.get(ENV)
    if value == "off":
        return None
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ipd"


def fingerprint(dirs: list[Path]) -> str:
    from ipd_cli._version import __version__

    h = hashlib.sha256(__version__.encode())
    files = sorted(Path(__file__).parent.glob("*.py"))  # a schema change must not read old pickles
    for d in dirs:
        files += sorted([*d.glob("*.yaml"), *(d / "workloads").glob("*.yaml")])
    for path in files:
        st = path.stat()
        h.update(f"{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:32]


def read(key: str) -> Any | None:
    d = cache_dir()
    if d is None:
        return None
    try:
        with open(d / f"catalog-{key}.pickle", "rb") as fh:
            return pickle.load(fh)
    except Exception:  # a missing, stale or corrupt cache only costs a reload
        return None


def write(key: str, value: Any) -> None:
    d = cache_dir()
    if d is None:
        return
    try:
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("catalog-*.pickle"):
            old.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, d / f"catalog-{key}.pickle")
    except Exception:
        return
