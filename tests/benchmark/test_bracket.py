"""The bracket search against hand-worked examples: which loads it tries, in which order, and the
ends it reports."""

import math

from streamscale.benchmark.bracket import (
    FAIL,
    INVALID,
    PASS,
    UNDECIDED,
    Bracket,
    Budget,
    Settings,
    between,
    bracket_search,
)


def capacity_oracle(capacities: dict, undecided: dict | None = None, invalid_above: float = math.inf, calls=None):
    """pass up to each amount's capacity, fail above; ``undecided``: loads that stay undecided."""

    def verdict(load, res):
        if calls is not None:
            calls.append((load, res))
        if load > invalid_above:
            return INVALID
        if undecided and load in undecided.get(res, ()):
            return UNDECIDED
        return PASS if load <= capacities[res] else FAIL

    return verdict


def fake_clock(monkeypatch) -> list:
    """The bracket module's clock on a list the test moves: ``[now]``, from 0."""
    import streamscale.benchmark.bracket as br

    clock = [0.0]
    monkeypatch.setattr(br.time, "monotonic", lambda: clock[0])
    return clock


def timed(verdict, clock: list, seconds: float, calls: list | None = None):
    """``verdict`` as a run that takes ``seconds`` on ``clock``; ``calls`` gets each run's
    (start, load, resources)."""

    def run(load, res):
        if calls is not None:
            calls.append((clock[0], load, res))
        clock[0] += seconds
        return verdict(load, res)

    return run


def test_hand_worked_two_amounts():
    # 1 core holds 30,000, 2 cores 42,426 records/s; start 20,000, factor 2, resolution 15 %
    calls = []
    one, two = bracket_search([1, 2], capacity_oracle({1: 30_000, 2: 42_426}, calls=calls), start=20_000)
    # 1 core: 20k pass, 40k fail; middles 28k (sqrt(20k*40k)=28,284) pass, 33k (33,466) fail,
    # 30k (30,397) pass: 33k / 30k = 1.10, within 15 %
    assert [c for c in calls if c[1] == 1] == [(20_000, 1), (40_000, 1), (28_000, 1), (33_000, 1), (30_000, 1)]
    assert (one.held, one.failed, one.held_assumed, one.failed_undecided) == (30_000, 33_000, False, False)
    assert abs(one.width - 0.1) < 1e-9
    # 2 cores start where 1 core failed: 33k pass, 66k fail; 47k (46,669) fail, 39k (39,395) pass,
    # 43k (42,810) fail: 43k / 39k = 1.103
    assert [c for c in calls if c[1] == 2] == [(33_000, 2), (66_000, 2), (47_000, 2), (39_000, 2), (43_000, 2)]
    assert (two.held, two.failed, two.held_assumed) == (39_000, 43_000, False)
    assert two.runs == 5


def test_a_failing_start_searches_down_and_an_amount_that_adds_nothing_keeps_the_held_load_assumed():
    calls = []
    one, two = bracket_search(
        [1, 2], capacity_oracle({1: 9_000, 2: 9_500}, calls=calls), start=40_000, settings=Settings(resolution=0.2)
    )
    # 40k, 20k, 10k fail; 5k pass; then 7.1k (7,071) pass, 8.4k (8,426) pass: 10k / 8.4k = 1.19
    assert [c[0] for c in calls if c[1] == 1] == [40_000, 20_000, 10_000, 5_000, 7_100, 8_400]
    assert (one.held, one.failed) == (8_400, 10_000)
    # 2 cores (9,500) fail 10k too, and 1 core's 8.4k already lies within 20 % of it: one run
    assert [c[0] for c in calls if c[1] == 2] == [10_000]
    assert (two.held, two.failed, two.held_assumed) == (8_400, 10_000, True)


def test_the_amount_below_held_load_is_assumed_until_a_run_says_more():
    # 2 cores hold no more than 1 core: 30k fails with 2 as with 1, the bracket's lower end is 1 core's
    one, two = bracket_search(
        [1, 2], capacity_oracle({1: 27_000, 2: 27_500}), start=27_000, settings=Settings(resolution=0.15)
    )
    # 27k pass, 54k fail; 38k (38,184), 32k (32,031), 29k (29,394) fail: 29k / 27k = 1.074
    assert one.verdicts == {27_000: PASS, 54_000: FAIL, 38_000: FAIL, 32_000: FAIL, 29_000: FAIL}
    assert (one.held, one.failed) == (27_000, 29_000)
    assert two.held == 27_000 and two.held_assumed and two.failed == 29_000
    assert two.verdicts == {29_000: FAIL}


def test_the_search_steps_past_an_undecided_run_and_its_ends_are_decided():
    # the run at 40,000 stays undecided: neither end; the search steps up past it to 80,000 (fails),
    # then narrows above it, where the failed end is: 57k and 48k fail, 44k holds (above the
    # undecided load, which is no longer between the ends): 48k / 44k is within 15 %
    (one,) = bracket_search([1], capacity_oracle({1: 45_000}, undecided={1: {40_000}}), start=20_000)
    assert one.verdicts[40_000] == UNDECIDED
    assert list(one.verdicts) == [20_000, 40_000, 80_000, 57_000, 48_000, 44_000]
    assert (one.held, one.failed, one.failed_undecided) == (44_000, 48_000, False)


def test_an_undecided_load_is_the_upper_end_only_where_no_load_above_failed():
    # every load from 40,000 up stays undecided and the runs end first: said as undecided, not failed
    undecided = {1: {40_000, 80_000, 160_000, 320_000}}
    (one,) = bracket_search([1], capacity_oracle({1: 10**9}, undecided=undecided), 20_000, Settings(max_runs=4))
    assert (one.held, one.failed, one.failed_undecided) == (20_000, 40_000, True)


def test_the_generator_limit_is_a_ceiling_not_a_failure():
    # 80k cannot be produced: the search goes on below it, between the highest load held and the
    # lowest it could not produce: sqrt(40k * 80k) = 56.6k -> 57k holds, 57k x 2 is past 80k, so
    # sqrt(57k * 80k) = 67.5k -> 68k holds; 80 / 68 = 1.18 > 1.15: sqrt(68k * 80k) = 73.8k -> 74k
    # cannot be produced either; 74 / 68 = 1.09: the held end lies within the resolution of it
    calls = []
    oracle = capacity_oracle({1: 1e9}, invalid_above=70_000, calls=calls)
    (one,) = bracket_search([1], oracle, start=20_000)
    assert [x for x, _ in calls] == [20_000, 40_000, 80_000, 57_000, 68_000, 74_000]
    assert one.held == 68_000 and one.failed is None and "could not produce 74,000" in one.ceiling


def test_below_a_load_the_generator_could_not_produce_a_failure_still_closes_the_bracket():
    # 250k holds, 500k cannot be produced; sqrt(250k * 500k) = 353.6k -> 350k fails: from there the
    # middle as usual, sqrt(250k * 350k) = 295.8k -> 300k holds, sqrt(300k * 350k) = 324k -> 320k fails
    calls = []
    (one,) = bracket_search([1], capacity_oracle({1: 300_000}, invalid_above=360_000, calls=calls), start=250_000)
    assert [x for x, _ in calls] == [250_000, 500_000, 350_000, 300_000, 320_000]
    assert (one.held, one.failed, one.failed_undecided) == (300_000, 320_000, False)
    # the first load cannot be produced and nothing is held (a start above the generator's limit):
    # one step down, 1,000 holds, then the middles below 2,000 (1,400, 1,200, 1,100) cannot be
    # produced either; 1,100 / 1,000 is within 15 %
    calls = []
    (one,) = bracket_search([1], capacity_oracle({1: 1e9}, invalid_above=1_000, calls=calls), start=2_000)
    assert [x for x, _ in calls] == [2_000, 1_000, 1_400, 1_200, 1_100]
    assert one.held == 1_000 and one.failed is None and "could not produce 1,100" in one.ceiling


def test_the_search_stops_at_its_budget_and_at_its_bounds():
    (one,) = bracket_search([1], capacity_oracle({1: 1e9}), start=1_000, settings=Settings(high=5_000, max_runs=10))
    assert one.verdicts == {1_000: PASS, 2_000: PASS, 4_000: PASS, 5_000: PASS}
    assert one.failed is None and "5,000" in one.ceiling
    calls = []
    (one,) = bracket_search(
        [1], capacity_oracle({1: 12_345}, calls=calls), start=1_000, settings=Settings(resolution=0.0001, max_runs=6)
    )
    assert len(calls) == 6 and one.held is not None and one.failed is not None


def test_between_rounds_to_two_digits_then_three():
    assert between(20_000, 40_000) == 28_000
    assert between(30_000, 33_000) == 31_000
    assert between(30_000, 31_000) == 30_500  # two digits fall on an end: three
    assert between(30_000, 30_010) is None
    assert abs(Bracket(1, 100.0, 115.0).width - 0.15) < 1e-12 and Bracket(1, 100.0).width is None


def test_an_invalid_middle_ends_the_narrowing_instead_of_asking_again():
    # 20k pass, 40k fail (a failure is judged whatever the generator did); the middle 28k cannot be
    # judged: the search keeps 20k / 40k and stops, having asked for 28k once
    calls = []

    def verdict(load, res):
        calls.append(load)
        return {20_000: PASS, 40_000: FAIL}.get(load, INVALID)

    (one,) = bracket_search([1], verdict, start=20_000, settings=Settings(max_runs=50))
    assert calls == [20_000, 40_000, 28_000]
    assert (one.held, one.failed) == (20_000, 40_000) and "28,000" in one.ceiling


def test_a_drifted_end_is_run_again_beside_the_other_and_a_disagreement_widens_the_bracket():
    # 1 core as in the hand-worked example: 20k, 40k, 28k, 33k, 30k -> held 30k, failed 33k. The
    # run at 30k drifted; run again (interleaved: 30k, then 33k) 30k fails: it is undecided, the
    # held end goes down to 28k; 33k fails again and stays
    calls = []
    again = {30_000.0: FAIL, 33_000.0: FAIL}

    def confirm(load, res):
        calls.append(("again", load))
        return again[load]

    [b] = bracket_search(
        [1],
        capacity_oracle({1: 30_000}, calls=calls),
        start=20_000,
        confirm=confirm,
        drifted=lambda load, res: load == 30_000,
    )
    assert calls[-2:] == [("again", 30_000.0), ("again", 33_000.0)]
    assert (b.held, b.failed, b.failed_undecided) == (28_000, 33_000, False)
    assert b.verdicts[30_000] == UNDECIDED and b.as_dict()["confirmed"] == {"30000": FAIL, "33000": FAIL}
    # the failed end passes when run again: undecided, and the bracket's upper end goes to the
    # next load failed (40k)
    [b] = bracket_search(
        [1],
        capacity_oracle({1: 30_000}),
        start=20_000,
        confirm=lambda load, res: PASS,
        drifted=lambda load, res: load == 33_000,
    )
    assert (b.held, b.failed, b.failed_undecided) == (30_000, 40_000, False)
    assert b.verdicts[33_000] == UNDECIDED
    # no end drifted: nothing run again
    calls.clear()
    bracket_search([1], capacity_oracle({1: 30_000}), start=20_000, confirm=confirm, drifted=lambda *_: False)
    assert not calls


def test_a_time_budget_is_shared_by_the_amounts_and_said_when_it_ends_a_search(monkeypatch):
    # every run takes 30 s on a fake clock; 140 s for two amounts: the first's share ends at 70 s
    # (runs at 0 and 30: 20k pass, 40k fail); its ends 100 % apart, it goes on while 2 cores keep
    # one run (28k at 60-90 s); a fourth run (90-120 s) would take it, so 2 cores run at 90 s, and
    # their second would end after 140 s
    clock, calls = fake_clock(monkeypatch), []
    verdict = timed(capacity_oracle({1: 30_000, 2: 42_426}), clock, 30, calls)
    one, two = bracket_search([1, 2], verdict, start=20_000, budget=Budget(deadline=140.0, run_cost_s=30.0))
    assert calls == [(0, 20_000, 1), (30, 40_000, 1), (60, 28_000, 1), (90, 40_000, 2)]
    assert one.out_of_time and two.out_of_time and one.as_dict()["out_of_time"]
    assert (one.held, one.failed) == (28_000, 40_000) and (two.held, two.failed) == (40_000, None)
    from streamscale.benchmark.answer import bracket_answer
    from streamscale.benchmark.units import Axes

    said = bracket_answer([one.as_dict()], Axes(), "uc2")["sentence"]
    assert said.endswith("failed ~40,000 records/s (the time budget ended the search 43% apart)")

    # 200 s: 1 core narrows on (33k at 90 s: 18 %, 30k at 120 s: 10 %, within 15 %) while 2 cores
    # keep a run before 200 s; then it keeps to its share, and 2 cores run from 150 s
    clock[0] = 0.0
    calls.clear()
    one, two = bracket_search([1, 2], verdict, start=20_000, budget=Budget(deadline=200.0, run_cost_s=30.0))
    assert [(t, r) for t, _, r in calls] == [(0, 1), (30, 1), (60, 1), (90, 1), (120, 1), (150, 2)]
    assert (one.held, one.failed, one.out_of_time) == (30_000, 33_000, False)
    assert (two.held, two.failed, two.out_of_time) == (33_000, None, True)

    # the cost of a run may be asked anew before each (what runs took so far): 1 core's third run
    # planned at 60 s would leave 2 cores no run before 140 s, so 2 cores run from 60 s
    clock[0] = 0.0
    calls.clear()
    costs = iter([30.0, 60.0, 60.0, 60.0, 60.0])
    bracket_search([1, 2], verdict, start=20_000, budget=Budget(deadline=140.0, run_cost_s=lambda: next(costs)))
    assert [(t, r) for t, _, r in calls] == [(0, 1), (30, 1), (60, 2)]


def test_an_amount_without_a_bracket_goes_on_into_the_later_shares_keeping_one_run_for_each(monkeypatch):
    # 50 s a run, 200 s for two amounts: 1 core's share ends at 100 s with two undecided runs
    # (73k, 49k) and no load held; a third run (33k, ending at 150 s) still leaves 2 cores one
    # run before 200 s, so it runs and 1 core gets a bracket; 2 cores run once, where 1 core failed
    clock, calls = fake_clock(monkeypatch), []
    verdict = timed(capacity_oracle({1: 33_000, 2: 80_000}, undecided={1: (49_000, 73_000)}), clock, 50, calls)
    one, two = bracket_search(
        [1, 2], verdict, start=73_000, settings=Settings(factor=1.5), budget=Budget(deadline=200.0, run_cost_s=50.0)
    )
    assert calls == [(0, 73_000, 1), (50, 49_000, 1), (100, 33_000, 1), (150, 49_000, 2)]
    assert (one.held, one.failed, one.failed_undecided) == (33_000, 49_000, True)
    assert (two.held, two.failed, two.held_assumed) == (49_000, None, False) and two.out_of_time

    # 170 s: 1 core's share ends at 85 s, 2 cores' one run must start by 120 s: 1 core's second
    # run (50-100 s) goes on past its share, a third (100-150 s) would take 2 cores' run
    clock[0] = 0.0
    calls.clear()
    one, two = bracket_search(
        [1, 2], verdict, start=73_000, settings=Settings(factor=1.5), budget=Budget(deadline=170.0, run_cost_s=50.0)
    )
    assert [c[1:] for c in calls] == [(73_000, 1), (49_000, 1), (49_000, 2)]
    assert one.held is None and one.out_of_time and two.held == 49_000

    # an amount whose ends are within the resolution keeps to its share: 1 core held 30k, failed
    # 45k (50 %) and held 37k (22 %) by 150 s; with a resolution of 25 % it is done, and 2 cores
    # run at 150 s; with 15 % a fourth run (ending at 200 s) would take 2 cores' run
    for resolution in (0.25, 0.15):
        clock[0] = 0.0
        calls.clear()
        verdict = timed(capacity_oracle({1: 40_000, 2: 60_000}), clock, 50, calls)
        one, two = bracket_search(
            [1, 2],
            verdict,
            start=30_000,
            settings=Settings(factor=1.5, resolution=resolution),
            budget=Budget(deadline=200.0, run_cost_s=50.0),
        )
        assert [(t, r) for t, _, r in calls] == [(0, 1), (50, 1), (100, 1), (150, 2)]
        assert (one.held, one.failed, one.out_of_time) == (37_000, 45_000, resolution < 0.22)


def test_the_last_run_the_time_holds_goes_two_steps_up_where_loads_above_the_probe_held(monkeypatch):
    # As UC2's demo on 1 core: a probe of 37,000, resolution 25 % (steps of 1 + 0.95 x 0.25 =
    # 1.2375), 30 s a run, 100 s for one amount, the job holding 55,000. The search starts half a
    # step under the probe: 37,000 / 1.1124 = 33,260, 33,000, holds (0-30 s); 40,837, 41,000, holds
    # (30-60 s), above the probe's figure, and one more run fits (60-90 s) but not two: it goes two
    # steps up, 50,737 (51,000) then 63,112, 63,000, and fails. One step (51,000, held) would have
    # left the amount "higher untested".
    clock, calls = fake_clock(monkeypatch), []
    verdict = timed(capacity_oracle({1: 55_000}), clock, 30, calls)
    budget, st = Budget(deadline=100.0, run_cost_s=30.0), Settings(resolution=0.25)
    [b] = bracket_search([1], verdict, start=10_000, settings=st, budget=budget, probe=lambda res: 37_000.0)
    assert calls == [(0, 33_000, 1), (30, 41_000, 1), (60, 63_000, 1)]
    assert (b.held, b.failed, b.out_of_time) == (41_000, 63_000, True)
    # a probe that did not underrate the job (the load held lies below its figure): one step,
    # 60,000 / 1.1124 = 53,937, 54,000, then 66,825, 67,000, which fails (24 %, within 25 %)
    clock[0] = 0.0
    calls.clear()
    [b] = bracket_search([1], verdict, start=10_000, settings=st, budget=budget, probe=lambda res: 60_000.0)
    assert [c[1] for c in calls] == [54_000, 67_000]
    # without a time budget, or with time for two more runs: one step at a time
    for budget in (Budget(), Budget(deadline=130.0, run_cost_s=30.0)):
        clock[0] = 0.0
        calls.clear()
        bracket_search([1], verdict, start=10_000, settings=st, budget=budget, probe=lambda res: 37_000.0)
        assert [c[1] for c in calls][:3] == [33_000, 41_000, 51_000]


def test_passes_in_a_row_above_a_probe_lengthen_the_steps_up_to_the_search_factor():
    # A windowed count probed at 26,000 records/s that holds 100,000; resolution 15 % (steps of
    # 1.1425), factor 2. 26,000 / sqrt(1.1425) = 24,324: 24,000 holds, under the probe; 27,420
    # (27,000) holds, the first pass above it: one step, 30,847 (31,000), holds; the second: 1.1425^2
    # = 1.3053, 40,464 (40,000), holds; the third: 1.1425^4 = 1.7039, 68,156 (68,000), holds; the
    # fourth: 1.1425^8 = 2.91, at most 2, 136,000 (140,000), fails. Then the middles: 97,570 (98,000)
    # holds, 117,132 (120,000) fails, 108,444 (110,000) fails: 12 % apart in 9 runs, where steps of
    # 1.1425 all the way passed 13 loads up to 100,000 and ran out of runs before one failed
    calls = []
    verdict, st = capacity_oracle({1: 100_000}, calls=calls), Settings(resolution=0.15)
    [b] = bracket_search([1], verdict, 5_000, st, probe=lambda r: 26_000.0)
    assert [x for x, _ in calls] == [24_000, 27_000, 31_000, 40_000, 68_000, 140_000, 98_000, 120_000, 110_000]
    assert (b.held, b.failed) == (98_000, 110_000)
    # a probe that was right: steps within the resolution, as before (94,000 and 110,000 lie 17 %
    # apart: their middle, 100,000)
    calls.clear()
    [b] = bracket_search([1], verdict, 5_000, st, probe=lambda r: 100_000.0)
    assert [x for x, _ in calls] == [94_000, 110_000, 100_000] and (b.held, b.failed) == (100_000, 110_000)


def test_a_first_step_down_that_would_pass_below_what_fewer_resources_held_stops_at_their_middle():
    # Resolution 25 % (steps of 1.2375 up; 1.2375^2 = 1.5314 down from a failure). 1 core holds
    # 45,000, probed at 40,000: 40,000 / sqrt(1.2375) = 35,957 (36,000) holds; 44,550 (45,000)
    # holds; 55,688 (56,000) fails: 24 % apart. 2 cores hold 52,000, probed at 64,000: 57,532
    # (58,000) fails. Two steps down would be 37,874 (38,000), below 1 core's 45,000: their middle,
    # 51,088 (51,000), holds instead, on 2 cores: 14 % apart in two runs (two steps down ran 38,000
    # and then 47,000: held ~47,000, 23 % apart, in three)
    calls = []
    probes = {1: 40_000.0, 2: 64_000.0}.get
    st = Settings(resolution=0.25)
    one, two = bracket_search([1, 2], capacity_oracle({1: 45_000, 2: 52_000}, calls=calls), 5_000, st, probe=probes)
    assert [x for x, r in calls if r == 1] == [36_000, 45_000, 56_000] and (one.held, one.failed) == (45_000, 56_000)
    assert [x for x, r in calls if r == 2] == [58_000, 51_000]
    assert (two.held, two.failed, two.held_assumed) == (51_000, 58_000, False)
    # 2 cores that hold less than 1 core (40,000): the middle fails too, and from it the search steps
    # down as from any load, below 1 core's end: 51,000 / 1.5314 = 33,302 (33,000) holds; the middle,
    # 41,024 (41,000), fails: 24 % apart, every end run on 2 cores
    calls.clear()
    one, two = bracket_search([1, 2], capacity_oracle({1: 45_000, 2: 40_000}, calls=calls), 5_000, st, probe=probes)
    assert [x for x, r in calls if r == 2] == [58_000, 51_000, 33_000, 41_000]
    assert (two.held, two.failed, two.held_assumed) == (33_000, 41_000, False)


def test_running_a_drifted_end_again_keeps_to_the_time_budget(monkeypatch):
    # 30 s a run, 100 s for one amount: 20k, 40k, 28k run (ending at 90 s); no time to run the
    # drifted ends again: the bracket says it ran out of time, nothing is confirmed
    verdict = timed(capacity_oracle({1: 30_000}), fake_clock(monkeypatch), 30)
    confirmed = []
    [b] = bracket_search(
        [1],
        verdict,
        start=20_000,
        confirm=lambda load, res: confirmed.append(load) or PASS,
        drifted=lambda *_: True,
        budget=Budget(deadline=100.0, run_cost_s=30.0),
    )
    assert b.runs == 3 and b.out_of_time and confirmed == [] and b.confirmed == {}


def test_drifted_ends_are_run_again_both_or_neither_and_a_run_again_always_counts(monkeypatch):
    # 30 s a run, resolution 50 %: 20k pass, 40k fail, 28k pass (28k / 40k, 43 % apart) end at 90 s.
    # With 125 s there is time for one more run, not two: neither end is run again (one alone would
    # put the drift on that end only)
    clock = fake_clock(monkeypatch)
    st = Settings(resolution=0.5)
    confirmed = []

    def confirm(load, res, took=30.0):
        confirmed.append(load)
        clock[0] += took
        return FAIL

    def search(deadline, confirm):
        clock[0] = 0.0
        confirmed.clear()
        verdict = timed(capacity_oracle({1: 30_000}), clock, 30)
        [b] = bracket_search(
            [1], verdict, 20_000, st, confirm, lambda *_: True, Budget(deadline=deadline, run_cost_s=30.0)
        )
        return b

    b = search(125.0, confirm)
    assert confirmed == [] and (b.held, b.failed) == (28_000, 40_000) and not b.out_of_time
    # with 155 s both fit; the held end's run again takes 60 s, not 30: the failed end's no longer
    # fits, and the held end's failure still moves it down to 20k, the load held below it
    b = search(155.0, lambda load, res: confirm(load, res, took=60.0))
    assert confirmed == [28_000]
    assert (b.held, b.failed) == (20_000, 40_000) and b.verdicts[28_000] == UNDECIDED


def test_an_amount_below_that_failed_nothing_hands_on_one_step_above_its_held_load():
    # 1 core's search ends (its runs used up) having held 20k and 40k and failed nothing: 2 cores
    # hold 40k too, so their search starts one step above it, not at the start load it already holds
    calls = []
    one, two = bracket_search(
        [1, 2], capacity_oracle({1: 50_000, 2: 100_000}, calls=calls), start=20_000, settings=Settings(max_runs=2)
    )
    assert (one.held, one.failed) == (40_000, None)
    assert [c for c in calls if c[1] == 2] == [(80_000, 2), (160_000, 2)]
    assert (two.held, two.failed, two.held_assumed) == (80_000, 160_000, False)


def test_an_end_the_search_never_reached_is_said_untested_and_why():
    from streamscale.benchmark.answer import bracket_answer
    from streamscale.benchmark.units import Axes

    out_of_time = Bracket(1, held=72_000, out_of_time=True).as_dict()
    runs_used_up = Bracket(2, held=110_000).as_dict()
    said = bracket_answer([out_of_time, runs_used_up], Axes(), "uc2")["sentence"]
    assert "1 core held ~72,000 records/s, higher untested (the time budget ended the search)" in said
    assert "2 cores held ~110,000 records/s, higher untested (the search's runs were used up)" in said


def test_a_bracket_whose_only_held_end_disagrees_when_run_again_searches_on_below_it():
    from streamscale.benchmark.bracket import Settings, bracket_search

    # up to 1,000 holds, up to 2,500 stays undecided, above fails; 1,200 passes once on a drifting
    # machine and is undecided run again: no load held is left, so the search goes on below 1,200
    calls = []

    def verdict(x, res):
        calls.append(x)
        if x == 1_200:
            return "pass"
        return "pass" if x <= 1_000 else "undecided" if x <= 2_500 else "fail"

    again = {1_200: "undecided", 3_000: "fail"}
    [b] = bracket_search([1], verdict, 10_000, Settings(resolution=0.25), lambda x, r: again[x], lambda x, r: True)
    # 2,500 undecided is neither end: narrowed beside it, 3,500 and 3,000 fail, 1,700 and 1,400 stay
    # undecided (no run inside that span); both ends run again: 1,200 is undecided, so the search
    # goes on below it (600, then 850 hold) until its 12 runs are spent
    assert calls == [10_000, 5_000, 2_500, 1_200, 3_500, 3_000, 1_700, 1_400, 600, 850]
    assert (b.held, b.failed, b.failed_undecided) == (850, 3_000, False)
    assert b.confirmed == {1_200: "undecided", 3_000: "fail"}


def test_the_answer_names_the_undecided_loads_between_the_ends():
    from streamscale.benchmark.answer import bracket_answer
    from streamscale.benchmark.units import Axes

    def verdict(x, res):  # holds up to 1,000, undecided up to 2,500, fails above
        return "pass" if x <= 1_000 else "undecided" if x <= 2_500 else "fail"

    (one,) = bracket_search([1], verdict, 10_000, Settings(resolution=0.25))
    assert (one.held, one.failed, one.failed_undecided) == (1_000, 3_000, False)  # both decided
    said = bracket_answer([one.as_dict()], Axes(), "job")["sentence"]
    assert said.endswith(
        "held ~1,000 records/s and failed ~3,000 records/s (undecided from ~1,200 records/s to ~2,500 records/s)"
    )
