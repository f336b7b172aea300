"""Lexical-overlap metrics: BLEU and chrF (sacrebleu), ROUGE-1/2/L (rouge-score), METEOR (nltk).

* BLEU: Papineni et al. 2002, sentence level with sacrebleu's effective order; by default the
  sacrebleu tokenizer is picked per sample by script (``13a``; ``zh`` for Chinese; ``char``
  for Japanese kana, Thai, Lao, Khmer, Myanmar...), since ``13a`` never splits them.
* chrF: Popović 2015 (sacrebleu ``CHRF``, character 6-grams, beta 2).
* ROUGE: Lin 2004; F-measure with Porter stemming, best over multiple references, tokenized
  by :class:`~robusteval.metrics.tokenize.UnicodeTokenizer` (rouge-score's own tokenizer
  drops every non-ASCII character); ROUGE-L caps each text at ``max_tokens`` tokens.
* METEOR: Banerjee & Lavie 2005, nltk's implementation on WordNet (``robusteval setup``
  builds the WordNet folder NLTK needs), on Unicode-aware word tokens.

All already live on 0-100 (ROUGE and METEOR are multiplied by 100).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import MissingResourceError
from robusteval.metrics.base import PairMetric
from robusteval.metrics.registry import register_metric
from robusteval.metrics.tokenize import WORD_TOKENS_VERSION, UnicodeTokenizer, unsegmented, word_tokens
from robusteval.types import Sample

__all__ = ["BLEU", "ChrF", "Meteor", "Rouge1", "Rouge2", "RougeL", "lcs_length", "sacrebleu_signature",
           "word_tokens"]

#: ROUGE-L's default cap on each text's tokens (see :class:`RougeL`).
ROUGE_L_MAX_TOKENS = 10_000
ROUGE_TOKENIZERS = ("unicode", "rouge-score")


def sacrebleu_signature(metric: Any) -> str:
    """sacrebleu's signature; before any scoring it cannot know the reference count, so the
    count is left out then rather than failing."""
    try:
        return str(metric.get_signature())
    except (RuntimeError, ValueError):
        return f"{type(metric).__name__}(refs unknown before scoring)"


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences.

    Why not rouge-score's table: it is pure Python O(n*m) (two 4,000-token texts take about
    5 s, 20,000 tokens minutes and gigabytes). This is the bit-parallel recurrence of Hyyrö
    (2004, after Allison & Dix 1986), exact, with one big-integer step per token of the
    shorter text: two 20,000-token texts take well under 0.1 s. Equality with rouge-score's
    table is tested on random sequences.
    """
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    wanted = set(b)
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):  # bit i of masks[t] is set where a[i] == t
        if tok in wanted:
            masks[tok] = masks.get(tok, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full  # the zero bits of v mark where the DP row steps up; their count is the LCS so far
    for tok in b:
        m = masks.get(tok)
        if m is not None:
            u = v & m
            v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


#: what ``tokenize="auto"`` picks, by the scripts of the sample's texts
_AUTO_TOKENIZERS = ("13a", "zh", "char")


@register_metric("bleu", family="lexical", source="Papineni et al. 2002", reference=True)
class BLEU(PairMetric):
    """Sentence-level BLEU (sacrebleu, effective order, exp smoothing), 0-100.

    ``tokenize`` is a sacrebleu tokenizer name, or ``"auto"`` (default): per sample, from the
    scripts in the response and its targets, ``13a`` (sacrebleu's default, unchanged for
    every spaced script), ``zh`` when Han characters are the only unsegmented letters
    (sacrebleu's choice for Chinese), ``char`` when kana, Thai, Lao, Khmer, Myanmar or another
    script written without spaces appears (``13a`` would make a whole unspaced clause one
    token, so partial overlap scored 0). The choices are counted in ``report()["tokenize"]``.
    """

    name: ClassVar[str] = "bleu"

    def __init__(self, tokenize: str = "auto", max_ngram_order: int = 4, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        import sacrebleu

        if int(max_ngram_order) not in (1, 2, 3, 4):
            raise ValueError(f"max_ngram_order must be 1-4 (BLEU-1 ... BLEU-4), got {max_ngram_order!r}")
        from sacrebleu.metrics.bleu import _TOKENIZERS  # sacrebleu's table of tokenizer names

        if tokenize != "auto" and tokenize not in _TOKENIZERS:
            raise ValueError(f"tokenize must be 'auto' or one of sacrebleu's {', '.join(_TOKENIZERS)}; "
                             f"got {tokenize!r}")
        self.tokenize = tokenize
        self.max_ngram_order = int(max_ngram_order)
        names = _AUTO_TOKENIZERS if tokenize == "auto" else (tokenize,)
        self._bleus = {n: sacrebleu.BLEU(effective_order=True, tokenize=n, max_ngram_order=self.max_ngram_order)
                       for n in names}
        self._version = sacrebleu.__version__
        self._chosen: Counter[str] = Counter()

    def _pick(self, texts: Sequence[str]) -> str:
        if self.tokenize != "auto":
            return self.tokenize
        han = other = False
        for t in texts:
            h, o = unsegmented(t)
            han, other = han or h, other or o
        return "char" if other else "zh" if han else "13a"

    def _score(self, samples: list[Sample]) -> np.ndarray:
        out = []
        for s in samples:
            refs = list(self.targets(s))
            tok = self._pick([s.response, *refs])
            if self.tokenize == "auto":
                self._chosen[tok] += 1
            out.append(self._bleus[tok].sentence_score(s.response, refs).score)
        return np.array(out)

    def signature(self) -> str:
        sigs = [sacrebleu_signature(b) for b in self._bleus.values()]
        sig = next((x for x in sigs if "refs unknown" not in x), sigs[0])  # one that has scored
        if self.tokenize == "auto":
            sig = re.sub(r"tok:[^|]+", "tok:auto(13a/zh:Han/char:other-unspaced-scripts)", sig)
        # sacrebleu's own BLEU signature leaves the n-gram order out
        return (f"{super().signature()}|tokenize={self.tokenize}|max_ngram_order={self.max_ngram_order}|{sig}"
                f"|sacrebleu={self._version}")

    def report(self) -> dict[str, Any]:
        """The base counters plus, with ``tokenize="auto"``, how many samples each tokenizer scored."""
        out = super().report()
        if self.tokenize == "auto":
            out["tokenize"] = dict(self._chosen)
        return out


@register_metric("chrf", family="lexical", source="Popović 2015", reference=True)
class ChrF(PairMetric):
    """Sentence-level chrF (sacrebleu), 0-100; ``word_order=2`` is chrF++ (Popović 2017)."""

    name: ClassVar[str] = "chrf"

    def __init__(self, word_order: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        import sacrebleu

        if int(word_order) not in (0, 1, 2):
            raise ValueError(f"word_order must be 0 (chrF), 1 or 2 (chrF++), got {word_order!r}")
        self.word_order = int(word_order)
        self._chrf = sacrebleu.CHRF(word_order=self.word_order)

    def _score(self, samples: list[Sample]) -> np.ndarray:
        return np.array([self._chrf.sentence_score(s.response, list(self.targets(s))).score
                         for s in samples])

    def signature(self) -> str:
        return f"{super().signature()}|{sacrebleu_signature(self._chrf)}"


class _Rouge(PairMetric):
    """rouge-score with a tokenizer that works in every script.

    ``tokenizer="unicode"`` (default): :class:`~robusteval.metrics.tokenize.UnicodeTokenizer`
    through rouge-score's tokenizer hook; identical to rouge-score's own tokens on ASCII text.
    ``tokenizer="rouge-score"``: rouge-score's default (ASCII only: any other character is
    dropped), to reproduce numbers computed with it.
    """

    rouge_type: ClassVar[str] = "rougeL"

    def __init__(self, use_stemmer: bool = True, tokenizer: str = "unicode", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from rouge_score import rouge_scorer, tokenizers

        if tokenizer not in ROUGE_TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {ROUGE_TOKENIZERS}, got {tokenizer!r}")
        self.use_stemmer = use_stemmer
        self.tokenizer_name = tokenizer
        self.tokenizer: Any = (UnicodeTokenizer(stem=use_stemmer) if tokenizer == "unicode"
                               else tokenizers.DefaultTokenizer(use_stemmer=use_stemmer))
        self._scorer = rouge_scorer.RougeScorer([self.rouge_type], tokenizer=self.tokenizer)

    def _score(self, samples: list[Sample]) -> np.ndarray:
        out = []
        for s in samples:
            best = self._scorer.score_multi(list(self.targets(s)), s.response)
            out.append(100.0 * best[self.rouge_type].fmeasure)
        return np.array(out)

    def _tokenizer_signature(self) -> str:
        if isinstance(self.tokenizer, UnicodeTokenizer):
            return self.tokenizer.signature()
        return f"tok=rouge-score-default(ascii-only,stem={'porter' if self.use_stemmer else 'none'})"

    def signature(self) -> str:
        return (f"{super().signature()}|rouge-score=0.1.2|{self.rouge_type}-F|stem={self.use_stemmer}"
                f"|{self._tokenizer_signature()}")


@register_metric("rouge1", family="lexical", source="Lin 2004", reference=True)
class Rouge1(_Rouge):
    """ROUGE-1 F-measure, best over references, 0-100."""

    name: ClassVar[str] = "rouge1"
    rouge_type: ClassVar[str] = "rouge1"


@register_metric("rouge2", family="lexical", source="Lin 2004", reference=True)
class Rouge2(_Rouge):
    """ROUGE-2 F-measure, best over references, 0-100."""

    name: ClassVar[str] = "rouge2"
    rouge_type: ClassVar[str] = "rouge2"


@register_metric("rougeL", family="lexical", source="Lin 2004", reference=True)
class RougeL(_Rouge):
    """ROUGE-L (sentence-level LCS) F-measure, best over references, 0-100.

    The value is rouge-score's (``_score_lcs``: P = LCS/|response|, R = LCS/|reference|, F1;
    the best reference kept), with the LCS computed by :func:`lcs_length`. Each text's
    tokens are cut to the first ``max_tokens`` (default :data:`ROUGE_L_MAX_TOKENS` = 10,000,
    far above any summary or reference, and bounding one pair at about 20 ms; ``None``
    disables the cap) before P and R are computed. Every text looked at is counted in
    ``report()["truncation"]["texts"]`` (a response once per sample, each target once),
    the cut ones in ``report()["fallbacks"]["truncated_to_max_tokens"]``.
    """

    name: ClassVar[str] = "rougeL"
    rouge_type: ClassVar[str] = "rougeL"

    def __init__(self, max_tokens: int | None = ROUGE_L_MAX_TOKENS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 1):
            raise ValueError(f"max_tokens must be a positive integer or None, got {max_tokens!r}")
        self.max_tokens = max_tokens
        self.texts_seen = 0

    def _tokens(self, text: str) -> list[str]:
        tokens = self.tokenizer.tokenize(text)
        self.texts_seen += 1
        if self.max_tokens is not None and len(tokens) > self.max_tokens:
            self.fallbacks["truncated_to_max_tokens"] += 1
            tokens = tokens[:self.max_tokens]
        return tokens

    def _score(self, samples: list[Sample]) -> np.ndarray:
        from rouge_score import scoring

        out = []
        for s in samples:
            pred = self._tokens(s.response)
            best = 0.0
            for target in self.targets(s):
                ref = self._tokens(target)
                lcs = lcs_length(ref, pred) if ref and pred else 0
                f = scoring.fmeasure(lcs / len(pred), lcs / len(ref)) if lcs else 0.0
                best = max(best, f)
            out.append(100.0 * best)
        return np.array(out)

    def signature(self) -> str:
        return f"{super().signature()}|max_tokens={self.max_tokens}|lcs=bit-parallel"

    def report(self) -> dict[str, Any]:
        """The base counters plus ``truncation``: the cap and how many texts were tokenized."""
        return {**super().report(), "truncation": {"max_tokens": self.max_tokens, "texts": self.texts_seen}}


@register_metric("meteor", family="lexical", source="Banerjee & Lavie 2005", reference=True)
class Meteor(PairMetric):
    """METEOR (nltk, WordNet synonyms), best over references, 0-100.

    Input tokens come from :func:`~robusteval.metrics.tokenize.word_tokens` (words in any
    script, one token per character of unspaced scripts, punctuation kept), which equals the
    usual ``\\w+|[^\\w\\s]`` on ASCII text. nltk's Porter stemmer and WordNet synonyms are
    English resources: other languages are matched on exact word forms (Latin-script words
    still pass through the English stemmer, as before).
    """

    name: ClassVar[str] = "meteor"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from robusteval.paths import ensure_nltk_data_path

        ensure_nltk_data_path()
        from nltk.corpus import wordnet

        try:
            wordnet.ensure_loaded()
        except LookupError:
            raise MissingResourceError(
                "METEOR needs WordNet: run 'scripts/setup.sh' (or 'apt-get install wordnet-base "
                "wordnet-sense-index' and then 'robusteval setup'), or point NLTK_DATA at a folder "
                "with corpora/wordnet"
            ) from None
        from nltk.translate.meteor_score import meteor_score

        self._meteor = meteor_score
        self._wordnet = wordnet

    def _score(self, samples: list[Sample]) -> np.ndarray:
        return np.array([
            100.0 * self._meteor([word_tokens(r) for r in self.targets(s)], word_tokens(s.response),
                                 wordnet=self._wordnet)
            for s in samples
        ])

    def signature(self) -> str:
        import nltk

        return (f"{super().signature()}|nltk={nltk.__version__}|wordnet={self._wordnet.get_version()}"
                f"|tok={WORD_TOKENS_VERSION}")
