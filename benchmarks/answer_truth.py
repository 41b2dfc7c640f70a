"""Are `benchmark run`'s answers true? A job, its answer with short runs, then each end of every
bracket run for 300 s.

    .venv/bin/python benchmarks/answer_truth.py [--rounds 1 4 16] [--tries 1] [--duration 40]
        [--warmup 10] [--long 300] [--long-warmup 60] [--spec examples/jobs/hashes.yaml]
        [--out results/answer-truth]

For each ``rounds`` (the chained SHA-256 of examples/jobs/hashes.py, a job whose cost per record is
a parameter; another spec's job with ``--spec`` and no ``rounds`` parameter runs once, as it is) and
try: `benchmark run` on 1 core with ``--duration`` s runs after ``--warmup`` s (its answer, its
time, its runs and how many went on past their duration), then its held end and its failed end
again with only Theodolite's run lengths: ``--long`` s after ``--long-warmup`` s, no early stop,
one run each. The answer holds when the long run at its held end passes and the one at its failed
end fails. Printed per try: the answer, the bracket's width, the long verdicts with their lag
trends; at the end, per job, the held ends over the tries (their spread) and whether every
bracket was at most 25 % wide, held over long runs, and overlapped the other tries'.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--tries", type=int, default=1)
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--long", type=float, default=300.0)
    ap.add_argument("--long-warmup", type=float, default=60.0)
    ap.add_argument("--spec", type=Path, default=ROOT / "examples" / "jobs" / "hashes.yaml")
    ap.add_argument("--out", type=Path, default=Path("results/answer-truth"))
    args = ap.parse_args()

    from streamscale.benchmark.spec import load_spec

    # a job without a rounds parameter is one job: run it once, not once per value of --rounds
    varied = "rounds" in load_spec(args.spec).benchmark.params
    verdicts = {}
    for rounds in args.rounds if varied else args.rounds[:1]:
        brackets = [_try(args, rounds, i) for i in range(1, args.tries + 1)]
        verdicts[rounds] = _summarise(rounds, brackets)
    said = ", ".join(f"rounds {k}: {'yes' if v else 'NO'}" for k, v in verdicts.items())
    print(f"answers true (ends hold over long runs, at most 25 % wide, tries overlap): {said}", flush=True)


def _try(args, rounds: int, i: int) -> dict:
    """One try: the answer with short runs, then its ends over long runs; the bracket with the
    long verdicts."""
    from streamscale.benchmark.confirm import long_spec
    from streamscale.benchmark.execution import run_execution
    from streamscale.benchmark.results import read_results
    from streamscale.benchmark.spec import load_spec, parse_spec
    from streamscale.broker import EmbeddedBroker

    out = args.out / f"rounds-{rounds}" / f"try-{i}"
    spec = load_spec(args.spec)
    params = {**spec.benchmark.params, **({"rounds": rounds} if "rounds" in spec.benchmark.params else {})}
    bm = spec.benchmark.model_copy(update={"params": params})
    res = spec.execution.resources.model_copy(update={"values": [1]})
    ex = spec.execution.model_copy(update={"duration_s": args.duration, "warmup_s": args.warmup, "resources": res})
    spec = spec.model_copy(update={"name": f"{spec.name}-{rounds}", "benchmark": bm, "execution": ex})
    t0 = time.monotonic()
    with EmbeddedBroker(log_dir=out / "logs") as broker:
        summary = run_execution(spec, out / "search", broker.connection, broker_pids=broker.pids())
    took = time.monotonic() - t0
    [b] = summary["answer"]["brackets"]
    rows = read_results(out / "search")
    went_on = sum(1 for r in rows if r.ran_s > args.duration + 1)
    print(f"rounds {rounds}, try {i}: {summary['answer']['sentence']} ({took / 60:.1f} min, {len(rows)} runs, "
          f"{went_on} went on past {args.duration:g} s)", flush=True)  # fmt: skip
    b = {**b, "long": {}}
    ends = [x for x in (b["held"], b["failed"]) if x is not None]
    if not ends:
        return b
    saved = spec.model_dump(mode="json", by_alias=True)
    check = parse_spec(long_spec(saved, 1, ends, args.long, args.long_warmup, f"{spec.name}-long"), folder=ROOT)
    with EmbeddedBroker(log_dir=out / "long" / "logs") as broker:
        run_execution(check, out / "long", broker.connection, broker_pids=broker.pids())
    for r in read_results(out / "long"):
        b["long"][float(r.load)] = r.verdict
        print(f"rounds {rounds}, try {i}: {r.load:,.0f} over {args.long:g} s: {r.verdict.upper()}, lag trend "
              f"{r.lag_slope:,.0f}/s [{r.lag_low:,.0f}, {r.lag_high:,.0f}] (limit {r.lag_limit:,.0f}), Spark "
              f"{r.spark_cpu_pct / 100:.2f} CPUs", flush=True)  # fmt: skip
    return b


def _summarise(rounds: int, brackets: list[dict]) -> bool:
    held = [b["held"] for b in brackets if b["held"] is not None]
    ends_hold = all(
        b["held"] is not None
        and b["failed"] is not None
        and b["long"].get(float(b["held"])) == "pass"
        and b["long"].get(float(b["failed"])) == "fail"
        for b in brackets
    )
    narrow = all(b["held"] and b["failed"] and b["failed"] / b["held"] - 1 <= 0.25 + 1e-9 for b in brackets)
    overlap = bool(held) and max(held) < min((b["failed"] for b in brackets if b["failed"]), default=float("inf"))
    spread = f"max / min {max(held) / min(held):.2f}" if held else "none held"
    said = "; ".join(
        f"{what}: {'yes' if ok else 'no'}"
        for what, ok in (
            ("ends hold over long runs", ends_hold),
            ("at most 25 % wide", narrow),
            ("tries overlap", overlap),
        )
    )
    print(f"rounds {rounds}: held ends {', '.join(f'{h:,.0f}' for h in held) or 'none'} ({spread}); {said}", flush=True)
    return ends_hold and narrow and overlap


if __name__ == "__main__":
    from _main import run

    run(main)
