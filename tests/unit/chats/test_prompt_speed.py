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


def test_the_speed_measured_now_pulls_the_forecast_until_the_next_reply():
    speed = PromptSpeed(300.0)
    speed.observe_read_ahead(40.0)  # no reply yet: the read-ahead's own speed
    assert speed.tok_per_s == 40.0
    speed.observe(stats(200, 100.0))
    speed.observe_read_ahead(0.0)  # the read-ahead has not read enough to say
    assert speed.tok_per_s == 100.0
    # the machine got busy: Enter's full batches read 1.5x the read-ahead's 128-token ones
    speed.observe_read_ahead(25.0)
    assert speed.tok_per_s == 37.5 and speed.seconds_for(600) == 16.0
    speed.observe_read_ahead(90.0)  # the read-ahead is no slower than the replies (a quiet machine): the replies' speed
    assert speed.tok_per_s == 100.0
    speed.observe_read_ahead(120.0)  # quieter than when the replies were read: its own
    assert speed.tok_per_s == 120.0
    speed.observe(stats(200, 40.0))
    assert speed.tok_per_s == 70.0  # the replies' median again
    speed.reset(250.0)
    assert speed.tok_per_s == 250.0 and not speed.measured


def test_a_token_further_into_the_context_is_forecast_to_cost_more():
    """SmolLM2-1.7B's shape read 79 tok/s at the start of its context and 46 at 2,560 tokens in: a speed measured
    near the start would forecast a paste's end far too short."""
    speed = PromptSpeed(0.0, span=4000.0)
    speed.observe_read_ahead(80.0, 0, 160)  # the read-ahead's first 2 s, at the context's start
    near, far = speed.seconds_for(500, 0), speed.seconds_for(500, 2500)
    assert far / near > 1.5
    flat = PromptSpeed(0.0)
    flat.observe_read_ahead(80.0, 0, 160)
    assert flat.seconds_for(500, 2500) == flat.seconds_for(500, 0) == 500 / 80
    late = PromptSpeed(0.0, span=4000.0)
    late.observe(stats(500, 60.0))  # a reply that read the last 500 of its 500 tokens
    assert late.tok_per_s > 60.0  # kept as at the context's start


def test_a_speed_measured_minutes_ago_does_not_say_the_wait_of_a_new_paste():
    """Issue 64, item 3: a read-ahead of a few words on a busy machine measured 5 tok/s; the reply after it read one
    token (too few to say a speed), so that speed still pulled every later forecast: pastes were said to take 2, 3
    and 6 minutes for real waits of 21–38 s. The speed now is the speed of the last minute."""
    clock = [1000.0]
    speed = PromptSpeed(0.0, clock=lambda: clock[0])
    speed.observe(stats(400, 100.0))
    speed.observe_read_ahead(4.0)
    assert speed.tok_per_s == 6.0  # while the machine is that busy, it says so
    speed.observe(stats(1, 0.5))  # Enter: one token read, no speed in it
    clock[0] += 180.0
    assert speed.tok_per_s == 100.0  # three minutes on, the last replies' speed until a read-ahead measures again
    speed.observe_read_ahead(25.0)
    assert speed.tok_per_s == 37.5
