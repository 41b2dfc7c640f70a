"""How every benchmark script ends: Ctrl-C (a long capacity search stopped by hand) or one of
streamscale's own errors is one line and the CLI's exit status, not a traceback. The brokers,
clusters and Spark sessions the script started are stopped by its context managers on the way out."""

from __future__ import annotations

import sys

from streamscale.errors import StreamscaleError


def run(main) -> None:
    try:
        main()
    except StreamscaleError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        sys.exit(130)
