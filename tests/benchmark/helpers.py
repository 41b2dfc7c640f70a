"""Results as the runner writes them, made by hand for the tests of what reads them."""

from streamscale.benchmark.results import ExperimentResult


def fake_result(load, res, rep, passed):
    return ExperimentResult(
        f"load{load:g}_res{res}_rep{rep}",
        load,
        res,
        rep,
        load,
        load,
        True,
        True,
        0.0,
        load * 0.01,
        passed,
        0,
        0.0,
        True,
        passed,
        0,
        100,
        0.1,
        1.0,
    )
