"""The words every layer uses: what a tool offer declares and forces, the room kept for a reply, where a cited
passage came from."""

from __future__ import annotations

from fara_desktop.vocabulary.sampling import SamplingParams, reply_reserve
from fara_desktop.vocabulary.sources import Source
from fara_desktop.vocabulary.tools import ToolOffer, ToolSpec

CLOCK, WEATHER = ToolSpec("clock"), ToolSpec("weather")


def test_a_tool_offer_declares_and_forces_what_its_choice_says():
    assert ToolOffer((CLOCK, WEATHER)).declared() == (CLOCK, WEATHER)
    assert ToolOffer((CLOCK, WEATHER)).forced() == ()
    assert ToolOffer((CLOCK, WEATHER), "none").declared() == ()
    assert ToolOffer((CLOCK, WEATHER), "required").forced() == ("clock", "weather")
    assert ToolOffer((CLOCK, WEATHER), "weather").forced() == ("weather",)


def test_the_room_kept_for_a_reply_is_never_more_than_half_the_context():
    assert reply_reserve(SamplingParams(max_tokens=None), 4096) == 512
    assert reply_reserve(SamplingParams(max_tokens=None), 1024) == 256
    assert reply_reserve(SamplingParams(max_tokens=10_000), 4096) == 2048
    assert reply_reserve(SamplingParams(max_tokens=100), 4096) == 100


def test_a_cited_passage_says_where_it_came_from():
    assert "12" in Source(1, "/docs/manual.pdf", "text", page=12).where
    assert "manual.pdf" in Source(1, "/docs/manual.pdf", "text").where
