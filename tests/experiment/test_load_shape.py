"""A load given as a rate, for every SUT: the generator's keys and period that make it."""

import pytest

from streamscale.errors import ConfigError
from streamscale.experiment.sut import load_shape
from streamscale.loadgen.recordspec import records_spec
from streamscale.pipelines import make_pipeline


def test_a_rate_for_each_kind_of_sut():
    uc2 = make_pipeline("uc2")
    assert load_shape(uc2, None, 1000, 1.0, None) == (1000, 1.0)  # no rate: the sensors as given
    assert load_shape(uc2, None, 1000, 1.0, 5000) == (5000, 1.0)
    assert load_shape(uc2, None, 1000, 2.0, 5000) == (10_000, 2.0)  # a sensor a record every 2 s
    uc4 = make_pipeline("uc4", {"levels": 2})  # 16 sensors in the registry: they send faster
    assert load_shape(uc4, None, 1000, 1.0, 160) == (16, 0.1)
    records = records_spec({"fields": {"a": {"type": "long", "gen": "sequence"}}}, "test")
    assert load_shape(uc2, records, 1000, 5.0, 2500.4) == (2500, 1.0)
    with pytest.raises(ConfigError, match="at least 1 record/s"):
        load_shape(uc2, None, 1000, 1.0, 0.5)
