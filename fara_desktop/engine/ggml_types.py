"""The one table of ggml tensor types the app names (the KV cache types it offers): ggml.h's ``enum ggml_type``.

Written out rather than read from llama_cpp so that importing the engine does not load llama.cpp; a test checks
every value against llama-cpp-python's own constants.
"""

from __future__ import annotations

GGML_TYPE_IDS = {"f16": 1, "q8_0": 8, "q4_0": 2}
