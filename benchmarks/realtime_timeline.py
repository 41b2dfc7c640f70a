"""Where real-time mode's latency tail comes from: one real-time run of the job of
``realtime_latency.py``, its records' latencies over the run's time, and the Spark JVM's pauses.

    .venv/bin/python benchmarks/realtime_timeline.py [--checkpoint "30 seconds"] [--seconds 125] [--linger-ms 5]
        [--after processing_time:0]

Prints, per ``--window`` seconds of the run (from its first output record), the records' p50 and
p99 latency at both bounds of what they give (low: never above the true value, high: never below),
then every stall: a stretch of 50 ms bins whose records took over ``--stall-ms`` (the high bound),
and where each one lies against the checkpoints; then the Spark JVM's collections during the run,
from ``jstat`` read every 50 ms (the JDK's; skipped where it is missing): the samples in which young
collections ran, their time, the largest such sample's, and the full collections' time; then each
batch's start, the time since the previous one's trigger ended, and the phases Spark timed (a
real-time batch's ``addBatch`` spans its tasks; planning, the offset log's write and the commit lie
between two batches' tasks, when no record is read).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import threading
import time

import numpy as np
from realtime_latency import add_run_options, check_run_options, one_run

from streamscale.broker import EmbeddedBroker
from streamscale.experiment import outlatency
from streamscale.experiment.cpus import jvm_pid
from streamscale.experiment.processing import weighted_quantile
from streamscale.pipelines.progress import commit_ms
from streamscale.pipelines.run import PipelineRun
from streamscale.pipelines.trigger import parse_trigger

SAMPLES: list = []  # the run's (output timestamp ms, low, high, weight), taken as its batches get them
GC: list = []  # (epoch s, young collections' total s, full collections' total s)
PROGRESS: list = []  # the run's batches' progress, as Spark reports it


def keep_samples() -> None:
    attach = outlatency.OutputLatency.attach

    def attach_and_keep(self, batches):
        SAMPLES.append(np.stack(self.latencies()))
        return attach(self, batches)

    outlatency.OutputLatency.attach = attach_and_keep


def keep_progress() -> None:
    poll = PipelineRun.poll

    def poll_and_keep(self):
        new = poll(self)
        if new:  # Spark's progress read again only when a batch ended
            ids = {b.batch_id for b in new}
            PROGRESS.extend(p for p in self.main_query.recentProgress if p["batchId"] in ids)
        return new

    PipelineRun.poll = poll_and_keep


def print_batches(t0_ms: float) -> None:
    """Each batch's start (s after the first output record), the time since the previous batch's
    trigger ended, and the phases Spark timed, in ms: a real-time batch's addBatch is its tasks'
    whole span, the rest lies between two spans."""
    keys = ("triggerExecution", "addBatch", "queryPlanning", "walCommit", "commitOffsets", "latestOffset")
    print("batch  start (s)  gap (ms)  " + "  ".join(f"{k:>16}" for k in keys))
    end = None
    for p in sorted(PROGRESS, key=lambda p: p["batchId"]):
        d = p.get("durationMs") or {}
        done = commit_ms(p)
        start = done - d.get("triggerExecution", 0)  # the trigger's start, its progress timestamp
        gap = "" if end is None else f"{start - end:,.0f}"
        cells = "  ".join(f"{d.get(k, 0):>16,}" for k in keys)
        print(f"{p['batchId']:>5}  {(start - t0_ms) / 1000:9.2f}  {gap:>8}  {cells}")
        end = done


def watch_gc(stop: threading.Event) -> None:
    """jstat's GC counters of this process's Spark JVM every 50 ms, from when it is up."""
    while (pid := jvm_pid()) is None:
        if stop.wait(0.5):
            return
    p = subprocess.Popen(["jstat", "-gc", str(pid), "50"], stdout=subprocess.PIPE, text=True)
    head = p.stdout.readline().split()
    young, full = head.index("YGCT"), head.index("FGCT")
    for line in p.stdout:
        cols = line.split()
        if stop.is_set():
            break
        if cols and cols[0] != head[0]:
            GC.append((time.time(), float(cols[young]), float(cols[full])))
    p.kill()
    p.wait()


def print_windows(t: np.ndarray, low: np.ndarray, high: np.ndarray, w: np.ndarray, window: float) -> None:
    print("window (s)   records    p50 low/high    p99 low/high (ms)")
    for s in np.arange(0, t.max(), window):
        sel = (t >= s) & (t < s + window)
        if sel.any():
            p = [weighted_quantile(b[sel], w[sel], q) for q in (0.5, 0.99) for b in (low, high)]
            span = f"{s:5.0f}-{s + window:<5.0f} {w[sel].sum():9,.0f}"
            print(f"{span}  {p[0]:6.0f} / {p[1]:<6.0f}  {p[2]:6.0f} / {p[3]:.0f}")


def print_stalls(t: np.ndarray, high: np.ndarray, w: np.ndarray, stall_ms: float, every_s: float) -> None:
    bins = np.floor(t * 20).astype(int)
    slow = np.unique(bins[high > stall_ms])
    spells: list[list[int]] = []
    for b in slow:
        if spells and b - spells[-1][1] <= 2:
            spells[-1][1] = b
        else:
            spells.append([b, b])
    share = w[high > stall_ms].sum() / w.sum()
    print(f"records over {stall_ms:g} ms: {share:.2%}; stalls (checkpoints every {every_s:g} s):")
    for a, b in spells:
        sel = (bins >= a) & (bins <= b)
        at, late = a / 20, w[sel & (high > stall_ms)].sum()
        print(f"  {at:7.2f}-{(b + 1) / 20:<7.2f} s  max {high[sel].max():5.0f} ms  {late:7,.0f} records  ", end="")
        print(f"{at % every_s:5.2f} s after a checkpoint")


def print_gc(t0: float, t1: float) -> None:
    rows = [r for r in GC if t0 <= r[0] <= t1]
    if len(rows) < 2:
        print("GC: not read (no jstat, or the run was shorter than its samples)")
        return
    young = np.diff([r[1] for r in rows]) * 1000
    full = (rows[-1][2] - rows[0][2]) * 1000
    pauses = young[young > 0]
    largest = round(float(pauses.max(initial=0)))
    got = {"samples_with_young_gc": len(pauses), "young_ms": round(float(pauses.sum()))}
    print(json.dumps({**got, "largest_sample_young_ms": largest, "full_ms": round(full)}))


def main() -> None:
    ap = argparse.ArgumentParser()
    add_run_options(ap)
    ap.add_argument("--window", type=float, default=5.0, help="seconds per line of the timeline")
    ap.add_argument("--stall-ms", type=float, default=100.0, help="a record this late is in a stall")
    ap.add_argument(
        "--after", metavar="TRIGGER", help="first a run of this trigger in the same session (e.g. processing_time:0)"
    )
    args = ap.parse_args()
    every_s = check_run_options(args)
    if args.after:
        parse_trigger(args.after)  # a bad one is one line before the broker starts
    args.append_time, args.warmup = True, 0.0  # latency from the broker's append, the whole run
    keep_samples()
    keep_progress()
    stop = threading.Event()
    if shutil.which("jstat"):
        threading.Thread(target=watch_gc, args=(stop,), daemon=True).start()
    with EmbeddedBroker() as broker:
        if args.after:
            one_run(args, broker.bootstrap, args.after)
            PROGRESS.clear()
        run = one_run(args, broker.bootstrap, f"real_time:{args.checkpoint}")
    stop.set()
    out, low, high, w = SAMPLES[-1]
    t = (out - out.min()) / 1000
    print(f"real_time:{args.checkpoint}: load {run['rate']:,.0f}/s, {w.sum():,.0f} records traced")
    print_windows(t, low, high, w, args.window)
    print_stalls(t, high, w, args.stall_ms, every_s)
    print_gc(out.min() / 1000, out.max() / 1000)
    print_batches(out.min())


if __name__ == "__main__":
    from _main import run

    run(main)
