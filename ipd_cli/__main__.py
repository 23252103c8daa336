"""`python -m ipd_cli` and the `ipd` console script.

The CLI is imported inside :func:`main`, so that Ctrl-C during the imports (a few hundred
milliseconds on a cold disk) ends as ``ipd: interrupted`` and exit 130, not a traceback.
"""

import os
import sys

# commands that run plan or deployment searches over large numpy grids
SEARCHING = frozenset(
    {"train", "serve", "rl", "compare", "explain", "sweep", "validate", "calibrate", "plot"}
)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
# container objects allocated (less those freed) between two young collections of the cyclic
# garbage collector in a searching command (CPython's default: 700)
GC_YOUNG = 2000


def keep_freed_memory(argv: list[str]) -> None:
    """Let a searching command reuse the memory of its freed numpy temporaries. By default glibc's
    malloc gives every block of 128 kB or more its own mapping and unmaps it when freed (and trims
    the heap top past 128 kB), so each temporary of a search over a 200,000-row grid (1.6 MB a
    column) is fresh memory: page faults and zeroed pages on every array. Blocks below 32 MB from
    the heap and up to 256 MB of freed heap kept: `compare vera-rubin blackwell` takes ~35k minor
    page faults instead of ~99k and ~10 % less CPU. Only in ipd's own process (the console script,
    not the library), only with glibc, and never over the user's own MALLOC_* or GLIBC_TUNABLES."""
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in SEARCHING or not sys.platform.startswith("linux"):
        return
    if any(k.startswith("MALLOC_") or k == "GLIBC_TUNABLES" for k in os.environ):
        return
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt  # not glibc (musl): no mallopt, nothing to do
    except (OSError, AttributeError):
        return
    mallopt(M_TRIM_THRESHOLD, 256 << 20)
    mallopt(M_MMAP_THRESHOLD, 32 << 20)


def collect_less(argv: list[str]) -> None:
    """Run the cyclic garbage collector less often in a command that searches: at CPython's
    default threshold, ``compare vera-rubin blackwell`` ran 132-136 young and 12 middle collections
    and one full one, the older ones walking the catalog's and the imported modules' objects
    (the searches' numpy arrays are not tracked, and make no cycles): 57-72 ms CPU, measured by
    ``gc.callbacks``; at GC_YOUNG objects, 51 and 4-5 and none, 30-40 ms. Garbage cycles are still
    collected: later, in larger batches. Only in ipd's own process (the console script)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in SEARCHING:
        return
    import gc

    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, middle, oldest)


PLUGINS_OFF = ("__all__", "1", "true")  # the PYDANTIC_DISABLE_PLUGINS values that load no plugin
LOADER = "pydantic.plugin._loader"  # pydantic's plugin finder, imported by its first schema


def no_plugin_finder() -> None:
    """With every pydantic plugin disabled, pydantic's finder returns none without looking, yet
    importing it imports ``importlib.metadata`` (with ``email``, ``zipfile``, ``socket``...: ~50 ms
    CPU, 2-3 % of a computed ``compare``, which imports it for nothing else). A stand-in module
    answers ``get_plugins()`` the same, empty; any other name it is asked for imports the real
    finder in its place (a pydantic that reads more from it)."""
    import types

    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in PLUGINS_OFF or LOADER in sys.modules:
        return
    stand_in = types.ModuleType(LOADER)

    def get_plugins() -> tuple:
        return ()

    def real(name: str) -> object:
        import importlib

        if name.startswith("__"):  # what the import system asks of any module (``__path__``)
            raise AttributeError(name)
        sys.modules.pop(LOADER, None)
        return getattr(importlib.import_module(LOADER), name)

    stand_in.get_plugins = get_plugins  # type: ignore[attr-defined]
    stand_in.__getattr__ = real  # type: ignore[method-assign]
    sys.modules[LOADER] = stand_in


def main() -> None:
    # ipd's own process loads no third-party pydantic plugins: finding them scans the metadata of
    # every installed distribution on each run. PYDANTIC_DISABLE_PLUGINS set by the user wins
    # (empty: load them all).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    no_plugin_finder()
    args = sys.argv[1:]
    try:
        from ipd_cli.resultcache import replay_or_record

        # the same command, catalog and code ran before: its output again, nothing imported
        recording = replay_or_record(args)
        keep_freed_memory(args)
        collect_less(args)
        from ipd_cli.cli import main as cli_main

        try:
            cli_main()  # installs its own handlers at once; this catches what comes before them
        except SystemExit as e:
            if recording is not None and e.code in (0, None):
                recording.store()
            raise
    except KeyboardInterrupt:
        sys.stderr.write("ipd: interrupted\n")
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
