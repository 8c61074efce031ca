"""The base of every error Fara Desktop raises on purpose, and the errors every layer shares."""

from __future__ import annotations


class FaraError(Exception):
    """Base of every error Fara Desktop raises on purpose; ``str(error)`` is meant for the user."""


class NotAGGUFError(FaraError):
    """The file exists but is not a GGUF model (wrong magic bytes, empty or truncated header)."""
