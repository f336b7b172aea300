"""``llm-pairwise``: an LLM judge that compares the response with a baseline (A vs B).

Absolute 0-100 ratings are what most attacks on LLM judges target; comparative assessment is
markedly more robust to universal adversarial phrases than absolute scoring (Raina et al.
2024, "Is LLM-as-a-Judge Robust? Investigating Universal Adversarial Attacks on Zero-shot LLM
Assessment"). The score is the probability that the response beats a baseline -- the sample's
reference by default, like AlpacaEval's win rate against a reference output, or any field
``against`` names (``context``, ``last_turn``, ``fact``), or a fixed ``baseline=`` text:
100 = the response wins, 0 = the baseline wins, 50 = a tie.

Pairwise judges have their own weak spots, which this module measures:

* **position bias** -- the verdict depends on which answer comes first (Zheng et al. 2023,
  "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", §3.3). ``order="both"`` (the
  default) asks in both orders and averages the two win probabilities, so a judge that always
  prefers position A scores every pair a tie; :func:`position_flips` reports how often the
  verdict changes when the answers swap;
* **template sensitivity** -- RobustJudge (2025) finds robustness varies by up to 40 % across
  prompt templates; :func:`rubric_flips` reports how often the verdict changes when the rubric
  is reworded (``pairwise`` vs ``pairwise-reworded``, ``resources/judge_templates.json``).

Both return the flip-rate record of :func:`robusteval.stats.flip_rate` (flips, n, rate, 95 %
interval). Modes: ``parse`` reads the verdict letter the judge writes (A, B or C for a tie;
``[[A]]`` as in MT-Bench is read too), ``prob`` weighs the next-token probabilities of A, B
and C. The backend, sampling, failure handling and isolation are the absolute judge's
(:class:`robusteval.metrics.llm_judge.JudgeBase`): with isolation both candidates and the
context go into nonce-delimited spans and the *last* verdict of the output counts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import InputError
from robusteval.llm.backends import LLMBackend, backend_identity
from robusteval.llm.isolation import Spans
from robusteval.metrics.base import PairMetric
from robusteval.metrics.llm_judge import (
    OBJECTS,
    SOURCES,
    TEMPLATES,
    JudgeBase,
    input_blocks,
    render_blocks,
    require_source,
)
from robusteval.metrics.registry import register_metric
from robusteval.stats import flip_rate
from robusteval.text import check_sample_text, invalid_unicode, is_blank
from robusteval.types import Sample

ORDERS = ("ab", "ba", "both")
LETTERS = ("A", "B", "C")  # C: a tie
FIRST_WINS = {"A": 1.0, "B": 0.0, "C": 0.5}  # P(the answer shown first wins) per verdict letter
PAIR_SPEAKERS = ("Speaker 1", "Speaker 2")  # A and B name the candidates here, not the speakers
_NAMES = r"(?:response|answer|summary|question|text|option|assistant|candidate|output)"
_BRACKET = re.compile(r"\[\[\s*((?-i:[ABC])|tie)\s*\]\]", re.IGNORECASE)
_LABELLED = re.compile(r"(?<![A-Za-z])(?:verdict|winner|choice|decision|better|preferred)\s*(?:is\s*)?"
                       rf"[:=\uff1a]?\s*[\[(*\"']*\s*(?:{_NAMES}\s+)?((?-i:[ABC]))(?![A-Za-z])", re.IGNORECASE)
# "Response A is better"; not "... if response A is better" (the rubric, echoed back by a small model)
_NAMED = re.compile(rf"(?<![A-Za-z])(?<!if ){_NAMES}\s+((?-i:[AB]))\s+is\s+(?:clearly\s+|much\s+|slightly\s+)?"
                    r"(?:the\s+)?(?:better|preferred|superior|stronger)", re.IGNORECASE)
_BARE = re.compile(r"^\W*((?-i:[ABC]))\s*(?:$|[.)\]:,;!\n])")


def parse_verdict(text: str, last: bool = False) -> str | None:
    """"A", "B" or "C" (tie) from a judge's output, or None.

    Verdicts are read from ``[[A]]``, "Verdict: B", "Response A is better", or an output that
    is the letter alone ("C", "A."). ``last`` (with isolation) takes the last verdict written,
    else the first: a judge that quotes a candidate's forged "[[A]]" before its own verdict is
    read at its verdict."""
    found: list[tuple[int, str]] = []
    for rx in (_BRACKET, _LABELLED, _NAMED):
        found += [(m.start(), m.group(1)) for m in rx.finditer(text)]
    if found:
        letter = sorted(found)[-1 if last else 0][1]
        return "C" if letter.lower() == "tie" else letter
    m = _BARE.match(text.strip())
    return m.group(1) if m else None


def verdict(p_win: float, margin: float = 0.0) -> str:
    """The response's verdict from its win probability: ``win``, ``loss``, or ``tie`` within
    ``margin`` of 0.5 (in ``prob`` mode a judge's p is rarely exactly 0.5: 0.52 vs 0.48 is a
    tie to a reader, and a margin keeps such noise from counting as a flip)."""
    return "tie" if abs(p_win - 0.5) <= margin else "win" if p_win > 0.5 else "loss"


def pair_inputs(sample: Sample, first: str, second: str, spans: Spans | None = None,
                max_source_chars: int = 4000) -> str:
    """What the candidates were written for, then candidate A (``first``) and B (``second``);
    with ``spans``, every untrusted text neutralized and each block in a span."""
    clean = spans.clean if spans else (lambda t: t)
    obj = OBJECTS.get(sample.task, "text").capitalize()
    by = f" (by {PAIR_SPEAKERS[0]})" if sample.task == "dialogue" else ""
    blocks = input_blocks(sample, max_source_chars, clean, speakers=PAIR_SPEAKERS)
    blocks += [(f"{obj} A{by}", clean(first)), (f"{obj} B{by}", clean(second))]
    return render_blocks(blocks, spans)


@register_metric("llm-pairwise", family="llm",
                 source="Zheng et al. 2023 (MT-Bench pairwise judge, position bias); Raina et al. 2024 "
                        "(comparative vs absolute assessment); RobustJudge 2025 (template sensitivity)")
class PairwiseJudge(JudgeBase, PairMetric):
    """The response (A) against a baseline (B) by an LLM; 0-100 = P(the response wins), ties 50.

    Options: ``baseline`` (a fixed text; default: the first text ``against`` names, the
    reference), ``against`` (as for reference-based metrics: ``reference``,
    ``first_reference``, ``context``, ``last_turn``, ``fact``), ``order`` (``ab``: the
    response shown first, ``ba``: second, ``both``: the mean of the two, default),
    ``template`` (a pairwise template), ``mode`` (``parse`` or ``prob``), ``on_unparseable``
    (``error``, ``prob`` or ``tie``; counted in ``report()["fallbacks"]``) and the absolute
    judge's ``backend``, ``backend_options``, ``n``, ``temperature``, ``seed``,
    ``max_new_tokens``, ``on_llm_error`` (``midpoint`` = a tie) and ``isolation``."""

    name: ClassVar[str] = "llm-pairwise"

    def __init__(self, backend: str | LLMBackend | None = None, template: str = "pairwise",
                 baseline: str | None = None, against: str = "reference", order: str = "both",
                 mode: str | None = None, n: int | None = None, temperature: float | None = None,
                 seed: int = 0, max_new_tokens: int | None = None, on_unparseable: str | None = None,
                 backend_options: dict[str, Any] | None = None, on_llm_error: str = "error",
                 isolation: bool = True, **kwargs: Any) -> None:
        if template not in TEMPLATES or TEMPLATES[template].get("kind") != "pairwise":
            pairwise = [k for k, v in TEMPLATES.items() if v.get("kind") == "pairwise"]
            raise ValueError(f"unknown pairwise template {template!r} (have: {', '.join(pairwise)})")
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        if baseline is not None and (is_blank(baseline) or invalid_unicode(baseline)):
            raise ValueError(f"baseline text is empty or not valid Unicode: {baseline!r}")
        self.template_name, self.template = template, TEMPLATES[template]
        self.mode = mode or self.template["modes"][0]
        if self.mode not in self.template["modes"]:
            raise ValueError(f"template {template!r} supports modes {self.template['modes']}, not {self.mode!r}")
        self.on_unparseable = on_unparseable or ("prob" if "prob" in self.template["modes"] else "tie")
        if self.on_unparseable not in ("error", "prob", "tie"):
            raise ValueError("on_unparseable must be error, prob or tie")
        self.order, self.baseline = order, baseline
        super().__init__(backend, defaults=self.template.get("defaults", {}), n=n, temperature=temperature,
                         seed=seed, max_new_tokens=max_new_tokens, backend_options=backend_options,
                         on_llm_error=on_llm_error, isolation=isolation, against=against, **kwargs)
        if baseline is not None:
            self.requires_reference = False  # type: ignore[misc]
        self._options = {"template": template, "baseline": baseline, "against": against, "order": order,
                         "mode": mode, "n": n, "temperature": temperature, "seed": seed,
                         "max_new_tokens": max_new_tokens, "on_unparseable": on_unparseable,
                         "on_llm_error": on_llm_error, "isolation": isolation, **kwargs}

    def variant(self, **changes: Any) -> PairwiseJudge:
        """The same judge (sharing its backend object) with some options changed."""
        return PairwiseJudge(backend=self.backend, **{**self._options, **changes})

    # -- inputs -------------------------------------------------------------------------
    def baseline_of(self, sample: Sample) -> str:
        return self.baseline if self.baseline is not None else self.targets(sample)[0]

    def check_sample(self, sample: Sample) -> None:
        if self.baseline is None:
            super().check_sample(sample)

    def prompt(self, sample: Sample, order: str = "ab") -> str:
        """The comparison prompt with the response first (``ab``) or second (``ba``)."""
        resp, base = sample.response, self.baseline_of(sample)
        first, second = (resp, base) if order == "ab" else (base, resp)
        fields = {"object": OBJECTS.get(sample.task, "text"), "source": SOURCES.get(sample.task, "input")}
        plain = self.template["text"].format(task_inputs=pair_inputs(sample, first, second), **fields)
        spans = self._spans(plain)
        if spans is None:
            return plain
        return spans.isolate(self.template["text"].format(task_inputs=pair_inputs(sample, first, second, spans),
                                                          **fields))

    def _checked(self, samples: Sequence[Sample]) -> list[Sample]:
        """The checks :meth:`score` runs, for callers of :meth:`win_probs` (a blank response is
        an error here: there is nothing to compare)."""
        out = list(samples)
        for s in out:
            check_sample_text(s)
            if is_blank(s.response):
                raise InputError(s.id, "response", f"{self.name} cannot compare an empty response")
            self.check_sample(s)
        require_source(out, self.name)
        return out

    # -- scoring ------------------------------------------------------------------------
    def win_probs(self, samples: Sequence[Sample], order: str | None = None,
                  failed_as: str = "midpoint") -> np.ndarray:
        """P(the response beats the baseline) per sample, in [0, 1], for ``order`` (default:
        the metric's own). A sample whose request failed under ``on_llm_error="midpoint"`` is
        0.5 as in :meth:`score`, or NaN with ``failed_as="nan"`` (the flip tests leave it out)."""
        return self._win(self._checked(samples), order or self.order, failed_as)

    def _score(self, samples: list[Sample]) -> np.ndarray:
        require_source(samples, self.name)
        return 100.0 * self._win(samples, self.order)

    def _win(self, samples: list[Sample], order: str, failed_as: str = "midpoint") -> np.ndarray:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        orders = ("ab", "ba") if order == "both" else (order,)
        probs = self._order_probs(samples, orders, failed_as)
        return np.mean([probs[o] for o in orders], axis=0)

    def _order_probs(self, samples: list[Sample], orders: Sequence[str],
                     failed_as: str = "midpoint") -> dict[str, np.ndarray]:
        """P(the response wins) per sample for each order, all prompts in one backend call. A
        prompt whose request failed (``on_llm_error="midpoint"``) is 0.5, a tie, or NaN with
        ``failed_as="nan"``: a flip test must not count a missing verdict as a tie."""
        if failed_as not in ("midpoint", "nan"):
            raise ValueError(f"failed_as must be 'midpoint' or 'nan', got {failed_as!r}")
        prompts = [self.prompt(s, o) for o in orders for s in samples]
        ids = [s.id for _ in orders for s in samples]
        k = len(samples)

        def per_sample(mask: np.ndarray) -> int:
            """Samples with ``mask`` set for any of their orders: the fallback counters count
            samples (as the absolute judge's do), not prompts, so ``order="both"`` does not
            count one sample twice."""
            return int(mask.reshape(len(orders), k).any(axis=0).sum())

        if self.mode == "prob":
            first = self._prob_first(prompts, ids)
            failed = np.isnan(first)
        else:
            first, failed = self._parse_first(prompts, ids, per_sample)
        if failed.any() and self.on_llm_error == "midpoint":  # else the backend raised already
            self.fallbacks["llm_failed"] += per_sample(failed)
            self.failed_requests.extend(samples[i].id for i in
                                        np.flatnonzero(failed.reshape(len(orders), k).any(axis=0)))
            first[failed] = 0.5 if failed_as == "midpoint" else np.nan
        return {o: first[j * k:(j + 1) * k] if o == "ab" else 1.0 - first[j * k:(j + 1) * k]
                for j, o in enumerate(orders)}

    def _prob_first(self, prompts: Sequence[str], ids: Sequence[str]) -> np.ndarray:
        """P(the first answer wins) = P(A) + P(C) / 2 over the next-token probabilities."""
        p = self._next_token_probs(prompts, LETTERS, ids)
        return p @ np.array([FIRST_WINS[x] for x in LETTERS])

    def _usable(self, texts: Sequence[str]) -> bool:
        return any(parse_verdict(t, last=self.isolation) is not None for t in texts)

    def _parse_first(self, prompts: list[str], ids: list[str],
                     per_sample: Callable[[np.ndarray], int]) -> tuple[np.ndarray, np.ndarray]:
        """Mean P(the first answer wins) over the parsed verdicts of each prompt, and which
        prompts' requests failed. ``per_sample`` counts the samples a prompt mask touches
        (``unparseable`` counts samples; ``unparseable_outputs`` counts generated outputs)."""
        outs = self._generate(prompts, ids, self._usable)
        first = np.full(len(prompts), np.nan)
        failed = np.zeros(len(prompts), dtype=bool)
        for i, texts in enumerate(outs):
            if not texts and self.on_llm_error == "midpoint":
                failed[i] = True
                continue
            letters = [parse_verdict(t, last=self.isolation) for t in texts]
            good = [FIRST_WINS[x] for x in letters if x is not None]
            if len(letters) > len(good):
                self.fallbacks["unparseable_outputs"] += len(letters) - len(good)
            if good:
                first[i] = float(np.mean(good))
        unparsed = np.isnan(first) & ~failed
        missing = np.flatnonzero(unparsed)
        if len(missing):
            self.fallbacks["unparseable"] += per_sample(unparsed)
            if self.on_unparseable == "error":
                i = int(missing[0])
                raise InputError(ids[i], "response", f"{self.backend.name} gave no verdict: {outs[i]!r}")
            if self.on_unparseable == "prob":
                first[missing] = self._prob_first([prompts[i] for i in missing], [ids[i] for i in missing])
                failed[missing] = np.isnan(first[missing])
            else:
                first[missing] = 0.5
        return first, failed

    def signature(self) -> str:
        base = self.against
        if self.baseline is not None:
            base = "text:" + hashlib.sha256(self.baseline.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        return (f"backend={backend_identity(self.backend)}|template={self.template_name}|baseline={base}|"
                f"order={self.order}|"
                f"mode={self.mode}|n={self.n}|T={self.temperature}|seed={self.seed}|fallback={self.on_unparseable}"
                + (f"|llm_error={self.on_llm_error}" if self.on_llm_error != "error" else "")
                + self._prompt_signature())


# -- invariance tests ------------------------------------------------------------------------
def _flips(a: np.ndarray, b: np.ndarray, samples: Sequence[Sample], margin: float,
           clusters: Sequence[Hashable] | None) -> dict[str, Any]:
    """The flip record over the samples with a verdict on both sides: one whose request failed
    (NaN, ``on_llm_error="midpoint"``) on either side is left out of n and counted in
    ``no_verdict``, not read as a tie that did not flip."""
    keep = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if np.isfinite(x) and np.isfinite(y)]
    flipped = [verdict(float(a[i]), margin) != verdict(float(b[i]), margin) for i in keep]
    listed = None if clusters is None else list(clusters)
    kept_clusters = None if listed is None else [listed[i] for i in keep]
    return {**flip_rate(flipped, kept_clusters), "margin": margin, "no_verdict": len(samples) - len(keep),
            "flipped": [samples[i].id for i, f in zip(keep, flipped, strict=True) if f]}


def position_flips(metric: PairwiseJudge, samples: Sequence[Sample], margin: float = 0.0,
                   clusters: Sequence[Hashable] | None = None) -> dict[str, Any]:
    """How often the verdict (response wins / baseline wins / tie, see :func:`verdict`)
    changes when the two answers swap positions (Zheng et al. 2023's position-consistency
    test): the flip-rate record of :func:`robusteval.stats.flip_rate` plus the ``margin`` and
    the ids of the ``flipped`` samples."""
    samples = list(samples)
    probs = metric._order_probs(metric._checked(samples), ("ab", "ba"), "nan")
    return _flips(probs["ab"], probs["ba"], samples, margin, clusters)


def rubric_flips(metric: PairwiseJudge, samples: Sequence[Sample], alt_template: str = "pairwise-reworded",
                 margin: float = 0.0, clusters: Sequence[Hashable] | None = None) -> dict[str, Any]:
    """How often the verdict changes when the rubric is reworded (``alt_template``, the same
    judge otherwise; RobustJudge 2025's template sensitivity): the flip-rate record plus the
    ``margin`` and the ids of the ``flipped`` samples."""
    samples = list(samples)
    other = metric.variant(template=alt_template)
    return _flips(metric.win_probs(samples, failed_as="nan"), other.win_probs(samples, failed_as="nan"),
                  samples, margin, clusters)
