"""How every benchmark script ends: Ctrl-C (a long capacity search stopped by hand) or one of
streamscale's own errors is one line and the CLI's exit status, not a traceback; SIGTERM ends it
as Ctrl-C does; other libraries' log records go to the Spark log file, as the CLI's do. The
brokers, clusters and Spark sessions the script started are stopped by its context managers on
the way out."""

from __future__ import annotations

import signal
import sys

from streamscale.errors import StreamscaleError
from streamscale.processes import sigterm_ends_like_ctrl_c


def run(main) -> None:
    from streamscale.cli.app import route_logs

    route_logs()  # py4j's and other libraries' log records to the Spark log file, as the CLI's
    previous = sigterm_ends_like_ctrl_c()
    try:
        main()
    except StreamscaleError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        sys.exit(130)
    finally:
        signal.signal(signal.SIGTERM, previous)  # a caller's own handler (a test runner's) again
