"""Are `benchmark run`'s answers true? A job, its answer with short runs, then each end of every
bracket run for 300 s, more than once, the ends alternated.

    .venv/bin/python benchmarks/answer_truth.py [--rounds 1 4 16] [--tries 1] [--duration 40]
        [--warmup 10] [--long 300] [--long-warmup 60] [--long-repeat 2]
        [--max-drift 0.25] [--spec examples/jobs/hashes.yaml] [--out results/answer-truth]

For each ``rounds`` (the chained SHA-256 of examples/jobs/hashes.py, a job whose cost per record is
a parameter; another spec's job with ``--spec`` and no ``rounds`` parameter runs once, as it is) and
try: `benchmark run` on 1 core with ``--duration`` s runs after ``--warmup`` s (its answer, its
time, its runs and how many went on past their duration), then its held end and its failed end
again with only Theodolite's run lengths: ``--long`` s after ``--long-warmup`` s, no early stop,
``--long-repeat`` rounds of one run per end (held, failed, held, failed, ...), so that the machine's
drift falls on both ends alike. A long run around which the machine's speed moved by more than
``--max-drift`` (its calibration loop before against after: 25 % by default, the slow phases that
streamscale.experiment.noise describes) ran on another machine than the answer's and is run once
more; the second run counts whatever its drift. Both are printed, the first marked "not counted".

An end's long runs settle it when they agree: the held end holds when all of them pass, the failed
end when all of them fail. Where they disagree, the machine's speed moved more than the loads'
distance between runs and the check cannot say (``unsettled``, counted apart from a wrong answer);
where they all contradict the end, the answer is wrong. Printed per try: the answer, the bracket's
width, each long verdict with its lag trend and the machine's drift around it; at the end, per
job, the held ends over the tries (their spread) and whether every bracket was at most 25 % wide,
held over long runs, and overlapped the other tries'.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    from streamscale.experiment.noise import SLOW_PHASE

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--tries", type=int, default=1)
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--long", type=float, default=300.0)
    ap.add_argument("--long-warmup", type=float, default=60.0)
    ap.add_argument("--long-repeat", type=int, default=2)
    ap.add_argument("--max-drift", type=float, default=SLOW_PHASE)  # the tool's own slow-phase bound
    ap.add_argument("--spec", type=Path, default=ROOT / "examples" / "jobs" / "hashes.yaml")
    ap.add_argument("--out", type=Path, default=Path("results/answer-truth"))
    args = ap.parse_args()
    if args.long_repeat < 1:
        ap.error("--long-repeat must be at least 1")
    if not args.max_drift >= 0:
        ap.error("--max-drift must be a share of the machine's speed, 0 or more")

    from streamscale.benchmark.spec import load_spec

    # a job without a rounds parameter is one job: run it once, not once per value of --rounds
    varied = "rounds" in load_spec(args.spec).benchmark.params
    verdicts = {}
    for rounds in args.rounds if varied else args.rounds[:1]:
        brackets = [_try(args, rounds, i) for i in range(1, args.tries + 1)]
        verdicts[rounds] = _summarise(rounds, brackets)
    said = ", ".join(f"rounds {k}: {v}" for k, v in verdicts.items())
    print(f"answers true (ends hold over long runs, at most 25 % wide, tries overlap): {said}", flush=True)


def _try(args, rounds: int, i: int) -> dict:
    """One try: the answer with short runs, then its ends over long runs; the bracket with the
    long verdicts (per end, in the order they ran)."""
    from streamscale.benchmark.execution import run_execution
    from streamscale.benchmark.results import read_results
    from streamscale.broker import EmbeddedBroker

    out = args.out / f"rounds-{rounds}" / f"try-{i}"
    spec = _job_spec(args, rounds)
    t0 = time.monotonic()
    with EmbeddedBroker(log_dir=out / "logs") as broker:
        summary = run_execution(spec, out / "search", broker.connection, broker_pids=broker.pids())
    took = time.monotonic() - t0
    [b] = summary["answer"]["brackets"]
    rows = read_results(out / "search")
    went_on = sum(1 for r in rows if r.ran_s > args.duration + 1)
    print(
        f"rounds {rounds}, try {i}: {summary['answer']['sentence']} ({took / 60:.1f} min, {len(rows)} runs, "
        f"{went_on} went on past {args.duration:g} s)",
        flush=True,
    )
    b = {**b, "long": {}}
    ends = [x for x in (b["held"], b["failed"]) if x is not None]
    for k in range(1, args.long_repeat + 1) if ends else ():
        for end in ends:  # one execution per run: held, failed, held, failed, ...
            _check_end(
                args, spec, end, out / "long" / f"{k}-{end:g}", b["long"], f"rounds {rounds}, try {i}, round {k}"
            )
    return b


def _check_end(args, spec, end: float, out: Path, long: dict, label: str) -> None:
    """One long run of ``end`` (again once where the machine's speed moved beyond --max-drift
    around it); the verdict that counts is appended to ``long``'s list for the load."""
    for again in ("", "-again"):
        r = _long_runs(args, spec, end, Path(f"{out}{again}"))[-1]  # a fault's invalid run comes before its re-run
        kept = counted(r.drift, args.max_drift) or bool(again)
        if kept:
            long.setdefault(float(r.load), []).append(r.verdict)
        print(
            f"{label}: {r.load:,.0f} over {args.long:g} s: "
            f"{r.verdict.upper()}, lag trend {r.lag_slope:,.0f}/s [{r.lag_low:,.0f}, "
            f"{r.lag_high:,.0f}] (limit {r.lag_limit:,.0f}), p95 {r.processing_p95_ms / 1000:.1f} s, "
            f"Spark {r.spark_cpu_pct / 100:.2f} CPUs, machine speed moved {r.drift:.0%}"
            f"{'' if kept else f' (not counted: over {args.max_drift:.0%}; run again)'}",
            flush=True,
        )
        if kept:
            return


def counted(drift: float, max_drift: float) -> bool:
    """Whether a long run speaks for the answer: the machine's speed moved around it by at most
    ``max_drift`` (a run without both calibrations, NaN, counts: nothing says it moved)."""
    return not drift > max_drift


def _job_spec(args, rounds: int):
    """The spec's job at ``rounds`` on 1 core, with the short runs' durations."""
    from streamscale.benchmark.spec import load_spec

    spec = load_spec(args.spec)
    params = {**spec.benchmark.params, **({"rounds": rounds} if "rounds" in spec.benchmark.params else {})}
    bm = spec.benchmark.model_copy(update={"params": params})
    res = spec.execution.resources.model_copy(update={"values": [1]})
    ex = spec.execution.model_copy(update={"duration_s": args.duration, "warmup_s": args.warmup, "resources": res})
    return spec.model_copy(update={"name": f"{spec.name}-{rounds}", "benchmark": bm, "execution": ex})


def _long_runs(args, spec, load: float, out: Path):
    """One run at ``load`` with only Theodolite's run lengths, in a broker of its own; its rows."""
    from streamscale.benchmark.confirm import long_spec
    from streamscale.benchmark.execution import run_execution
    from streamscale.benchmark.results import read_results
    from streamscale.benchmark.spec import parse_spec
    from streamscale.broker import EmbeddedBroker

    saved = spec.model_dump(mode="json", by_alias=True)
    check = parse_spec(long_spec(saved, 1, [load], args.long, args.long_warmup, f"{spec.name}-long"), folder=ROOT)
    with EmbeddedBroker(log_dir=out / "logs") as broker:
        run_execution(check, out, broker.connection, broker_pids=broker.pids())
    return read_results(out)


def end_settled(verdicts: list[str], claim: str) -> str:
    """What an end's long runs say of the answer's ``claim`` there (pass at a held end, fail at a
    failed one): "holds" when every run gave it, "wrong" when none did, "unsettled" when they
    disagree (the machine moved more than the check can tell apart), "unrun" without runs."""
    if not verdicts:
        return "unrun"
    agree = sum(v == claim for v in verdicts)
    return "holds" if agree == len(verdicts) else "wrong" if agree == 0 else "unsettled"


def try_settled(bracket: dict) -> str:
    """A try's answer over its long runs: "holds" when both ends hold, "wrong" when either end is
    wrong, else "unsettled" (an end the long runs disagreed on, none contradicted)."""
    if bracket["held"] is None or bracket["failed"] is None:
        return "wrong"  # an answer without both ends decided is not a bracket
    long = bracket["long"]
    ends = (
        end_settled(long.get(float(bracket["held"]), []), "pass"),
        end_settled(long.get(float(bracket["failed"]), []), "fail"),
    )
    if "wrong" in ends or "unrun" in ends:
        return "wrong"
    return "holds" if ends == ("holds", "holds") else "unsettled"


def _summarise(rounds: int, brackets: list[dict]) -> str:
    held = [b["held"] for b in brackets if b["held"] is not None]
    settled = [try_settled(b) for b in brackets]
    ends_hold = "yes" if all(s == "holds" for s in settled) else "no" if "wrong" in settled else "unsettled"
    narrow = all(b["held"] and b["failed"] and b["failed"] / b["held"] - 1 <= 0.25 + 1e-9 for b in brackets)
    overlap = bool(held) and max(held) < min((b["failed"] for b in brackets if b["failed"]), default=float("inf"))
    spread = f"max / min {max(held) / min(held):.2f}" if held else "none held"
    said = "; ".join(
        f"{what}: {ok}"
        for what, ok in (
            ("ends hold over long runs", ends_hold),
            ("at most 25 % wide", "yes" if narrow else "no"),
            ("tries overlap", "yes" if overlap else "no"),
        )
    )
    print(f"rounds {rounds}: held ends {', '.join(f'{h:,.0f}' for h in held) or 'none'} ({spread}); {said}", flush=True)
    if ends_hold == "yes" and narrow and overlap:
        return "yes"
    return "unsettled" if ends_hold == "unsettled" and narrow and overlap else "no"


if __name__ == "__main__":
    from _main import run

    run(main)
