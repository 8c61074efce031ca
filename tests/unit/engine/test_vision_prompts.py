"""A prompt with pictures as the token record sees it: where reading may resume (never inside a picture), the
segments read in order, and a marker typed in a message staying text."""

from __future__ import annotations

from fara_desktop.engine.vision import MARKER, PICTURE_SLOT, PictureSpan, VisionPrompt, marked, with_slots


def prompt() -> VisionPrompt:
    spans = (PictureSpan(5, 16, "a" * 64, 1), PictureSpan(30, 16, "b" * 64, 3))
    return VisionPrompt(list(range(50)), spans, None)


def test_reading_resumes_at_a_pictures_start_never_inside_it():
    vision = prompt()
    assert vision.resume_point(5) == 5
    assert vision.resume_point(12) == 5
    assert vision.resume_point(21) == 21
    assert vision.resume_point(40) == 30


def test_segments_are_text_runs_and_whole_pictures_in_order():
    vision = prompt()
    assert list(vision.segments(0, 49)) == [(0, 5), vision.spans[0], (21, 30), vision.spans[1], (46, 49)]
    assert list(vision.segments(21, 30)) == [(21, 30)]


def test_pictures_go_first_and_a_typed_marker_stays_text():
    assert marked(with_slots("look", 2)) == MARKER * 2 + "\nlook"
    typed = marked(with_slots(f"what is {MARKER}?", 0))
    assert MARKER not in typed and "what is" in typed
    assert marked(f"a tool named {MARKER}, then " + with_slots("look", 1)).count(MARKER) == 1
    assert PICTURE_SLOT not in marked(with_slots("look", 1))
