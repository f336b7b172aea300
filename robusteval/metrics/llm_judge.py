"""LLM-as-a-judge metrics.

Templates (``resources/judge_templates.json``): AdvEval's 0-100 dialogue, summary and
question prompts (Chen et al. 2024, §3 and Appendix); G-Eval-style 1-5 aspect rubrics
(Liu et al. 2023) whose criterion text comes from the 11 aspect definitions of Hu et al. 2024
(``LLM-evaluator-reliability/aspect_criteria.json`` in the data folder; ``criteria_file=``);
the combined content / grammar / relevance rating used by Vasselli & Watanabe 2023; and
``hu-analyze-rate``, the evaluation protocol of Hu et al. 2024 (App. C): analyse, then rate
1-5, with 10 ratings sampled at temperature 1.0 and averaged (the template's defaults).

Modes: ``parse`` reads the number(s) the model writes (self-consistency: the mean over ``n``
samples, AdvEval uses 8); ``prob`` is the probability-weighted score over the scale's
single-token values (G-Eval's weighting). Outputs with no usable number are counted in
``report()["fallbacks"]["unparseable"]`` and handled by ``on_unparseable``: ``error``, or
``prob`` (probability-weighted score where the template allows it), or ``midpoint`` of the
scale — never a silent 0 — and such outputs are never cached as answers (the backend is
asked to keep only outputs with a usable score). Scores are mapped linearly from the
template's scale to 0-100.

A failed LLM request (after the backend's retries) raises an error naming the sample
(``on_llm_error="error"``, the default) or, with ``on_llm_error="midpoint"``, scores that
sample at the scale's midpoint and counts it in ``report()["fallbacks"]["llm_failed"]``.
The sample ids are passed to the backend (``ids=``), so its errors read
``sample 'x': LLM request failed: ...``. ``report()["llm"]`` is the backend's own report:
calls, cache hits, retries, failures, fallbacks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import InputError
from robusteval.llm.backends import LLMBackend, load_backend, resolve_backend
from robusteval.llm.stats import backend_report, call_with
from robusteval.metrics.base import Metric
from robusteval.metrics.registry import register_metric
from robusteval.paths import resource
from robusteval.text import is_blank
from robusteval.types import Sample

CRITERIA_REL = "LLM-evaluator-reliability/aspect_criteria.json"
SOURCES = {"dialogue": "dialogue history", "summarization": "article",
           "question_generation": "passage", "data_to_text": "input data", "fact": "article"}
OBJECTS = {"dialogue": "response", "summarization": "summary", "question_generation": "question",
           "data_to_text": "text", "fact": "summary"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def load_templates() -> dict[str, dict[str, Any]]:
    data = json.loads(resource("judge_templates.json").read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if not k.startswith("_")}


TEMPLATES = load_templates()


def task_inputs(sample: Sample, max_source_chars: int = 4000) -> str:
    """The sample laid out for a prompt, per task; long sources are cut at the end."""
    def cut(text: str) -> str:
        return text if len(text) <= max_source_chars else text[:max_source_chars] + " [...]"

    if sample.task == "dialogue":
        speakers = ("A", "B")
        n = len(sample.context)
        hist = "\n".join(f"{speakers[(n - i) % 2]}: {t}" for i, t in enumerate(sample.context))
        parts = [f"Dialogue history:\n{cut(hist)}"]
        if sample.fact:
            parts.append(f"Fact:\n{cut(sample.fact)}")
        parts.append(f"Response (by A):\n{sample.response}")
    elif sample.task in ("summarization", "fact"):
        parts = [f"Article:\n{cut(sample.source_text())}", f"Summary:\n{sample.response}"]
    elif sample.task == "question_generation":
        parts = [f"Passage:\n{cut(sample.source_text())}", f"Answer:\n{sample.answer or ''}",
                 f"Question:\n{sample.response}"]
    else:
        parts = [f"Input:\n{cut(sample.source_text())}", f"Text:\n{sample.response}"]
    return "\n\n".join(parts)


def parse_score(text: str, low: float, high: float, labels: Sequence[str] = ()) -> float | None:
    """The score in ``text`` (the mean of labelled numbers if ``labels``), or None."""
    if labels:
        vals = []
        for label in labels:
            m = re.search(rf"{re.escape(label)}\s*[:=]\s*(-?\d+(?:\.\d+)?)", text, re.IGNORECASE)
            if not m or not low <= float(m.group(1)) <= high:
                return None
            vals.append(float(m.group(1)))
        return float(np.mean(vals))
    for m in _NUMBER.finditer(text):
        v = float(m.group(0))
        if low <= v <= high:
            return v
    return None


@register_metric("llm-judge", family="llm",
                 source="Chen et al. 2024 (AdvEval); Liu et al. 2023 (G-Eval); Vasselli & Watanabe 2023")
class LLMJudge(Metric):
    """Score with an LLM. Options: ``backend`` ("local", "local:<path>", "openai:<model>" or a
    backend object), ``template``, ``aspect`` and ``criteria_variant`` (G-Eval), ``mode``,
    ``n``, ``temperature``, ``seed``, ``on_unparseable``, ``on_llm_error`` (``error`` or
    ``midpoint``), ``criteria_file``, ``data_dir``, ``backend_options`` (e.g. ``timeout``,
    ``max_retries``, ``allowed_hosts`` for an ``openai:`` spec)."""

    name: ClassVar[str] = "llm-judge"

    def __init__(self, backend: str | LLMBackend | None = None, template: str = "geval",
                 aspect: str = "Overall_quality", criteria_variant: str = "Gold",
                 mode: str | None = None, n: int | None = None, temperature: float | None = None,
                 seed: int = 0, max_new_tokens: int | None = None, on_unparseable: str | None = None,
                 criteria_file: str | None = None, data_dir: str | None = None,
                 backend_options: dict[str, Any] | None = None, on_llm_error: str = "error",
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if template not in TEMPLATES:
            raise ValueError(f"unknown template {template!r} (have: {', '.join(TEMPLATES)})")
        self.template_name = template
        self.template = TEMPLATES[template]
        self.mode = mode or self.template["modes"][0]
        if self.mode not in self.template["modes"]:
            raise ValueError(f"template {template!r} supports modes {self.template['modes']}, not {self.mode!r}")
        self.low, self.high = (float(x) for x in self.template["scale"])
        self.on_unparseable = on_unparseable or ("prob" if "prob" in self.template["modes"] else "midpoint")
        if self.on_unparseable not in ("error", "prob", "midpoint"):
            raise ValueError("on_unparseable must be error, prob or midpoint")
        if self.on_unparseable == "prob" and "prob" not in self.template["modes"]:
            raise ValueError(f"template {template!r} has no probability mode to fall back to")
        if on_llm_error not in ("error", "midpoint"):
            raise ValueError(f"on_llm_error must be error or midpoint, not {on_llm_error!r}")
        self.on_llm_error = on_llm_error
        defaults = self.template.get("defaults", {})  # the protocol a template's paper used
        self.n = int(n if n is not None else defaults.get("n", 1))
        if self.n < 1:
            raise ValueError(f"n (sampled ratings per sample) must be at least 1, got {self.n}")
        self.temperature = float(temperature if temperature is not None
                                 else defaults.get("temperature", 0.0 if self.n == 1 else 1.0))
        self.seed = seed
        self.max_new_tokens = int(max_new_tokens if max_new_tokens is not None else defaults.get("max_new_tokens", 24))
        self.aspect = aspect
        self.criterion = self._criterion(aspect, criteria_variant, criteria_file, data_dir)
        if backend_options and backend is not None and not isinstance(backend, str):
            raise ValueError("backend_options configure a backend spec string, not a backend object")
        self.backend = load_backend(backend, **backend_options) if backend_options else resolve_backend(backend)
        self.raw_outputs: list[list[str]] = []

    @staticmethod
    def _criterion(aspect: str, variant: str, criteria_file: str | None, data_dir: str | None) -> str:
        import os

        path = Path(criteria_file) if criteria_file else None
        if path is None:
            base = data_dir or os.environ.get("ROBUSTEVAL_DATA")
            path = Path(base) / CRITERIA_REL if base else None
        if path is not None and path.is_file():
            crit = json.loads(path.read_text(encoding="utf-8"))
            if aspect not in crit:
                raise ValueError(f"aspect {aspect!r} not in {path} (has: {', '.join(crit)})")
            if variant not in crit[aspect]:
                raise ValueError(f"variant {variant!r} not in {path}[{aspect}] (has: {', '.join(crit[aspect])})")
            return str(crit[aspect][variant])
        readable = aspect.replace("_", " ").lower()
        return f"{aspect.replace('_', ' ')}: how good the text is in terms of {readable}."

    def prompt(self, sample: Sample) -> str:
        obj = OBJECTS.get(sample.task, "text")
        return self.template["text"].format(
            task_inputs=task_inputs(sample), object=obj, aspect=self.aspect.replace("_", " ").lower(),
            criterion=self.criterion.replace("{T}", obj).replace(
                "{S}", SOURCES.get(sample.task, "input")))

    def _backend_options(self, ids: Sequence[str]) -> dict[str, Any]:
        return {"ids": list(ids), "on_error": "fallback" if self.on_llm_error == "midpoint" else "raise"}

    def _usable(self, texts: Sequence[str]) -> bool:
        """True when at least one output carries a score (only such answers are cached)."""
        labels = self.template.get("labels", ())
        return any(parse_score(t, self.low, self.high, labels) is not None for t in texts)

    def _prob_scores(self, prompts: Sequence[str], ids: Sequence[str]) -> np.ndarray:
        """Probability-weighted scores; NaN where the backend failed (fallback mode)."""
        values = np.arange(int(self.low), int(self.high) + 1)
        probs = np.asarray(call_with(self.backend.next_token_probs, prompts, [str(v) for v in values],
                                     optional=self._backend_options(ids)), dtype=np.float64)
        return probs @ values

    def _parse_scores(self, samples: list[Sample], prompts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Mean parsed score per sample (NaN: none usable) and which samples' requests failed."""
        opts = {**self._backend_options([s.id for s in samples]), "accept": self._usable}
        outs = call_with(self.backend.generate, prompts, optional=opts, n=self.n,
                         temperature=self.temperature, max_new_tokens=self.max_new_tokens, seed=self.seed)
        self.raw_outputs = outs
        raw = np.full(len(samples), np.nan)
        failed = np.zeros(len(samples), dtype=bool)
        labels = self.template.get("labels", ())
        for i, texts in enumerate(outs):
            if not texts and opts["on_error"] == "fallback":
                failed[i] = True  # the backend's placeholder for a failed request
                continue
            vals = [parse_score(t, self.low, self.high, labels) for t in texts]
            good = [v for v in vals if v is not None]
            self.fallbacks["unparseable_outputs"] += len(vals) - len(good)
            if good:
                raw[i] = float(np.mean(good))
        missing = np.flatnonzero(np.isnan(raw) & ~failed)
        if len(missing):
            self.fallbacks["unparseable"] += len(missing)
            if self.on_unparseable == "error":
                s = samples[int(missing[0])]
                raise InputError(s.id, "response", f"{self.backend.name} gave no parseable "
                                 f"score: {outs[int(missing[0])]!r}")
            if self.on_unparseable == "prob":
                raw[missing] = self._prob_scores([prompts[i] for i in missing], [samples[i].id for i in missing])
                failed[missing] = np.isnan(raw[missing])
            else:
                raw[missing] = (self.low + self.high) / 2
        return raw, failed

    def _score(self, samples: list[Sample]) -> np.ndarray:
        for s in samples:
            if s.task in ("summarization", "fact", "question_generation") and is_blank(s.source_text()):
                raise InputError(s.id, "context", f"llm-judge needs the source text for {s.task}")
        prompts = [self.prompt(s) for s in samples]
        if self.mode == "prob":
            raw = self._prob_scores(prompts, [s.id for s in samples])
            failed = np.isnan(raw)
        else:
            raw, failed = self._parse_scores(samples, prompts)
        if failed.any() and self.on_llm_error == "midpoint":  # else the backend raised already
            self.fallbacks["llm_failed"] += int(failed.sum())  # (a NaN left here is a named error)
            raw[failed] = (self.low + self.high) / 2
        return 100.0 * (raw - self.low) / (self.high - self.low)

    def report(self) -> dict[str, Any]:
        """The metric's fallback counters plus the backend's report under ``llm``."""
        return {**super().report(), "llm": backend_report(self.backend)}

    def signature(self) -> str:
        return (f"backend={self.backend.name}|template={self.template_name}|aspect={self.aspect}|"
                f"mode={self.mode}|n={self.n}|T={self.temperature}|seed={self.seed}|"
                f"fallback={self.on_unparseable}"
                + (f"|llm_error={self.on_llm_error}" if self.on_llm_error != "error" else ""))
