"""Rate of the reliability tester itself: N messages sent, received and accounted, no faults.

    .venv/bin/python benchmarks/reliability_throughput.py [--messages 500000] [--size 100]

Runs each semantics once through the fault proxy (passing everything through) in front of the
embedded broker, as `streamscale reliability run` does. Target: >= 50,000 messages/s
accounted; N = 500,000 (the paper's run size, 26 minutes there) in minutes.
"""

from __future__ import annotations

import argparse
import time

from streamscale.reliability.spec import NoFault
from streamscale.reliability.testbeds import ProxyTestbed
from streamscale.reliability.tester import run_trial


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=3)
    args = ap.parse_args()
    bed = ProxyTestbed(seed=0)
    try:
        for semantics in ("at-most-once", "at-least-once", "exactly-once"):
            t0 = time.monotonic()
            r = run_trial(
                bed,
                semantics,
                args.messages,
                args.size,
                NoFault(),
                args.partitions,
                send_timeout_s=120,
                receive_timeout_s=300,
            )
            wall = time.monotonic() - t0
            print(
                f"{semantics:<14} N={r.N:,} alpha={r.alpha} beta={r.beta}  send {r.send_s:5.1f} s "
                f"({r.send_rate:,.0f}/s)  receive {r.receive_s:5.1f} s  accounted {r.accounted_rate:,.0f} msg/s  "
                f"wall {wall:5.1f} s",
                flush=True,
            )
    finally:
        bed.close()


if __name__ == "__main__":
    from _main import run

    run(main)
