"""A cache of the validated catalog, so each command does not re-parse and re-validate YAML.

Parsing and validating the catalog costs more than the whole estimate, and every command
(and every TAB completion) pays it. The cache holds data only, never code:

* **Format**: a JSON header line (format, version, key); a line with the listings derived from
  the validated catalog when it was written (``ipd hardware|models|workloads list``'s, as JSON,
  with the unit-slip warnings of its user files under ``warnings``),
  after the SHA-256 of that JSON; then the catalog as pydantic JSON of plain values, validated on
  load by the same schema models as the YAML (``model_validate_json``); aliases and
  cross-references are checked again. Anything unreadable, of another format or key, or invalid
  is a miss: the catalog is then loaded from YAML and the entry rewritten. A listing is read
  without the catalog (:func:`stored_listing`): its checksum and shape are checked. A listing
  whose JSON dump differs from its Python one (a NaN, which JSON makes null; an object) is not
  stored.
* **Key**: a SHA-256 of the ipd version, the source of the catalog modules and of the code the
  listings come from, and the name and content of every catalog file (not sizes and times: a
  same-size edit is seen at once). One entry per list of catalog directories, replaced when the
  key changes.
* **Trust**: the directory must belong to the current user and not be writable by group or
  others, and so must the entry (a regular file, not a link); otherwise the cache is not used.
  ``$IPD_CACHE_DIR`` names the directory (``off`` disables the cache); else
  ``$XDG_CACHE_HOME/ipd``, else ``$HOME/.cache/ipd`` when ``$HOME`` is an existing directory,
  else no cache. The default directory is created with mode 0700.
* **Writes** go to a temporary file in the directory, renamed over the entry; a failed write
  removes its temporary file; nothing else in the directory is touched.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .catalog import Catalog

ENV = "IPD_CACHE_DIR"
FORMAT = "ipd-catalog-cache"
VERSION = 4  # 4: fields a file leaves out are left out (their defaults are not stored as given)
MAX_ENTRY_BYTES = 64_000_000  # the built-in catalog is ~130 kB; user files are at most 2 MB each
# the code the stored listings come from (with this package's modules, part of the key)
_LISTING_CODE = (
    Path(__file__).parents[1] / "listing.py",
    Path(__file__).parents[1] / "engine" / "result_base.py",
)
_SECTIONS = (
    "sources",
    "accelerators",
    "cpus",
    "systems",
    "models",
    "workloads",
    "economics",
    "efficiency",
    "serving",
    "rl",
)


def cache_dir() -> tuple[Path, bool] | None:
    """(directory, given explicitly) or None when there is none (``IPD_CACHE_DIR=off``, no home)."""
    value = os.environ.get(ENV)
    if value == "off":
        return None
    if value:
        return Path(value), True
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):  # the XDG rule: a relative path is ignored
        return Path(xdg) / "ipd", False
    home = os.environ.get("HOME", "")
    if os.path.isabs(home) and os.path.isdir(home):  # never /.cache, never a home made up
        return Path(home) / ".cache" / "ipd", False
    return None


_warned: set[str] = set()
# warnings not yet handed to a caller: load_catalog puts them in Catalog.warnings (the library
# prints nothing); the CLI's result store and stored listings, which open the cache before any
# catalog is loaded, print them (drain_warnings)
_pending: list[str] = []


def _warn(message: str) -> None:
    if message not in _warned:  # once per process, though the cache is opened to read and to write
        _warned.add(message)
        _pending.append(message)


def drain_warnings() -> list[str]:
    """The cache warnings not handed out yet (each once per process), removed from the queue."""
    out = _pending[:]
    _pending.clear()
    return out


def _made(path: Path, explicit: bool) -> bool:
    """Whether the cache directory exists or was made: an explicit one is made, not its parents
    (an input review: IPD_CACHE_DIR=/nonexist/x made /nonexist at the root); the default one's
    parents (~/.cache) are."""
    try:
        if explicit:
            os.mkdir(path, mode=0o700)
        else:
            os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:
        return True
    except OSError:
        return False
    return True


def open_dir(create: bool) -> int | None:
    """A descriptor of the cache directory, if it exists (or was made) and can be trusted."""
    if os.open not in os.supports_dir_fd or not hasattr(os, "geteuid"):
        return None  # the checks below need POSIX directory descriptors
    found = cache_dir()
    if found is None:
        return None
    path, explicit = found
    if explicit and not path.is_absolute():  # it would follow the working directory
        _warn(f"not using the cache {ENV}={path}: give an absolute path (or off)")
        return None
    if create and not _made(path, explicit):
        if explicit and not path.parent.is_dir():  # was silent (a review): say why it is unused
            _warn(f"not using the cache {ENV}={path}: its parent directory does not exist (or off)")
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    st = os.fstat(fd)
    problem = None
    if st.st_uid != os.geteuid():
        problem = "it belongs to another user"
    elif st.st_mode & 0o022:
        if explicit:
            problem = "group or others may write to it"
        else:  # our own default directory (older ipd made it with the umask's mode): tighten it
            try:
                os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~0o077)
            except OSError:
                problem = "group or others may write to it"
    if problem:
        os.close(fd)
        _warn(f"not using the catalog cache {path}: {problem} (use a private directory in {ENV}, or off)")
        return None
    return fd


def entry_name(dirs: list[Path]) -> str:
    """The entry of one list of catalog directories (the key inside says which files it holds)."""
    h = hashlib.sha256("\0".join(str(d.resolve()) for d in dirs).encode())
    return f"catalog-{h.hexdigest()[:32]}.json"


def fingerprint(dirs: list[Path]) -> str | None:
    """SHA-256 of the ipd version, the schema modules and every catalog file's name and content.

    None when a file cannot be read as a regular file of bounded size: then nothing is cached
    and the YAML reader reports the problem.
    """
    from ipd_cli._version import __version__
    from ipd_cli.errors import InputError
    from ipd_cli.files import read_bounded

    from .dirs import layer_files
    from .yamlio import MAX_FILE_BYTES

    h = hashlib.sha256(f"{FORMAT} {VERSION} {__version__}\n".encode())
    if len(dirs) > 1:  # a user file's value with no source cites `user`, dated today: a cached
        # catalog kept the day it was written (a fresh-eyes review), so user catalogs key on the date
        import datetime as dt

        h.update(f"date\0{dt.date.today().isoformat()}\0".encode())
    try:
        for module in [*sorted(Path(__file__).parent.glob("*.py")), *_LISTING_CODE]:  # a code change
            h.update(module.name.encode() + b"\0" + module.read_bytes() + b"\0")
        for d in dirs:
            sections, workloads = layer_files(d)
            h.update(f"dir\0{d}\0".encode())
            for path in [*sections, *workloads]:
                data = read_bounded(path, MAX_FILE_BYTES)
                h.update(f"{path.relative_to(d).as_posix()}\0{len(data)}\0".encode() + data)
    except (OSError, InputError):
        return None
    return h.hexdigest()


def header(fmt: str, version: int, key: str) -> bytes:
    """An entry's first line: its format, version and key, as JSON."""
    return json.dumps({"format": fmt, "version": version, "key": key}).encode() + b"\n"


def _header(key: str) -> bytes:
    return header(FORMAT, VERSION, key)


def checksummed(text: bytes) -> bytes:
    """``text`` after its SHA-256 and a space (what :func:`checked_json` reads back)."""
    return hashlib.sha256(text).hexdigest().encode() + b" " + text


def checked_json(data: bytes) -> Any:
    """The JSON after a :func:`checksummed` prefix, or None when the checksum or the JSON is bad."""
    digest, _, text = data.partition(b" ")
    if hashlib.sha256(text).hexdigest().encode() != digest:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


@functools.cache
def _model() -> Any:
    """The pydantic model of a cache entry (built on first use: a cold start never pays for it)."""
    from pydantic import BaseModel, ConfigDict

    from .schema import (
        Accelerator,
        Economics,
        Efficiency,
        HostCpu,
        Model,
        RlEfficiency,
        ServingEfficiency,
        Source,
        System,
        Workload,
    )

    class CachedCatalog(BaseModel):
        model_config = ConfigDict(extra="forbid")

        sources: dict[str, Source]
        accelerators: dict[str, Accelerator]
        cpus: dict[str, HostCpu]
        systems: dict[str, System]
        models: dict[str, Model]
        workloads: dict[str, Workload]
        economics: Economics
        efficiency: Efficiency
        serving: ServingEfficiency
        rl: RlEfficiency
        origins: list[tuple[str, str, str]]  # (section, name, file)

    return CachedCatalog


def read(dirs: list[Path], key: str) -> Catalog | None:
    """The cached catalog for ``dirs`` if its entry is trusted, of this key, and valid; else None."""
    parts = _parts(dirs, key)
    if parts is None:
        return None
    body = parts[1]
    seen = _DECODED.get(key)
    if seen is not None and seen[0] == body:
        return _own(seen[1])
    try:
        catalog = _decode(body)
    except Exception:  # invalid JSON, a value the schema refuses, a broken reference: a miss
        return None
    while len(_DECODED) >= _DECODED_MAX:
        del _DECODED[next(iter(_DECODED))]  # the oldest
    _DECODED[key] = (body, catalog)
    return _own(catalog)


def _own(catalog: Catalog) -> Catalog:
    """A catalog of its own for each load: its tables copied, the frozen entries shared (a library
    review: `load().systems["x"] = ...` reached every later load in the process, until a `sets`
    load failed on the alias it duplicated). Microseconds: the tables hold references."""
    import dataclasses

    tables: dict[str, Any] = {
        f.name: dict(v) if isinstance(v := getattr(catalog, f.name), dict) else v
        for f in dataclasses.fields(catalog)
        if f.init
    }
    tables["aliases"] = {k: dict(v) for k, v in catalog.aliases.items()}
    tables["overrides"], tables["warnings"] = list(catalog.overrides), list(catalog.warnings)
    return dataclasses.replace(catalog, **tables)


# Entries this process decoded, by key, with the bytes they were decoded from: a process that
# loads the catalog again (the API, tests) gets a copy of the same catalog back when the entry on
# disk is still those bytes (it was read and checked as above; a changed entry is decoded again).
# The entries are frozen and shared; each load has its own tables (:func:`_own`).
_DECODED: dict[str, tuple[bytes, Catalog]] = {}
_DECODED_MAX = 4


def stored_listing(kind: str) -> dict[str, Any] | None:
    """The listing of ``kind`` alone (see :func:`stored_listing_and_warnings`)."""
    found = stored_listing_and_warnings(kind)
    return found[0] if found else None


def stored_listing_and_warnings(kind: str) -> tuple[dict[str, Any], list[str]] | None:
    """The listing of ``kind`` (``hardware``, ``models``, ``workloads``) stored with the cached
    catalog of the built-in and ``IPD_CATALOG`` directories, if the entry is trusted, of the
    current key (the content of every catalog file and the listing code) and its listing line is
    intact (checksum, shape); else None. It is what the listing function made of the validated
    catalog when the entry was written: its ``model_dump(mode="json")``, equal to the Python one;
    with the unit-slip warnings of the user catalog's values (:mod:`.plausibility`)."""
    if cache_dir() is None:
        return None
    from .dirs import catalog_dirs

    dirs = catalog_dirs()
    key = fingerprint(dirs)  # None for a missing IPD_CATALOG directory: the full path reports it
    parts = _parts(dirs, key) if key else None
    if parts is None:
        return None
    listings = checked_json(parts[0])
    listing = listings.get(kind) if isinstance(listings, dict) else None
    warnings = listings.get("warnings") if isinstance(listings, dict) else None
    if (
        not isinstance(listing, dict)
        or listing.get("kind") != kind
        or not isinstance(listing.get("items"), list)
        or not isinstance(warnings, list)
        or not all(isinstance(w, str) for w in warnings)
    ):
        return None
    return listing, [*drain_warnings(), *warnings]


def _parts(dirs: list[Path], key: str) -> tuple[bytes, bytes] | None:
    """(the listings line, the catalog) of the entry of ``dirs`` if it is trusted and of ``key``."""
    fd = open_dir(create=False)
    if fd is None:
        return None
    try:
        data = read_entry(fd, entry_name(dirs))
    finally:
        os.close(fd)
    header = _header(key)
    if data is None or not data.startswith(header):
        return None
    listings, newline, body = data[len(header) :].partition(b"\n")
    return (listings, body) if newline else None


def read_entry(dir_fd: int, name: str) -> bytes | None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid != os.geteuid()
            or st.st_mode & 0o022
            or st.st_size > MAX_ENTRY_BYTES
        ):
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(st.st_size + 1)  # read(n) allocates n bytes: ask for what is there
    except OSError:
        return None
    finally:
        os.close(fd)


def _decode(body: bytes) -> Catalog:
    from .catalog import Catalog, finish

    entry = _model().model_validate_json(body)
    sections = {name: getattr(entry, name) for name in _SECTIONS}
    origins = {(section, name): origin for section, name, origin in entry.origins}
    catalog = Catalog(**sections, origins=origins, aliases={})
    finish(catalog)  # aliases and cross-references, as after a YAML load
    return catalog


def _encode(catalog: Catalog) -> bytes:
    entry = _model().model_construct(
        **{name: getattr(catalog, name) for name in _SECTIONS},
        origins=[(section, name, origin) for (section, name), origin in catalog.origins.items()],
    )
    # defaults stay unset, as a load from the files leaves them (an origin tells them apart)
    return entry.model_dump_json(exclude_unset=True).encode()


def _listings(catalog: Catalog, dirs: list[Path]) -> bytes:
    """The listings line: the SHA-256 of the JSON, a space, the JSON of each listing's result."""
    from ipd_cli.listing import list_hardware, list_models, list_workloads

    listings = {}
    for kind, make in [("hardware", list_hardware), ("models", list_models), ("workloads", list_workloads)]:
        listing = make(catalog)
        data = listing.model_dump(mode="json")
        if data == listing.model_dump(mode="python"):  # else (a NaN, an object) not stored: a miss
            listings[kind] = data
    from .loader import user_warnings

    text = json.dumps({**listings, "warnings": user_warnings(catalog, dirs)}).encode()
    return checksummed(text) + b"\n"


def write(dirs: list[Path], key: str, catalog: Catalog) -> None:
    """Store ``catalog`` under ``key``; any failure only means no cache (and no file left)."""
    try:
        data = _header(key) + _listings(catalog, dirs) + _encode(catalog)
    except Exception:
        return
    if len(data) > MAX_ENTRY_BYTES:
        return
    store_entry(entry_name(dirs), data)


def store_entry(name: str, data: bytes) -> None:
    """Write ``data`` as entry ``name`` of the cache directory, atomically (a temporary file in the
    directory, renamed over the entry); any failure only means no entry (and no file left)."""
    fd = open_dir(create=True)
    if fd is None:
        return
    import secrets

    tmp = f".{name.partition('-')[0]}-{secrets.token_hex(8)}.tmp"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        out = os.open(tmp, flags, 0o600, dir_fd=fd)
        try:
            with os.fdopen(out, "wb") as fh:
                fh.write(data)
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:  # a full disk, a signal: the temporary file goes
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
            raise
    except OSError:
        return
    finally:
        os.close(fd)
