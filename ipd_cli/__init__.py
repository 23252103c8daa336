"""ipd: intelligence-per-dollar cost modelling of AI hardware.

``import ipd_cli`` gives the same estimates as the ``ipd`` command::

    cat = ipd_cli.load()
    ipd_cli.compare(cat, ["vera-rubin", "blackwell"])

The API functions are imported on first use, so that importing the package (as the ``ipd``
console script does before it can handle Ctrl-C) costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .api import (
        compare,
        explain,
        list_hardware,
        list_models,
        list_workloads,
        load,
        output_schema,
        rl,
        serve,
        show_hardware,
        show_model,
        show_workload,
        sweep,
        train,
    )
    from .errors import InfeasibleError, InputError, IpdError

__all__ = [
    "__version__",
    "InfeasibleError",
    "InputError",
    "IpdError",
    "compare",
    "explain",
    "list_hardware",
    "list_models",
    "list_workloads",
    "load",
    "output_schema",
    "rl",
    "serve",
    "show_hardware",
    "show_model",
    "show_workload",
    "sweep",
    "train",
]


# what the API raises: IpdError, and its InputError (a bad argument or catalog value, naming the
# parameter or file) and InfeasibleError (valid inputs nothing can run)
ERRORS = ("InfeasibleError", "InputError", "IpdError")


def __getattr__(name: str) -> Any:
    if name in ERRORS:
        from . import errors

        return getattr(errors, name)
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'ipd_cli' has no attribute {name!r}")


def __dir__() -> list[str]:  # the lazily imported API, for dir() and a notebook's completion
    return sorted({*globals(), *__all__})
