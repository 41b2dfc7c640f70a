"""The sparkio tests check streamscale's own Kafka source and sink (the Python connector); Spark's
connector is checked through the pipelines."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _python_connector(monkeypatch):
    monkeypatch.setenv("STREAMSCALE_KAFKA_IMPL", "python")
