"""The loop detector (engine/repetition.py): a reply whose end is one block repeated three times is a loop; prose,
lists, tables and code that repeat shorter pieces are not."""

from __future__ import annotations

from fara_desktop.engine.repetition import CHECK_EVERY, LoopDetector, repeated_period

PARAGRAPH = "The sea is calm today, and the boats are back in the harbour before noon.\n\n"


def _fed(text: str, piece: int = 5) -> LoopDetector:
    detector = LoopDetector()
    for start in range(0, len(text), piece):
        detector.feed(text[start : start + piece])
    return detector


def test_a_paragraph_said_three_times_is_a_loop_noticed_within_a_few_tokens():
    intro = "Here is the answer.\n\n"
    assert repeated_period(intro + PARAGRAPH * 3) == len(PARAGRAPH)
    text = intro + PARAGRAPH * 5
    detector = LoopDetector()
    for start in range(0, len(text), 4):
        if detector.feed(text[start : start + 4]):
            break
    third = len(intro) + 3 * len(PARAGRAPH)
    assert detector.looping and third - 4 <= start <= third + CHECK_EVERY  # once the third is whole, not before


def test_a_short_rhythm_and_twice_the_same_paragraph_are_not_loops():
    assert repeated_period("Here is the answer.\n\n" + PARAGRAPH * 2) == 0



def test_normal_replies_are_not_cut():
    numbered = "".join(f"{n}. Step number {n}: open the valve and check the gauge.\n" for n in range(1, 40))
    table = "| name | value |\n| --- | --- |\n" + "".join(f"| row {n} | {n * n} |\n" for n in range(60))
    code = "def f(x):\n" + "".join(f"    y{n} = x + {n}\n" for n in range(80)) + "    return y0\n"
    prose = " ".join(f"Sentence {n} says something new about the harbour and its {n} boats." for n in range(80))
    for text in (numbered, table, code, prose):
        assert not _fed(text).looping, text[:60]


def test_what_the_guide_says_is_caught_and_missed():
    """docs/guide.md, *Replies that run away are stopped*: items that come round again are a loop; counting,
    numbered steps that say the same, and growing table rows are not (they look like what people ask for)."""
    assert _fed("- apples\n- pears\n- plums\n" * 100).looping
    assert _fed("The cat sat on the mat and looked at the moon for a while. " * 40).looping
    missed = (
        ", ".join(str(n) for n in range(1, 2001)),
        "".join(f"Step {n}: Add the water and stir.\n" for n in range(1, 300)),
        "".join(f"| {n} | {n * n} | {n**3} |\n" for n in range(1, 300)),
    )
    for text in missed:
        assert not _fed(text).looping, text[:40]


def test_a_repeated_short_line_block_long_enough_is_a_loop():
    assert _fed("Sure!\n" + "I am sorry, I cannot help with that request.\n" * 3).looping


def test_the_local_api_never_cuts_a_clients_reply_for_repeating():
    from fara_desktop.serving.openai_format import parse_chat_request, parse_completion_request
    from fara_desktop.vocabulary.sampling import SamplingParams

    chat = parse_chat_request({"messages": [{"role": "user", "content": "Hi"}]}, SamplingParams())
    text = parse_completion_request({"prompt": "Once upon a time"}, SamplingParams())
    assert SamplingParams().stop_loops and not chat.sampling.stop_loops and not text.sampling.stop_loops
