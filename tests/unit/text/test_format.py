"""One way to write moments, counts and parameter counts."""

from __future__ import annotations


def test_moments_carry_their_year_unless_it_is_this_one():
    import time as clock

    from fara_desktop.text.format import format_when

    now = clock.mktime((2026, 12, 4, 12, 0, 0, 0, 0, -1))
    today = clock.mktime((2026, 12, 4, 9, 5, 0, 0, 0, -1))
    this_year = clock.mktime((2026, 5, 29, 16, 26, 0, 0, 0, -1))
    years_ago = clock.mktime((2023, 5, 29, 16, 26, 0, 0, 0, -1))
    assert format_when(today, now=now) == "09:05"
    assert format_when(today, always_date=True, now=now) == "4 Dec 09:05"
    assert format_when(this_year, now=now) == "29 May 16:26"
    assert format_when(years_ago, now=now) == "29 May 2023 16:26"
    assert format_when(years_ago, with_time=False, now=now) == "29 May 2023"


def test_counts_and_parameter_counts_read_as_people_write_them():
    from fara_desktop.text.format import format_count, format_parameters

    assert [format_count(n, "thread") for n in (1, 2, 10_000)] == ["1 thread", "2 threads", "10,000 threads"]
    assert format_parameters(999_700_000) == "1.0B" and format_parameters(135_000_000) == "135M"


def test_long_waits_are_said_in_words_a_person_plans_by():
    """Issue 43, item 8: semantic search's time left read 28 → 45 → 31 min; coarse words do not flicker."""
    from fara_desktop.text.format import format_plan_duration

    assert format_plan_duration(30) == "less than a minute"
    assert format_plan_duration(200) == "a few minutes"
    assert format_plan_duration(27 * 60) == format_plan_duration(26 * 60) == "about 25 min"
    assert format_plan_duration(100 * 60) == "about 1.5 h"
    assert format_plan_duration(3.7 * 3600) == "about 4 h"
    assert format_plan_duration(20 * 3600) == "more than half a day"

