import itertools

import pytest

from streamscale.experiment import noise
from streamscale.experiment.noise import SpeedLog, machine_speed, run_slowdown, slowdown

# The calibration loop's speed (million loops/s), read every ~0.5 s for 90 s on an idle machine of
# this kind that flips between two speeds from one second to the next.
FLIPPING = [
    13.81, 16.28, 17.26, 8.64, 17.34, 16.7, 16.76, 16.82, 9.36, 10.82, 9.27, 9.07, 9.03, 17.55, 16.92,
    17.17, 9.44, 10.09, 9.29, 9.4, 17.12, 16.58, 9.81, 16.83, 9.29, 12.08, 8.81, 9.31, 9.37, 8.93, 8.6,
    8.53, 14.25, 15.19, 9.07, 9.44, 11.32, 15.2, 8.2, 9.21, 9.07, 15.67, 14, 15.14, 15.62, 14.86,
    15.64, 15.37, 15.93, 15.58, 13.13, 9.59, 8.67, 9, 9.01, 15.84, 14.59, 9.03, 8.82, 15.77, 9.01,
    9.04, 8.96, 8.85, 15.91, 15.74, 8.86, 9.9, 15.29, 15.71, 15.65, 13.6, 15.91, 15.92, 15.61, 8.64,
    8.96, 8.75, 15.87, 15.6, 15.95, 10.17, 10.06, 10.2, 9.2, 8.63, 8.8, 15.55, 14.96, 15.5, 15.61,
    9.61, 8.86, 11.19, 9.52, 9.39, 8.98, 15.61, 15.44, 15.92, 15.99, 15.44, 8.63, 15.92, 15.72, 15.95,
    15.74, 13.57, 15.73, 15.63, 14.56, 10.18, 15.17, 14.03, 15.69, 15.38, 8.79, 15.28, 14.85, 15.09,
    15.09, 9.24, 8.73, 9.46, 15.47, 15.42, 15.92, 10.78, 15.54, 14.16, 13.51, 14.77, 9.45, 14.22,
    14.82, 15.59, 14.98, 15, 15.27, 15.24, 14.99, 13.31, 15.07, 15.51, 15.27, 9.77, 8.39, 15.36, 15.73,
    15.54, 15.32, 10.53, 9.06, 15.58, 15.58, 15.94, 8.59, 15.08, 15.83, 15.09, 8.59, 9.31, 15.72,
    15.52, 15.44, 15.6, 15.71, 15.31, 15.63, 15.4, 9.07,
]  # fmt: skip
RUN = 40  # readings from one run's start to the next's (~20 s)


def test_a_reading_is_the_mean_of_calibrations_spread_over_a_second(monkeypatch):
    seen = iter([9e6, 15e6, 16e6])
    monkeypatch.setattr(noise, "calibration_speed", lambda rounds: next(seen))
    assert machine_speed(gap_s=0) == pytest.approx(40e6 / 3)


def slowdowns(read_before, read_after, reference, rule=run_slowdown) -> list[float]:
    """Each run's slowdown in executions of back-to-back runs over FLIPPING, one per start offset."""
    out = []
    for offset in range(RUN):
        starts = range(offset, len(FLIPPING) - RUN + 1, RUN)
        log = []
        for s in starts:
            before, after = read_before(s), read_after(s + RUN)
            out.append(rule(reference(log, before), before, after))
            log += [before, after]
    return out


def test_a_machine_that_flips_from_second_to_second_does_not_read_as_slowed_down():
    def old(log, before):  # one calibration each side, against the execution's first
        return log[0] if log else before

    one = slowdowns(lambda i: FLIPPING[i], lambda i: FLIPPING[i - 1], old, slowdown)  # its slowest
    assert sum(s > 0.2 for s in one) / len(one) > 0.25, sum(s > 0.2 for s in one)  # what this guards against

    def three(i):  # a reading: 3 calibrations ~0.5 s apart
        return sum(FLIPPING[i : i + 3]) / 3

    mean = []
    for offset in range(RUN):  # the same executions, read as an experiment runner reads them
        starts = range(offset, len(FLIPPING) - RUN + 1, RUN)
        at = iter([i for s in starts for i in (s, s + RUN - 3)])
        log = SpeedLog(read=lambda at=at: three(next(at)))
        for _ in starts:
            before = log.before()
            reference, after = log.after()
            mean.append(run_slowdown(reference, before, after))
    assert sum(s > 0.2 for s in mean) / len(mean) < 0.05, sum(s > 0.2 for s in mean)


def test_the_log_judges_a_run_against_the_mean_of_the_readings_before_its_end():
    readings = iter([20.0, 20.0, 20.0, 20.0, 13.0, 13.0])
    log = SpeedLog(read=lambda: next(readings))
    for _ in range(2):  # two runs on a steady machine: no slowdown
        before = log.before()
        reference, after = log.after()
        assert run_slowdown(reference, before, after) == 0.0
    before = log.before()  # then a slow phase of minutes: the run around it reads it
    reference, after = log.after()
    assert reference == pytest.approx((4 * 20 + 13) / 5)
    assert run_slowdown(reference, before, after) == pytest.approx(1 - 13 / 18.6)
    assert run_slowdown(20.0, 20.0, 13.0) == pytest.approx(0.175)  # one that began as the run ended: half
    assert log.readings == [20.0] * 4 + [13.0] * 2
    assert list(itertools.islice(readings, 1)) == []
