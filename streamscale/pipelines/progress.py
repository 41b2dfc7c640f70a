"""What a streaming query's progress report says, read the same way by the run and the replay."""

from __future__ import annotations

import json


def progress_offsets(value) -> dict:
    """A source's offsets in a progress report: a dict (streamscale's source) or the JSON text
    of one (Spark's Kafka source), as {topic: {partition: offset}}."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}
