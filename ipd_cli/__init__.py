"""ipd: intelligence-per-dollar cost modelling of AI hardware.

``import ipd_cli`` gives the same estimates as the ``ipd`` command::

    cat = ipd_cli.load()
    ipd_cli.compare(cat, ["vera-rubin", "blackwell"])
"""

from __future__ import annotations

from ._version import __version__
from .api import (
    compare,
    explain,
    list_hardware,
    list_models,
    load,
    output_schema,
    rl,
    serve,
    show_hardware,
    show_model,
    sweep,
    train,
)

__all__ = [
    "__version__",
    "compare",
    "explain",
    "list_hardware",
    "list_models",
    "load",
    "output_schema",
    "rl",
    "serve",
    "show_hardware",
    "show_model",
    "sweep",
    "train",
]
