"""A cache of whole outputs of the estimate commands, for the ``ipd`` console script only.

``ipd compare vera-rubin blackwell -f json`` spends ~1.3 s in plan and deployment searches
whose answer is a pure function of the arguments, the catalog and the code; scripts and
pipelines run the same command again and again. The console script (not the library, not
``cli.main`` called in-process) stores what a successful run printed and prints it again for the
same key, without importing the CLI, pydantic, numpy or the engine:

* **What is cached**: ``compare``, ``serve``, ``train`` and ``rl`` with a machine-readable format
  (``-f json|csv|yaml``, or no ``-f`` with stdout not a terminal, which is JSON), run to exit 0.
  Not cached: a table; ``-o``/``--output``; ``--help``; any argument that names an existing
  path or is ``-`` (a scenario, workload or catalog given as a file: ``IPD_CATALOG`` directories
  are in the key instead); a run that wrote its output other than through ``write`` (a file
  descriptor, the binary buffer) or that failed.
* **Key**: a SHA-256 of the arguments as typed; the catalog key (:func:`.catalog.cache.fingerprint`:
  the ipd version, the catalog modules and every built-in and ``IPD_CATALOG`` file's content);
  the source of every module of this package; the names of the distributions installed on
  ``sys.path`` (numpy, pydantic, ... with their versions) and the Python version; the local date
  (a ``--set`` value is cited as "given on the command line" with today's date); whether
  stdout/stderr are terminals, their encodings and error handlers; and the ``IPD_*``,
  ``COLUMNS``, ``NO_COLOR``, ``FORCE_COLOR``, ``TERM`` and ``PYDANTIC_DISABLE_PLUGINS``
  variables. The key is made again when the run ends: if it changed (a catalog file rewritten
  while the command ran, midnight), nothing is stored. A closed stdout or stderr, a full disk or
  a reader that goes away behave as on the full path.
* **Entry**: the catalog cache's directory and trust rules (:mod:`.catalog.cache`;
  ``IPD_CACHE_DIR=off`` disables both); a JSON header line (format, version, key), the SHA-256 of
  the body, the body: the run's stdout and stderr writes in order. At most :data:`MAX_ENTRIES`
  entries of at most :data:`MAX_ENTRY_BYTES`; the least recently used go first.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

FORMAT = "ipd-result-cache"
VERSION = 1
COMMANDS = frozenset({"compare", "serve", "train", "rl"})
MACHINE_FORMATS = frozenset({"json", "csv", "yaml"})
MAX_ENTRIES = 64
MAX_ENTRY_BYTES = 8_000_000
PREFIX = "result-"
_ENV_EXACT = ("COLUMNS", "NO_COLOR", "FORCE_COLOR", "TERM", "PYDANTIC_DISABLE_PLUGINS")
_PACKAGE = Path(__file__).resolve().parent
# attributes of a standard stream that reading or calling does not write around the recorder
_PLAIN_ATTRIBUTES = frozenset(
    {"encoding", "errors", "isatty", "flush", "closed", "name", "mode", "line_buffering", "writable"}
)


def _format(args: list[str]) -> str | None:
    """The output format the arguments ask for, in lower case ("auto" when none), or None when they are not a
    cacheable run (a file output, help, two formats, an option without its value)."""
    formats = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--help", "-o", "--output") or a.startswith("--output="):
            return None
        if a.startswith("-o") and not a.startswith("--"):
            return None
        if a in ("-f", "--format"):
            if i + 1 == len(args):
                return None
            formats.append(args[i + 1])
            i += 2
            continue
        if a.startswith("--format="):
            formats.append(a.removeprefix("--format="))
        elif a.startswith("-f") and not a.startswith("--"):
            formats.append(a[2:])
        i += 1
    if len(formats) > 1:
        return None
    return formats[0].lower() if formats else "auto"  # -f JSON, as the CLI folds it


def cacheable(args: list[str]) -> bool:
    if not args or args[0] not in COMMANDS:
        return False
    fmt = _format(args[1:])
    if fmt is None or not (fmt in MACHINE_FORMATS or (fmt == "auto" and not sys.stdout.isatty())):
        return False
    for a in args[1:]:
        value = a.partition("=")[2] if a.startswith("--") and "=" in a else a
        if value == "-" or (value and os.path.lexists(value)):
            return False
    return True


def _distributions() -> list[str]:
    names: list[str] = []
    for entry in sys.path:
        if os.path.abspath(entry or ".") == os.getcwd():  # `python -m` puts it first: no installation
            continue
        try:
            names += sorted(n for n in os.listdir(entry or ".") if n.endswith((".dist-info", ".egg-info")))
        except OSError:
            continue
    return names


def key(args: list[str]) -> str | None:
    """The key of this run, or None when the catalog cannot be fingerprinted (the full path then
    reports the problem)."""
    from ipd_cli.catalog.cache import fingerprint
    from ipd_cli.catalog.dirs import catalog_dirs

    catalog = fingerprint(catalog_dirs())
    if catalog is None:
        return None
    h = hashlib.sha256(f"{FORMAT} {VERSION}\n".encode())
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("IPD_") or k in _ENV_EXACT)
    context = {
        "args": args,
        "catalog": catalog,
        "env": env,
        "date": time.strftime("%Y-%m-%d"),
        "python": sys.version,
        "distributions": _distributions(),
        "tty": [sys.stdout.isatty(), sys.stderr.isatty()],
        # what a stream cannot encode is escaped, replaced or an error, by its encoding and errors
        "streams": [
            [getattr(f, "encoding", None), getattr(f, "errors", None)] for f in (sys.stdout, sys.stderr)
        ],
    }
    h.update(json.dumps(context).encode())
    try:
        for module in sorted(_PACKAGE.rglob("*.py")):
            h.update(f"{module.relative_to(_PACKAGE).as_posix()}\0".encode() + module.read_bytes() + b"\0")
    except OSError:
        return None
    return h.hexdigest()


def _entry_name(run_key: str) -> str:
    return f"{PREFIX}{run_key[:32]}.json"


def _header(run_key: str) -> bytes:
    from ipd_cli.catalog.cache import header

    return header(FORMAT, VERSION, run_key)


def _said(fd: int | None) -> int | None:
    """``fd``, after printing what opening the cache directory warned about (an untrusted
    directory: the library keeps such lines for Catalog.warnings; here no catalog is loaded yet)."""
    from ipd_cli.catalog.cache import drain_warnings

    for line in drain_warnings():
        sys.stderr.write(f"ipd: warning: {line}\n")
    return fd


def lookup(run_key: str) -> list[tuple[int, str]] | None:
    """The writes of the stored run of ``run_key`` ((1 or 2, text) in order), if its entry is
    trusted, intact and of this key; else None."""
    from ipd_cli.catalog.cache import checked_json, open_dir, read_entry

    fd = _said(open_dir(create=False))
    if fd is None:
        return None
    name = _entry_name(run_key)
    try:
        data = read_entry(fd, name)
        header = _header(run_key)
        if data is None or not data.startswith(header):
            return None
        writes = checked_json(data[len(header) :])
        if not isinstance(writes, list) or not all(
            isinstance(w, list) and len(w) == 2 and w[0] in (1, 2) and isinstance(w[1], str) for w in writes
        ):
            return None
        try:
            os.utime(name, dir_fd=fd)  # least recently used goes first
        except (OSError, NotImplementedError):
            pass
        return [(w[0], w[1]) for w in writes]
    finally:
        os.close(fd)


class _Recorder:
    """A standard stream that keeps what is written to it (in the shared list, in order) and
    notices anything that could write around it."""

    def __init__(self, stream: Any, number: int, writes: list[tuple[int, str]], spoiled: list[bool]):
        self._stream, self._number, self._writes, self._spoiled = stream, number, writes, spoiled

    def write(self, text: str) -> int:
        try:
            n = self._stream.write(text)
        except BaseException:  # a reader gone (exit 0, output cut), a signal: nothing to store
            self._spoiled[0] = True
            raise
        self._writes.append((self._number, text))
        return n

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BaseException:
            self._spoiled[0] = True
            raise

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        if name not in _PLAIN_ATTRIBUTES:  # fileno, buffer, reconfigure...: not recorded
            self._spoiled[0] = True
        return getattr(self._stream, name)


class Recording:
    """Records stdout and stderr from now on; :meth:`store` keeps them under the run's key."""

    def __init__(self, run_key: str, args: list[str]) -> None:
        self.key, self.args = run_key, list(args)
        self.writes: list[tuple[int, str]] = []
        self.spoiled = [False]
        sys.stdout = _Recorder(sys.stdout, 1, self.writes, self.spoiled)
        sys.stderr = _Recorder(sys.stderr, 2, self.writes, self.spoiled)

    def store(self) -> None:
        # spoiled, or the key changed while the command ran (a catalog file rewritten after the
        # key was made and before the run read it; the date at midnight): the output may belong
        # to other inputs than the key's, so it is not stored
        if self.spoiled[0] or key(self.args) != self.key:
            return
        from ipd_cli.catalog.cache import checksummed, open_dir, store_entry

        data = _header(self.key) + checksummed(json.dumps(self.writes).encode())
        if len(data) > MAX_ENTRY_BYTES:
            return

        fd = _said(open_dir(create=True))
        if fd is None:
            return
        try:
            _evict(fd)
        finally:
            os.close(fd)
        store_entry(_entry_name(self.key), data)


def _evict(dir_fd: int) -> None:
    """Keep at most MAX_ENTRIES - 1 result entries before a new one is written."""
    try:
        entries = []
        for name in os.listdir(dir_fd):
            if name.startswith(PREFIX) and name.endswith(".json"):
                entries.append((os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mtime_ns, name))
        for _, name in sorted(entries)[: max(0, len(entries) - MAX_ENTRIES + 1)]:
            os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def replay_or_record(args: list[str]) -> Recording | None:
    """Print the stored output of this run and exit 0 if there is one; else a Recording when the
    run can be stored (call its ``store`` after a successful run), or None."""
    from ipd_cli.catalog.cache import cache_dir

    if sys.stdout is None or sys.stderr is None:  # a closed stream (`2>&-`): the full path copes
        return None
    if cache_dir() is None or not cacheable(args):
        return None
    run_key = key(args)
    if run_key is None:
        return None
    writes = lookup(run_key)
    if writes is None:
        return Recording(run_key, args)
    from ipd_cli.errors import Interrupted
    from ipd_cli.signals import discard_stdout, installed

    streams = {1: sys.stdout, 2: sys.stderr}
    try:
        with installed():  # SIGTERM, SIGHUP as on the full path: a message and 128 + the signal
            for number, text in writes:
                streams[number].write(text)
            sys.stdout.flush()
    except Interrupted as e:
        detail = "" if e.name == "SIGINT" else f" ({e.name})"
        sys.stderr.write(f"ipd: interrupted{detail}\n")
        raise SystemExit(e.exit_code) from None
    except BrokenPipeError:
        # the reader went away (`| head`): exit 0 quietly, as the full path does (cli._reader_gone);
        # what is still buffered goes nowhere rather than to a traceback at exit
        discard_stdout()
        raise SystemExit(0) from None
    except OSError as e:  # a full disk (`> /dev/full`): one line, as the full path
        discard_stdout()
        sys.stderr.write(f"ipd: error: cannot write the output ({e.strerror or e})\n")
        raise SystemExit(1) from None
    raise SystemExit(0)
