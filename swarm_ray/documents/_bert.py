"""A sentence-transformers BERT model run with numpy: the packaged MiniLM without torch.

The chunk embedder (`_index`) runs all-MiniLM-L6-v2: a 6-layer BERT, mean pooling,
normalised. Through sentence-transformers that means importing torch, about 7 s of CPU
before the first vector, paid once per process; a tenant's chunks are embedded in a
limited child process of its own (`_rlimits`), so it was paid once per document. The
same forward pass in numpy reads the same `model.safetensors` and `tokenizer.json` in
0.2 s and gives the same vectors (within 3e-7 here; `tests/test_documents_index.py`
compares them with sentence-transformers').

`BertEncoder.open` reads any sentence-transformers folder of that shape (a `BertModel`
with absolute positions, mean pooling, then `Normalize` or not); `None` for any other,
which `load_embedding_model` then loads with sentence-transformers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["BertEncoder"]

_Array = npt.NDArray[np.float32]


def _erf(x: _Array) -> _Array:
    """The error function to 1.5e-7 (Abramowitz and Stegun 7.1.26), for BERT's GELU."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                + t * 1.061405429))))  # fmt: skip
    out: _Array = (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)
    return out


def _norm(x: _Array, gain: _Array, bias: _Array, eps: float) -> _Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    out: _Array = ((x - mean) / np.sqrt(var + eps) * gain + bias).astype(np.float32)
    return out


class BertEncoder:
    """`encode(texts)` as sentence-transformers' for a BERT mean-pooling model."""

    def __init__(
        self,
        weights: dict[str, _Array],
        config: dict[str, Any],
        tokenizer: Any,
        max_length: int,
        normalize: bool,
    ) -> None:
        self._w = weights
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self._tokenizer = tokenizer
        self._normalize = normalize
        tokenizer.enable_truncation(max_length)
        tokenizer.enable_padding()

    @classmethod
    def open(cls, folder: str | Path) -> BertEncoder | None:
        """The model in `folder`, or None where it is not a BERT mean-pooling model."""
        folder = Path(folder)
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
            pooling = json.loads((folder / "1_Pooling" / "config.json").read_text("utf-8"))
            settings = json.loads((folder / "sentence_bert_config.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
        plain_bert = (
            config.get("model_type") == "bert"
            and config.get("hidden_act") == "gelu"
            and config.get("position_embedding_type", "absolute") == "absolute"
        )
        modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
        mean_only = modes == {"pooling_mode_mean_tokens"}
        if not plain_bert or not mean_only or kinds[:2] != ["Transformer", "Pooling"]:
            return None
        if any(k not in ("Transformer", "Pooling", "Normalize") for k in kinds):
            return None
        if not all((folder / f).is_file() for f in ("model.safetensors", "tokenizer.json")):
            return None
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        weights = {
            name.removeprefix("bert."): value.astype(np.float32)
            for name, value in load_file(str(folder / "model.safetensors")).items()
        }
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        max_length = int(settings.get("max_seq_length") or 512)
        return cls(weights, config, tokenizer, max_length, "Normalize" in kinds)

    def encode(
        self, texts: list[str], batch_size: int = 32, normalize_embeddings: bool = False
    ) -> _Array:
        """One vector per text (normalised if the model or the caller says so)."""
        out = [self._batch(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
        vectors = np.concatenate(out) if out else np.zeros((0, 0), np.float32)
        if self._normalize or normalize_embeddings:
            lengths = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.maximum(lengths, 1e-12)
        return vectors.astype(np.float32)

    def _batch(self, texts: list[str]) -> _Array:
        w = self._w
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded])
        types = np.array([e.type_ids for e in encoded])
        mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = _norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self._eps)
        heads = self._heads
        size = x.shape[-1] // heads
        masked = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for n in range(self._layers):
            at = f"encoder.layer.{n}."

            def dense(name: str, h: _Array, at: str = at) -> _Array:
                return h @ w[f"{at}{name}.weight"].T + w[f"{at}{name}.bias"]

            def split(h: _Array) -> _Array:
                return h.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

            q, k, v = (split(dense(f"attention.self.{p}", x)) for p in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + masked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, heads * size)
            x = _norm(
                dense("attention.output.dense", attended) + x,
                w[f"{at}attention.output.LayerNorm.weight"],
                w[f"{at}attention.output.LayerNorm.bias"],
                self._eps,
            )
            inner = dense("intermediate.dense", x)
            inner = inner * 0.5 * (1.0 + _erf(inner / np.float32(np.sqrt(2.0))))
            x = _norm(
                dense("output.dense", inner) + x,
                w[f"{at}output.LayerNorm.weight"],
                w[f"{at}output.LayerNorm.bias"],
                self._eps,
            )
        summed = (x * mask[..., None]).sum(1)
        pooled: _Array = (summed / np.maximum(mask.sum(1, keepdims=True), 1e-9)).astype(np.float32)
        return pooled
