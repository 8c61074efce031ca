"""The speed the composer's wait is said at: the read-ahead's own speed while it reads, else the last replies'."""

from __future__ import annotations

from fara_desktop.chats.prompt_wait import PromptSpeed
from fara_desktop.vocabulary.stats import GenerationStats


def stats(read: int, tok_per_s: float) -> GenerationStats:
    return GenerationStats(read, read, 8, 1.0, tok_per_s, 10.0, read + 8, 4096, 2.0)


def test_predicted_until_measured_then_the_median_of_the_last_replies():
    speed = PromptSpeed(300.0)
    assert speed.tok_per_s == 300.0 and not speed.measured
    for measured in (100.0, 120.0, 500.0):
        speed.observe(stats(200, measured))
    speed.observe(stats(10, 1.0))  # too few tokens to say
    assert speed.tok_per_s == 120.0


def test_the_speed_measured_now_wins_until_the_next_reply():
    speed = PromptSpeed(300.0)
    speed.observe(stats(200, 100.0))
    speed.observe_now(0.0)  # the read-ahead has not read enough to say
    assert speed.tok_per_s == 100.0
    speed.observe_now(30.0)  # the machine got busy
    assert speed.tok_per_s == 30.0 and speed.seconds_for(600) == 20.0
    speed.observe(stats(200, 40.0))
    assert speed.tok_per_s == 70.0  # the replies' median again
    speed.reset(250.0)
    assert speed.tok_per_s == 250.0 and not speed.measured
