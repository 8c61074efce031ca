"""sentence-transformers' all-MiniLM-L6-v2 computed in numpy, as the reference a converted GGUF is checked against
(torch is too heavy to install for one test): BERT's WordPiece tokenizer (lower case, accents stripped, split on
whitespace and punctuation, greedy longest match with "##" continuations), the encoder with exact GELU, mean
pooling over the tokens, unit length. Independent of llama.cpp and of the converter."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import numpy as np

from fara_desktop.models.embedder_convert import read_safetensors


class ReferenceBert:
    """A sentence-transformers BERT folder, run in numpy."""

    def __init__(self, folder: Path, max_tokens: int = 256) -> None:
        self.config = json.loads((folder / "config.json").read_text())
        self.vocab: dict[str, int] = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
        tensors = read_safetensors(folder / "model.safetensors")
        self.weights = {name.removeprefix("bert."): array for name, array in tensors}
        self.max_tokens = max_tokens

    # ------------------------------------------------------------------ tokenizer

    def _words(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        words: list[str] = []
        for chunk in text.split():
            current = ""
            for char in chunk:
                if unicodedata.category(char).startswith("P") or (33 <= ord(char) <= 47) or (58 <= ord(char) <= 64):
                    if current:
                        words.append(current)
                    words.append(char)
                    current = ""
                else:
                    current += char
            if current:
                words.append(current)
        return words

    def tokenize(self, text: str) -> list[int]:
        ids = [self.vocab["[CLS]"]]
        for word in self._words(text):
            start, pieces = 0, []
            while start < len(word):
                end = len(word)
                while end > start:
                    piece = word[start:end] if start == 0 else "##" + word[start:end]
                    if piece in self.vocab:
                        pieces.append(self.vocab[piece])
                        break
                    end -= 1
                if end == start:
                    pieces = [self.vocab["[UNK]"]]
                    break
                start = end
            ids.extend(pieces)
        return [*ids[: self.max_tokens - 1], self.vocab["[SEP]"]]

    # ------------------------------------------------------------------ encoder

    def _norm(self, x: np.ndarray, prefix: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        eps = self.config["layer_norm_eps"]
        return (x - mean) / np.sqrt(var + eps) * self.weights[f"{prefix}.weight"] + self.weights[f"{prefix}.bias"]

    def _linear(self, x: np.ndarray, prefix: str) -> np.ndarray:
        return x @ self.weights[f"{prefix}.weight"].T + self.weights[f"{prefix}.bias"]

    def embed(self, text: str) -> np.ndarray:
        from math import erf, sqrt

        gelu = np.vectorize(lambda v: 0.5 * v * (1.0 + erf(v / sqrt(2.0))))
        ids = self.tokenize(text)
        w = self.weights
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)]
        x = self._norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm").astype(np.float64)
        heads = self.config["num_attention_heads"]
        size = x.shape[1] // heads
        for layer in range(self.config["num_hidden_layers"]):
            p = f"encoder.layer.{layer}"
            q, k, v = (self._linear(x, f"{p}.attention.self.{n}").reshape(len(ids), heads, size).transpose(1, 0, 2)
                       for n in ("query", "key", "value"))  # fmt: skip
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(size)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            context = (scores / scores.sum(-1, keepdims=True)) @ v
            attended = self._linear(context.transpose(1, 0, 2).reshape(len(ids), -1), f"{p}.attention.output.dense")
            x = self._norm(x + attended, f"{p}.attention.output.LayerNorm")
            hidden = gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._norm(x + self._linear(hidden, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        pooled = x.mean(0)
        return (pooled / np.linalg.norm(pooled)).astype(np.float32)
