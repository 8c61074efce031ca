"""The parameters a model is loaded with: as tuned for this machine (with reasons) and as the engine takes them."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_CONTEXT = 4096  # the context a model gets when nobody chose one (capped by what it was trained for)


@dataclass(frozen=True)
class LoadParams:
    """How llama.cpp loads a model. ``None`` means "let the engine choose for this machine"."""

    n_ctx: int | None = None
    n_threads: int | None = None
    n_threads_batch: int | None = None
    n_batch: int = 512
    n_ubatch: int = 512
    use_mmap: bool = True
    use_mlock: bool = False
    flash_attn: bool = False
    kv_type: str = "f16"  # "f16", "q8_0" or "q4_0"; quantized caches need flash attention
    prefault: bool = True  # read the file into the page cache on a background thread: ahead of a load that reads
    # it, or after a load that maps it (whose pages would otherwise be faulted in by the first reply)
    projector: str | None = None  # a vision projector (mmproj) to load beside the model: it then sees pictures
    parallel: int = 1  # the local API's replies decoded together, each in a context of its own (1: one at a time)
    speculate: bool = True  # replies propose tokens from their own text, where that pays here (window and API)
    # a smaller model of the same vocabulary proposing the window's next tokens: its file, "auto" (the planner
    # pairs one from the models on disk where it fits beside: ``draft_pairing``) or "" (none)
    draft_model: str = ""

    def context_for(self, trained: int | None) -> int:
        """The context the engine loads with: the chosen one, else the default capped by the trained length."""
        if self.n_ctx:
            return self.n_ctx
        return min(trained, DEFAULT_CONTEXT) if trained else DEFAULT_CONTEXT


@dataclass(frozen=True)
class TunedParams:
    """What the engine will use, each value with the reason it was chosen."""

    n_ctx: int
    n_threads: int
    n_threads_batch: int
    n_batch: int
    n_ubatch: int
    kv_type: str
    flash_attn: bool
    use_mmap: bool
    use_mlock: bool
    reasons: dict[str, str]
    parallel: int = 1  # the local API's replies decoded together while it is on (``InferenceOverrides.apply``)

    def load_params(self) -> LoadParams:
        """These values as the engine loads them (a quantized KV cache needs flash attention)."""
        return LoadParams(
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads_batch,
            n_batch=self.n_batch,
            n_ubatch=min(self.n_batch, self.n_ubatch),
            kv_type=self.kv_type,
            flash_attn=self.flash_attn or self.kv_type != "f16",
            use_mmap=self.use_mmap,
            use_mlock=self.use_mlock,
        )
