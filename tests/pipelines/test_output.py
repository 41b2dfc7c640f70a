"""The append-mode output's grid check: where window ends can lie between two watermarks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamscale.pipelines import make_pipeline
from streamscale.pipelines.output import window_end_between


def ends_by_brute_force(size: int, slide: int, low: int, high: int) -> bool:
    # Spark's window(): starts at multiples of the slide (from epoch 0), end = start + size
    first_start = (low - size) // slide * slide - slide
    start = first_start
    while start + size <= high:
        if start + size >= low:
            return True
        start += slide
    return False


@given(
    st.integers(1, 50),
    st.integers(1, 50),
    st.integers(-10_000, 10_000),
    st.integers(0, 400),
)
def test_window_end_between_matches_the_grid(size_units, slide_units, low, width):
    slide = slide_units * 7
    size = max(size_units * 7, slide)  # slide never exceeds the size (UC3 refuses that)
    assert window_end_between((size, slide), low, low + width) == ends_by_brute_force(size, slide, low, low + width)


def test_window_end_between_hand_worked():
    # 60 s tumbling windows end at 60,000, 120,000, ...
    assert not window_end_between((60_000, 60_000), 60_001, 119_999)
    assert window_end_between((60_000, 60_000), 60_001, 120_000)
    assert window_end_between((60_000, 60_000), 60_000, 60_000)
    # 3 days every day: ends at whole days
    day = 86_400_000
    assert window_end_between((3 * day, day), 5 * day - 1, 5 * day)
    assert not window_end_between((3 * day, day), 5 * day + 1, 6 * day - 1)


def test_pipelines_know_their_window_grid():
    assert make_pipeline("uc2", {"window_s": 60}).window_grid_ms() == (60_000, 60_000)
    assert make_pipeline("uc3", {"window_s": 259_200, "slide_s": 86_400}).window_grid_ms() == (
        259_200_000,
        86_400_000,
    )
    assert make_pipeline("uc1").window_grid_ms() is None
