"""Cores as CPUs: a process tree confined to some CPUs, including children started before and after."""

import math
import os
import subprocess
import sys

import pytest

from streamscale.experiment.cpus import available_cpus, pin_tree, process_tree

pytestmark = pytest.mark.skipif(len(available_cpus()) < 2, reason="needs at least 2 CPUs to confine to fewer")

PARENT = """
import subprocess, sys, time
first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(first.pid, flush=True)
sys.stdin.readline()  # started after the parent was pinned: inherits its CPUs
later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(later.pid, flush=True)
time.sleep(60)
"""


def test_a_tree_is_confined_and_what_it_starts_later_inherits():
    cpus = available_cpus()
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        first = int(parent.stdout.readline())
        assert set(process_tree(parent.pid)) >= {parent.pid, first}
        assert pin_tree(parent.pid, {cpus[-1]}) >= 2
        parent.stdin.write("\n")
        parent.stdin.flush()
        later = int(parent.stdout.readline())
        for pid in (parent.pid, first, later):
            assert os.sched_getaffinity(pid) == {cpus[-1]}, pid
        pin_tree(parent.pid, set(cpus))  # and back
        assert all(os.sched_getaffinity(p) == set(cpus) for p in (parent.pid, first, later))
    finally:
        for pid in process_tree(parent.pid)[::-1]:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        parent.wait(10)


def test_machine_busy_share_from_proc_stat():
    from streamscale.experiment.cpus import busy_pct, machine_ticks

    #                user nice system idle iowait irq softirq steal guest guest_nice
    before = machine_ticks("cpu  100 0 50 800 50 0 0 0 30 0\ncpu0 1 2 3\n")
    after = machine_ticks("cpu  250 0 100 1000 100 0 0 0 90 0\n")
    assert before == (150, 1000) and after == (350, 1450)  # guest time is inside user already
    assert busy_pct(before, after) == 100.0 * 200 / 450
    assert math.isnan(busy_pct(None, after)) and math.isnan(busy_pct(after, before))
    assert machine_ticks("garbage") is None
    real = machine_ticks()
    assert real is None or 0 <= real[0] <= real[1]
