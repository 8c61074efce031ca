"""Typed errors of the engine; each carries a message a person can act on."""

from __future__ import annotations

from collections.abc import Sequence

from fara_desktop.vocabulary.errors import FaraError


class ModelFileNotFoundError(FaraError):
    """The model path does not exist (or is not a regular file)."""


class ModelLoadError(FaraError):
    """llama.cpp refused to load the file (unsupported architecture, damaged tensors, out of memory)."""


class LoadCancelledError(ModelLoadError):
    """The user stopped a model while it loaded; no model is loaded."""


class NoModelLoadedError(FaraError):
    """A reply was requested before any model finished loading."""


class PromptTooLongError(FaraError):
    """The newest message alone (with the system prompt) does not fit the context window."""


class GenerationError(FaraError):
    """llama.cpp failed while evaluating the prompt or producing a token."""


class GrammarError(GenerationError):
    """A JSON schema (a ``response_format`` or a forced tool's parameters) that cannot become a grammar llama.cpp
    builds, or asks for more than the grammar's budget; the message names what and why."""


class TemplateRenderError(FaraError):
    """The model's chat template refused the conversation or broke while rendering it; the message says why."""


class CalibrationYieldedError(FaraError):
    """The thread calibration stopped so that a reply waiting for the model can run first; it runs again after."""


class RequestCancelled(FaraError):
    """The user stopped the request before its reply began (while its prompt was still being built)."""


class RemoteServerError(GenerationError):
    """An OpenAI-compatible server could not be reached, refused the request or broke off its reply."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ToolsUnsupportedError(FaraError):
    """Tools were offered to a model whose chat template declares none: it cannot call them, and it is not faked."""


class PicturesUnsupportedError(FaraError):
    """A message carries pictures and the model has no vision projector loaded beside it: it cannot see them."""


class PictureReadError(FaraError):
    """A picture could not be read into the prompt (its file is gone or damaged, or the projector refused it)."""


def tools_unsupported(model: str) -> ToolsUnsupportedError:
    return ToolsUnsupportedError(
        f"{model}'s chat template does not declare tools, so it cannot call any. Choose a model made for tool "
        "calling (Qwen 2.5/3, Llama 3.1+, Mistral, Granite, Hermes, gpt-oss …)."
    )


def cannot_see(model: str, problem: str = "", seeing: Sequence[str] = ()) -> str:
    """What to say when pictures are attached for a model that has no vision projector loaded."""
    why = f" ({problem})" if problem else ": no vision projector (mmproj) was found beside it"
    instead = (
        f" Models here that can: {', '.join(seeing[:3])}."
        if seeing
        else (
            " Choose a model with an mmproj file beside it (Gemma 3 or 4, Qwen2.5-VL, Qwen3.5 …), or put its "
            "projector in the model's folder."
        )
    )
    return f"{model} cannot see pictures{why}.{instead}"
