"""What a picture costs on this machine: the vision encoder's work for one picture (from its projector's header),
the seconds that takes at a measured rate, and the memory the projector adds beside its model.

A vision encoder (SigLIP, a ViT) is compute-bound, unlike the text model's replies: every patch goes through every
layer, and attention grows with the square of the patches. Per layer, for P patches of width d and feed-forward
width f: 8·P·d² (the attention's four projections) + 4·P·d·f (the MLP) + 4·P²·d (attention itself) operations.
The rate (operations a second) is measured here, by the first picture encoded (kept in the machine cache), so a
forecast for another picture size or another projector scales the measured one by the work.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from fara_desktop.models.gguf_file import GGUFHeader

MIB = 1024 * 1024
MAX_SIDE = 8192
# An f16 vision encoder ran at 231-279 G operations a second on 2 threads of an AVX-512 EPYC (three shapes: 224 px
# 6 layers, 448 px 12 layers, SigLIP-So400m's 896 px 27 layers; ``bench --section vision``): 120 G a thread. With
# AVX2 only, half (the width of its vectors; not measured here). Used until this session measures its own rate.
VISION_OPERATIONS_PER_THREAD = 60e9
VISION_OPERATIONS_PER_THREAD_AVX512 = 120e9


def default_operations_per_s(threads: int, cpu_features: Collection[str]) -> float:
    """The encoder's speed on this CPU before one picture was measured."""
    per_thread = VISION_OPERATIONS_PER_THREAD_AVX512 if "AVX512" in cpu_features else VISION_OPERATIONS_PER_THREAD
    return per_thread * max(threads, 1)


# Projectors that read a picture at its own size (in patches of 2 × 2, merged into one token each) rather than
# scaled to a fixed square: the Qwen-VL family's.
DYNAMIC_SIZE_PROJECTORS = ("qwen2vl_merger", "qwen2.5vl_merger", "qwen3vl_merger")
WINDOW_PATCHES = 64  # Qwen2.5-VL's attention windows: 112 × 112 pixels, 8 × 8 patches of 14


@dataclass(frozen=True)
class ProjectorShape:
    """A vision projector's encoder, as its header describes it."""

    image_size: int
    patch_size: int
    n_embd: int
    n_ff: int
    n_layer: int
    weight_bytes: int
    dynamic: bool = False  # reads a picture at its own size (Qwen-VL) instead of scaled to ``image_size``
    window_pattern: int = 0  # every n-th layer attends to the whole picture, the others within windows
    gated: bool = False  # its feed-forward has a gate (SwiGLU: three matrices, not two)

    def patches_for(self, width: int | None = None, height: int | None = None) -> int:
        """The patches of one picture: a fixed-size projector's square; a dynamic one's picture, rounded to whole
        2 × 2 groups of patches (as ``mtmd`` resizes it)."""
        if self.dynamic and width and height:
            group = 2 * self.patch_size
            return max(1, round(width / group)) * max(1, round(height / group)) * 4
        return (self.image_size // self.patch_size) ** 2

    def operations_for(self, width: int | None = None, height: int | None = None) -> float:
        """The work to encode one picture (floating-point operations)."""
        return self.operations_of(self.patches_for(width, height))

    def operations_of(self, p: int) -> float:
        """The work to encode ``p`` patches."""
        d, f = self.n_embd, self.n_ff
        attended = float(p)  # the patches each patch attends to
        if self.window_pattern > 0:
            full = self.n_layer // self.window_pattern
            attended = (full * p + (self.n_layer - full) * min(p, WINDOW_PATCHES)) / self.n_layer
        per_layer = 8 * p * d * d + (6 if self.gated else 4) * p * d * f + 4 * p * attended * d
        embed = 2 * p * (self.patch_size**2 * 3) * d * (2 if self.dynamic else 1)  # Qwen-VL: two convolutions
        return float(self.n_layer * per_layer + embed)

    @property
    def operations(self) -> float:
        return self.operations_for()

    def seconds_at(self, operations_per_s: float, width: int | None = None, height: int | None = None) -> float:
        return self.operations_for(width, height) / operations_per_s if operations_per_s > 0 else 0.0

    @property
    def memory_bytes(self) -> int:
        """What loading it adds: its weights (read into memory, not mapped) and the encoder's working buffers for a
        picture of 896 pixels a side: about five activations of every patch, one head's attention scores, and 40
        MiB the encoder's context keeps whatever its size (fitted on three Gemma-3-layout shapes: 44.8 MB at
        224 px and 128 wide, 219 MB at 448 px and 768 wide, 1,040 MB for SigLIP-So400m at 896 px)."""
        p, d = self.patches_for(896, 896), self.n_embd
        return self.weight_bytes + 4 * p * 5 * d + 4 * p * p + 40 * MIB


def projector_shape(header: GGUFHeader) -> ProjectorShape | None:
    """The encoder's shape, or None when the header does not say it."""
    image = header.int_value("clip.vision.image_size", 1, MAX_SIDE)
    patch = header.int_value("clip.vision.patch_size", 1, MAX_SIDE)
    width = header.int_value("clip.vision.embedding_length", 1, 1 << 16)
    layers = header.int_value("clip.vision.block_count", 1, 1024)
    if image is None or patch is None or width is None or layers is None or patch > image:
        return None
    ff = header.int_value("clip.vision.feed_forward_length", 1, 1 << 18) or 4 * width
    kind = header.metadata.get("clip.projector_type")
    windows = header.int_value("clip.vision.n_wa_pattern", 1, 1024) or 0
    gated = any(t.name == "v.blk.0.ffn_gate.weight" for t in header.tensors)
    return ProjectorShape(
        image, patch, width, ff, layers, header.tensor_bytes, kind in DYNAMIC_SIZE_PROJECTORS, windows, gated
    )
