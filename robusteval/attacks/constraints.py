"""TextFooler's two candidate constraints (Jin et al. 2020, AAAI, §2.2 "Word Transformer"),
applied to word-substitution candidates before the victim scores them (they cost no
victim queries):

* :class:`SamePOS` -- the substitute must have the part of speech the replaced word had in
  its sentence (spaCy's coarse tags; a noun / verb swap is allowed, as TextAttack's
  TextFooler recipe does).
* :class:`SentenceSimilarity` -- the text around the swap (a window of 15 words) must stay
  close in meaning: the angular similarity 1 - arccos(cos) / pi of mean-pooled
  **all-MiniLM-L6-v2** embeddings >= ``min_sim``. TextFooler uses the Universal Sentence
  Encoder, which is not installable here; MiniLM stands in for it. The default, 0.840845057,
  is TextAttack's recipe value for USE on the same angular scale (cosine >= cos(0.5) = 0.878);
  it was not re-calibrated for MiniLM.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from robusteval.nlp import load_spacy

WINDOW = 15
USE_THRESHOLD = 0.840845057
NOUN_VERB = {"NOUN", "VERB"}


def _pos_at(words: Sequence[str], index: int) -> str:
    """spaCy's coarse POS of ``words[index]`` in the sentence the words make."""
    doc = load_spacy()(" ".join(words))
    start = sum(len(w) + 1 for w in words[:index])
    for tok in doc:
        if tok.idx <= start < tok.idx + max(len(tok.text), 1):
            return str(tok.pos_)
    return ""


class SamePOS:
    """Keep a candidate when the swapped word keeps its part of speech (noun <-> verb allowed)."""

    name = "same-pos"

    def __call__(self, original: Sequence[str], candidates: Sequence[Sequence[str]], index: int) -> list[bool]:
        before = _pos_at(original, index)
        keep = []
        for words in candidates:
            after = _pos_at(words, index)
            keep.append(after == before or {after, before} <= NOUN_VERB)
        return keep


@functools.lru_cache(maxsize=1)
def _minilm() -> tuple[Any, Any]:
    from transformers import AutoModel, AutoTokenizer

    from robusteval.paths import minilm_dir

    path = minilm_dir()
    return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()


def embed(texts: Sequence[str]) -> np.ndarray:
    """Unit-length mean-pooled all-MiniLM-L6-v2 sentence embeddings."""
    import torch

    tokenizer, model = _minilm()
    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    out = pooled.numpy().astype(np.float64)
    return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)


class SentenceSimilarity:
    """Keep a candidate when the ``window`` words around the swap embed within ``min_sim``
    (cosine) of the same window of the text before the swap."""

    name = "minilm-window-similarity"

    def __init__(self, min_sim: float = USE_THRESHOLD, window: int = WINDOW) -> None:
        if not 0.0 <= min_sim <= 1.0:
            raise ValueError(f"min_sim must be an angular similarity in [0, 1], got {min_sim}")
        self.min_sim, self.window = float(min_sim), int(window)

    def span(self, words: Sequence[str], index: int) -> str:
        half = self.window // 2
        lo = max(0, min(index - half, len(words) - self.window))
        return " ".join(words[lo: lo + self.window])

    def similarities(self, original: Sequence[str], candidates: Sequence[Sequence[str]], index: int) -> np.ndarray:
        if not candidates:
            return np.zeros(0)
        vecs = embed([self.span(original, index), *(self.span(c, index) for c in candidates)])
        return vecs[1:] @ vecs[0]

    def __call__(self, original: Sequence[str], candidates: Sequence[Sequence[str]], index: int) -> list[bool]:
        cos = np.clip(self.similarities(original, candidates, index), -1.0, 1.0)
        angular = 1.0 - np.arccos(cos) / np.pi  # TextAttack's "angular" metric
        return [bool(a >= self.min_sim) for a in angular]
