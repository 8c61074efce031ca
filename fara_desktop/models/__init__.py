"""Model files: GGUF metadata, where models are found, the embedded default."""
