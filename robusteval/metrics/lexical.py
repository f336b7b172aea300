"""Lexical-overlap metrics: BLEU and chrF (sacrebleu), ROUGE-1/2/L (rouge-score), METEOR (nltk).

* BLEU: Papineni et al. 2002, sentence level with sacrebleu's effective order.
* chrF: Popović 2015 (sacrebleu ``CHRF``, character 6-grams, beta 2).
* ROUGE: Lin 2004; F-measure with Porter stemming, best over multiple references.
* METEOR: Banerjee & Lavie 2005, nltk's implementation on WordNet (``robusteval setup``
  builds the WordNet folder NLTK needs).

All already live on 0-100 (ROUGE and METEOR are multiplied by 100).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import MissingResourceError
from robusteval.metrics.base import PairMetric
from robusteval.metrics.registry import register_metric
from robusteval.types import Sample

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def sacrebleu_signature(metric: Any) -> str:
    """sacrebleu's signature; before any scoring it cannot know the reference count, so the
    count is left out then rather than failing."""
    try:
        return str(metric.get_signature())
    except (RuntimeError, ValueError):
        return f"{type(metric).__name__}(refs unknown before scoring)"


def word_tokens(text: str) -> list[str]:
    """Lower-cased word and punctuation tokens (METEOR's input)."""
    return _WORD.findall(text.lower())


@register_metric("bleu", family="lexical", source="Papineni et al. 2002", reference=True)
class BLEU(PairMetric):
    """Sentence-level BLEU (sacrebleu, effective order, exp smoothing), 0-100."""

    name: ClassVar[str] = "bleu"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        import sacrebleu

        self._bleu = sacrebleu.BLEU(effective_order=True)
        self._version = sacrebleu.__version__

    def _score(self, samples: list[Sample]) -> np.ndarray:
        return np.array([self._bleu.sentence_score(s.response, list(self.targets(s))).score
                         for s in samples])

    def signature(self) -> str:
        return f"{super().signature()}|{sacrebleu_signature(self._bleu)}|sacrebleu={self._version}"


@register_metric("chrf", family="lexical", source="Popović 2015", reference=True)
class ChrF(PairMetric):
    """Sentence-level chrF (sacrebleu), 0-100."""

    name: ClassVar[str] = "chrf"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        import sacrebleu

        self._chrf = sacrebleu.CHRF()

    def _score(self, samples: list[Sample]) -> np.ndarray:
        return np.array([self._chrf.sentence_score(s.response, list(self.targets(s))).score
                         for s in samples])

    def signature(self) -> str:
        return f"{super().signature()}|{sacrebleu_signature(self._chrf)}"


class _Rouge(PairMetric):
    rouge_type: ClassVar[str] = "rougeL"

    def __init__(self, use_stemmer: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from rouge_score import rouge_scorer

        self.use_stemmer = use_stemmer
        self._scorer = rouge_scorer.RougeScorer([self.rouge_type], use_stemmer=use_stemmer)

    def _score(self, samples: list[Sample]) -> np.ndarray:
        out = []
        for s in samples:
            best = self._scorer.score_multi(list(self.targets(s)), s.response)
            out.append(100.0 * best[self.rouge_type].fmeasure)
        return np.array(out)

    def signature(self) -> str:
        return f"{super().signature()}|rouge-score=0.1.2|{self.rouge_type}-F|stem={self.use_stemmer}"


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
    """ROUGE-L (sentence-level LCS) F-measure, best over references, 0-100."""

    name: ClassVar[str] = "rougeL"
    rouge_type: ClassVar[str] = "rougeL"


@register_metric("meteor", family="lexical", source="Banerjee & Lavie 2005", reference=True)
class Meteor(PairMetric):
    """METEOR (nltk, WordNet synonyms), best over references, 0-100."""

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

        return f"{super().signature()}|nltk={nltk.__version__}|wordnet={self._wordnet.get_version()}"
