"""Load the catalog: the built-in one plus user layers, validated, cached, with overrides.

``load_catalog`` is the one entry point; the work is done by :mod:`.layers` (reading and
merging YAML), :mod:`.catalog` (validation), :mod:`.cache` (the validated catalog kept on
disk) and :mod:`.overrides` (``--set`` values applied to an in-memory copy).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from . import cache
from .catalog import Catalog, build
from .dirs import catalog_dirs, empty_dir_warnings, layer_files
from .layers import load_raw
from .plausibility import user_file_warnings


def load_catalog(extra_dirs: list[Path] | None = None, sets: list[str] | None = None) -> Catalog:
    """The built-in catalog plus user directories (``IPD_CATALOG``, ``extra_dirs``), with
    ``sets`` (``PATH=VALUE`` strings) applied. User values far outside the built-in catalog's
    span (a unit slip) leave a line in ``Catalog.warnings``, as does a cache directory not used
    (others may write to it); nothing is printed.

    The validated catalog is cached (see :mod:`ipd_cli.catalog.cache`); overrides are applied to
    a copy of it, re-validating only the entries they touch.
    """
    dirs = catalog_dirs(extra_dirs)
    for d in dirs:
        layer_files(d)  # a missing directory is an error even when a cache exists
    # None: no cache, or a file the YAML reader will name below
    key = cache.fingerprint(dirs) if cache.cache_dir() is not None else None
    cat = cache.read(dirs, key) if key else None
    if cat is None:
        cat = build(load_raw(extra_dirs))
        # a file edited while it was read (a script rewriting a catalog file for each run it
        # starts) would store one content's catalog under the other's key: store only when the
        # files still have the content the key was made of
        if key and cache.fingerprint(dirs) == key:
            cache.write(dirs, key, cat)
    # a user directory's values are checked against the built-in spans; an untrusted cache
    # directory is said too (the library prints nothing: the CLI prints Catalog.warnings)
    notes = cache.drain_warnings() + user_warnings(cat, dirs)
    if notes:
        cat = dataclasses.replace(cat, warnings=notes)
    return cat.with_overrides(sets) if sets else cat


def user_warnings(cat: Catalog, dirs: list[Path]) -> list[str]:
    """The lines a catalog's user directories give (none for the built-in catalog alone): their
    files' values far outside the built-in spans, and a directory that holds no catalog file."""
    return user_file_warnings(cat) + empty_dir_warnings(dirs) if len(dirs) > 1 else []
