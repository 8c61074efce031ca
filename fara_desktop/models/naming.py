"""One display name per model, used in every header, panel, status line and dialog.

The file's own name is what the user downloaded and recognises ("SmolLM2-135M-Instruct.Q4_1.gguf" →
"SmolLM2-135M-Instruct"); the GGUF's ``general.name`` is often made by the converter from a checkpoint folder
("Smollm2 135M 8k Lc100K Mix1 Ep2"). So the file name wins, without its quantization and shard suffixes, unless it
says nothing (an Ollama blob "sha256-…", "model.gguf", "ggml-model-q4_0.gguf"); then the GGUF's name fields speak.
A server's model is named by its id, and an id that is a file path by that file's name.
"""

from __future__ import annotations

import re

from fara_desktop.text.untrusted import one_line

_SHARD = re.compile(r"-\d{5}-of-\d{5}$", re.IGNORECASE)
# Quantization tags as llama.cpp, Unsloth, bartowski and TheBloke write them: Q4_K_M, IQ3_XXS, Q8_0, F16, UD-Q4_K_XL…
_QUANT = re.compile(
    r"[.\-_ ](?:ud-)?(?:i?q\d(?:_[a-z0-9]+)*|f16|f32|bf16|fp16|fp32|mxfp4(?:_moe)?|tq\d_\d)$", re.IGNORECASE
)
_HASH = re.compile(r"^(?:sha256[-:])?[0-9a-f]{32,}$", re.IGNORECASE)
_SAYS_NOTHING = frozenset(
    {"", "model", "ggml-model", "ggml", "consolidated", "weights", "blob", "data", "gguf", "unnamed"}
)
MAX_NAME = 120


def name_from_file(file_name: str) -> str:
    """A file's name without the directory, ``.gguf``, a shard suffix and quantization tags; "" when it says
    nothing about the model."""
    base = file_name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    stem = base[:-5] if base.lower().endswith(".gguf") else base
    stem = "." + _SHARD.sub("", stem)  # the dot lets a name that is only a quantization tag lose it too
    while True:
        shorter = _QUANT.sub("", stem)
        if shorter == stem:
            break
        stem = shorter
    stem = stem.strip(" .-_")
    if len(stem) < 3 or _HASH.match(stem) or stem.lower() in _SAYS_NOTHING:
        return ""
    return stem


def model_display_name(
    file_name: str,
    general_name: str | None = None,
    basename: str | None = None,
    size_label: str | None = None,
) -> str:
    """The name shown for a GGUF model: its file's name, else ``general.name``, else basename + size label."""
    for candidate in (
        name_from_file(file_name),
        general_name or "",
        " ".join(part for part in (basename, size_label) if part),
    ):
        name = one_line(candidate, MAX_NAME).strip()
        if name:
            return name
    return one_line(file_name.replace("\\", "/").rsplit("/", 1)[-1], MAX_NAME) or "unnamed model"


def server_model_name(model_id: str) -> str:
    """A server's model id as shown: the id itself, or the file's name when the id is a path (llama.cpp's server
    names its model by the path it was started with)."""
    text = one_line(model_id, 400).strip()
    if ("/" in text or "\\" in text) and text.lower().endswith(".gguf"):
        return model_display_name(text)
    return one_line(text, MAX_NAME) or "unnamed model"
