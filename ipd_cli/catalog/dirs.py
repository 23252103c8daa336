"""Which directories and files make up the catalog: the built-in one, then ``IPD_CATALOG``
directories, then ``--catalog DIR``; in each, ``*.yaml`` (or ``.yml``) and ``workloads/*.yaml``;
other subdirectories are not read.

Apart from :mod:`.layers` (which reads and merges them, with the schema models) so that the
catalog cache can compute its key without defining the schema's pydantic classes.
"""

from __future__ import annotations

import os
from pathlib import Path

from ipd_cli.errors import InputError

ENV_CATALOG = "IPD_CATALOG"


def builtin_dir() -> Path:
    """The installed catalog; from an uninstalled source checkout, the repo's configs/."""
    installed = Path(__file__).resolve().parents[1] / "configs"
    return installed if installed.is_dir() else Path(__file__).resolve().parents[2] / "configs"


def catalog_dirs(extra: list[Path] | None = None) -> list[Path]:
    dirs = [builtin_dir()]
    env = os.environ.get(ENV_CATALOG, "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs += list(extra or [])
    return dirs


def _from_env(directory: Path) -> bool:
    """Whether ``directory`` came from IPD_CATALOG (its error says so: a user who forgot the
    variable saw only a path, a contract review)."""
    return any(Path(p) == directory for p in os.environ.get(ENV_CATALOG, "").split(os.pathsep) if p)


def layer_files(directory: Path) -> tuple[list[Path], list[Path]]:
    if not directory.is_dir():
        what = "is a file, not a directory" if directory.exists() else "catalog directory not found"
        where = f"{ENV_CATALOG}={directory}" if _from_env(directory) else str(directory)
        raise InputError(f"{where}: {what}; give an existing directory")

    def yaml_in(d: Path) -> list[Path]:  # both spellings of the extension, as -o and --scenario take
        # not hidden files: an editor's lock or backup (.#prices.yaml, a dangling link) failed the run
        return sorted(p for p in [*d.glob("*.yaml"), *d.glob("*.yml")] if not p.name.startswith("."))

    return yaml_in(directory), yaml_in(directory / "workloads")


def empty_dir_warnings(dirs: list[Path]) -> list[str]:
    """A line for each directory read that holds no catalog file: a fresh-eyes review's
    `mycat/hardware/hw.yaml` and `hw.YAML` were skipped without a word, and the run then said only
    "unknown hardware" (the listings' cache stores these lines with its others)."""
    out = []
    for d in dirs:
        if not any(layer_files(d)):
            out.append(  # the path alone: --catalog and IPD_CATALOG share the stored listing
                f"{d}: no *.yaml or *.yml file in it or in its workloads/ (other subdirectories are "
                "not read, the extension is lower case): nothing of the catalog comes from it"
            )
    return out
