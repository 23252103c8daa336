"""`python -m ipd_cli` and the `ipd` console script.

The CLI is imported inside :func:`main`, so that Ctrl-C during the imports (a few hundred
milliseconds on a cold disk) ends as ``ipd: interrupted`` and exit 130, not a traceback.
"""

import os
import sys


def main() -> None:
    # ipd's own process loads no third-party pydantic plugins: finding them scans the metadata of
    # every installed distribution on each run. PYDANTIC_DISABLE_PLUGINS set by the user wins
    # (empty: load them all).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        from ipd_cli.cli import main as cli_main

        cli_main()  # installs its own handlers at once; this catches what comes before them
    except KeyboardInterrupt:
        sys.stderr.write("ipd: interrupted\n")
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
