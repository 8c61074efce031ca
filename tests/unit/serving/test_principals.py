"""Who sends a local API request (``serving.principals``): a key each, or the apps on this computer together."""

from __future__ import annotations

from fara_desktop.serving.principals import LOCAL_CLIENTS, Principals, split_keys
from fara_desktop.vocabulary.stats import GenerationStats


def stats(prompt: int, read: int) -> GenerationStats:
    return GenerationStats(prompt, read, 3, 0.1, 10.0, 10.0, prompt + 3, 2048, 0.5)


def test_without_a_key_every_client_on_this_computer_is_one_principal():
    principals = Principals(None)
    assert principals.of("") == principals.of("Bearer anything") == LOCAL_CLIENTS


def test_each_key_is_a_principal_of_its_own_named_by_a_fingerprint_never_by_the_key():
    principals = Principals("sk-editor-0123456789abcd,  sk-notes-xyz\nsk-editor-0123456789abcd")
    assert principals.keys == ("sk-editor-0123456789abcd", "sk-notes-xyz")
    editor, notes = principals.of("Bearer sk-editor-0123456789abcd"), principals.of("Bearer sk-notes-xyz")
    assert editor and notes and editor != notes
    assert "sk-" not in editor + notes
    assert principals.of("Bearer sk-notes-xy") is None and principals.of("") is None
    principals.record(notes, stats(100, 100))
    principals.record(editor, stats(120, 20))
    principals.record(editor, None)  # failed before it read
    uses = principals.uses()
    assert [(u.label, u.requests, u.read, u.reused) for u in uses] == [
        ("Key 2", 1, 100, 0), ("Key 1 (…abcd)", 2, 20, 100)]  # fmt: skip


def test_keys_are_split_on_spaces_commas_and_lines():
    assert split_keys(" a, b\n\tc  a ") == ("a", "b", "c")
    assert split_keys(None) == split_keys("") == ()
