"""The memory estimate of a hybrid model against llama.cpp's own count (issue 41): the state llama.cpp saves for a
sequence is the recurrent layers' fixed state plus the KV cells of the layers that attend, which is what the
estimate charges (``recurrent_state_bytes`` and ``kv_cache_bytes``). Real llama.cpp, small models of three families."""

from __future__ import annotations

import llama_cpp
import pytest
from llama_cpp import Llama

from fara_desktop.machine.llama_build import load_ggml_cpu_library
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.metadata import metadata_from_header
from fara_desktop.planning.tuning import kv_cache_bytes
from tests.helpers.hybrid_factory import HYBRID_FAMILIES, write_tiny_hybrid

CELL_BOOKKEEPING = 24  # bytes llama.cpp writes per cell beside its K and V rows (position, sequences)
HEADER = 512  # and per state: counts, types and row sizes


@pytest.mark.parametrize("family", HYBRID_FAMILIES)
def test_the_state_llama_cpp_keeps_per_sequence_is_what_the_estimate_charges(tmp_path, family):
    path = write_tiny_hybrid(tmp_path / f"{family}.gguf", family)
    meta = metadata_from_header(read_gguf_header(path))
    load_ggml_cpu_library()
    llm = Llama(model_path=str(path), n_ctx=512, verbose=False)
    try:
        # the architecture names this app reads as hybrid are the ones llama.cpp runs as such
        assert llama_cpp.llama_model_is_hybrid(llm.model) and not meta.rewindable
        sizes = {}
        for count in (100, 300):
            llm.reset()
            llm.eval([5 + i % 260 for i in range(count)])
            sizes[count] = llama_cpp.llama_state_seq_get_size(llm.ctx, 0)
    finally:
        llm.close()
    per_token = (sizes[300] - sizes[100]) / 200
    fixed = sizes[100] - 100 * per_token
    assert kv_cache_bytes(meta, 1) <= per_token <= kv_cache_bytes(meta, 1) + CELL_BOOKKEEPING
    assert meta.recurrent_state_bytes <= fixed <= meta.recurrent_state_bytes + HEADER
