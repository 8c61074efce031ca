"""Who sends a local API request (``serving.principals``): a key each, or the apps on this computer together."""

from __future__ import annotations

import pytest

from fara_desktop.serving.principals import LOCAL_CLIENTS, ApiKeyError, Principals, key_problem, split_keys
from fara_desktop.vocabulary.stats import GenerationStats


def stats(prompt: int, read: int) -> GenerationStats:
    return GenerationStats(prompt, read, 3, 0.1, 10.0, 10.0, prompt + 3, 2048, 0.5)


def test_without_a_key_every_client_on_this_computer_is_one_principal():
    principals = Principals(None)
    assert principals.principal_for("") == principals.principal_for("Bearer anything") == LOCAL_CLIENTS


def test_each_key_is_a_principal_of_its_own_named_by_a_fingerprint_never_by_the_key():
    principals = Principals("sk-editor-0123456789abcd\n  sk-notes-xyz\nsk-editor-0123456789abcd")
    assert principals.keys == ("sk-editor-0123456789abcd", "sk-notes-xyz")
    editor = principals.principal_for("Bearer sk-editor-0123456789abcd")
    notes = principals.principal_for("Bearer sk-notes-xyz")
    assert editor and notes and editor != notes
    assert "sk-" not in editor + notes
    assert principals.principal_for("Bearer sk-notes-xy") is None and principals.principal_for("") is None
    principals.record(notes, stats(100, 100))
    principals.record(editor, stats(120, 20))
    principals.record(editor, None)  # failed before it read
    uses = principals.uses()
    assert [(u.label, u.requests, u.read, u.reused) for u in uses] == [
        ("Key 2", 1, 100, 0), ("Key 1 (…abcd)", 2, 20, 100)]  # fmt: skip


def test_keys_are_one_per_line_each_kept_whole():
    """Issue 62, item 3: "correct horse battery staple" was four keys, each valid alone."""
    assert split_keys(" correct horse battery staple \r\nx7Qp2,zR9mK4vT8wL3nB6\n\n") == (
        "correct horse battery staple", "x7Qp2,zR9mK4vT8wL3nB6")  # fmt: skip
    assert split_keys(None) == split_keys("") == ()
    principals = Principals("correct horse battery staple")
    assert principals.principal_for("Bearer correct horse battery staple") is not None
    assert [principals.principal_for(f"Bearer {word}") for word in ("horse", "correct", "staple")] == [None, None, None]


@pytest.mark.parametrize(("keys", "said"), [
    ("my", "The API key is 2 characters long; an API key needs at least 8."),
    ("sk-long-enough-1\nx7Qp2", "API key 2 is 5 characters long"),
    ("clé-très-secrète", "ASCII"),
    ("tab\tinside-key", "ASCII"),
])  # fmt: skip
def test_a_key_that_cannot_be_one_is_refused_with_the_reason_never_the_key(keys, said):
    with pytest.raises(ApiKeyError, match=said) as refused:
        Principals(keys)
    assert all(key not in str(refused.value) for key in keys.splitlines())
    assert key_problem("sk-long-enough-1") is None


def test_new_keys_keep_the_use_of_the_keys_that_stay():
    earlier = Principals("sk-editor-0123456789abcd\nsk-notes-0123456789")
    earlier.record(earlier.principal_for("Bearer sk-notes-0123456789") or "", stats(50, 50))
    earlier.record(earlier.principal_for("Bearer sk-editor-0123456789abcd") or "", stats(10, 10))
    now = Principals("sk-notes-0123456789\nsk-new-0123456789", earlier=earlier)
    assert [(u.label, u.requests) for u in now.uses()] == [("Key 1 (…6789)", 1)]
    assert now.principal_for("Bearer sk-editor-0123456789abcd") is None


def test_each_client_shows_its_requests_under_way_until_they_end():
    """Issue 63: with several requests decoding together, the Local API page says how many each client has under
    way now; one that could not be handed to the engine is taken back."""
    from fara_desktop.ui.dialogs.local_api_page import client_line

    principals = Principals("sk-editor-0123456789abcd")
    editor = principals.principal_for("Bearer sk-editor-0123456789abcd") or ""
    for _ in range(3):
        principals.admitted(editor)
    principals.admitted(editor, -1)  # refused on its way to the engine
    principals.record(editor, stats(100, 40))
    (use,) = principals.uses()
    assert (use.requests, use.running) == (1, 1)
    assert "1 request · 1 under way now · 40 tokens read" in client_line(use)
    principals.record(editor, None)
    assert principals.uses()[0].running == 0 and "under way" not in client_line(principals.uses()[0])
