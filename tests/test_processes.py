"""Children a library starts and loses to an interruption are killed; the ones held, and others, are not."""

import subprocess
import sys

import pytest

from streamscale.processes import child_pids, new_children_killed_on_error
from streamscale.waiting import wait_for

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def test_new_children_with_the_argument_are_killed_on_error_and_held_or_other_ones_are_not():
    before = subprocess.Popen([*SLEEPER, "marker"])  # started before the block: not its to kill
    started: list[subprocess.Popen] = []
    try:
        with pytest.raises(KeyboardInterrupt), new_children_killed_on_error("marker", kept=lambda: {started[1].pid}):
            started += [subprocess.Popen([*SLEEPER, "marker"]) for _ in range(2)]  # lost, held
            started.append(subprocess.Popen([*SLEEPER, "other"]))  # another kind of child
            assert {p.pid for p in started} <= child_pids()
            raise KeyboardInterrupt
        lost, held, other = started
        assert lost.pid not in child_pids()  # killed and reaped: no zombie left
        assert held.poll() is None and other.poll() is None and before.poll() is None
        with new_children_killed_on_error("marker"):  # no error: nothing killed
            started.append(subprocess.Popen([*SLEEPER, "marker"]))
        assert started[-1].poll() is None
    finally:
        for p in [before, *started]:
            p.kill()
            p.wait()


def test_a_command_line_is_read_exactly_an_empty_argument_included():
    from streamscale.processes import command_line

    args = [*SLEEPER, "", "last"]
    p = subprocess.Popen(args)
    try:
        wait_for(lambda: command_line(p.pid), 10, "the child's exec", 0.01)  # empty meanwhile
        assert command_line(p.pid) == args
    finally:
        p.kill()
        p.wait()
    assert command_line(p.pid) == []  # gone
