"""What decides whether an at-least-once producer gets its acknowledgements through a link that
resets: the size of its produce requests against the fault proxy's per-chunk resets.

    .venv/bin/python benchmarks/reliability_collapse.py [--repeat 3] [--reset-pct 5]

reliability-small.yaml's at-least-once cell at 5 % resets (50,000 records of 100 B, 2 partitions,
``message.timeout.ms`` 30 s), with librdkafka's default ``batch.size`` (1,000,000 bytes) and two
smaller ones, the sizes alternated trial by trial, each on an embedded broker behind its own fault
proxy. Per trial: records acknowledged, α, β, records transmitted (retries included), the mean
batch (request payload) size, the resets and how many cut a broker's answer.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from streamscale.reliability.spec import ProxyFault
from streamscale.reliability.testbeds import ProxyTestbed
from streamscale.reliability.tester import Trial, run_trial

SIZES = (1_000_000, 65_536, 16_384)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reset-pct", type=float, default=5.0)
    ap.add_argument("--messages", type=int, default=50_000)
    args = ap.parse_args()
    fault = ProxyFault(kind="proxy", reset_pct=args.reset_pct)
    beds = {}
    rows: dict[int, list] = {s: [] for s in SIZES}
    try:
        for size in SIZES:
            beds[size] = ProxyTestbed(Path(tempfile.mkdtemp()), seed=11 + size % 97, properties={"batch.size": size})
        for rep in range(args.repeat):
            for size in SIZES if rep % 2 == 0 else tuple(reversed(SIZES)):
                r = run_trial(
                    beds[size], Trial("at-least-once", args.messages, 100, fault, partitions=2, send_timeout_s=30)
                )
                rows[size].append(r)
                print(
                    f"batch.size {size:>9,}: acknowledged {r.acked:>6,}  α {r.alpha:.3f}  β {r.beta:.3f}  "
                    f"transmitted {r.transmitted:>9,} ({r.transmitted / args.messages:.1f}x)  "
                    f"mean batch {r.mean_batch_bytes:>9,} B ({r.mean_batch_records:,} records)  "
                    f"resets {r.proxy_resets} ({r.resets_response} on an answer)  sent in {r.send_s:.1f} s",
                    flush=True,
                )
    finally:
        for bed in beds.values():
            bed.close()
    for size, rs in rows.items():
        acked = [r.acked for r in rs]
        print(
            f"  batch.size {size:,}: acknowledged {statistics.median(acked):,.0f} "
            f"(range {min(acked):,}-{max(acked):,}), "
            f"α {min(r.alpha for r in rs):.3f}-{max(r.alpha for r in rs):.3f}, "
            f"β {min(r.beta for r in rs):.3f}-{max(r.beta for r in rs):.3f}, "
            f"transmitted {statistics.median(r.transmitted for r in rs) / args.messages:.1f}x, "
            f"mean batch {statistics.median(r.mean_batch_bytes for r in rs):,.0f} B",
            flush=True,
        )


if __name__ == "__main__":
    from _main import run

    run(main)
