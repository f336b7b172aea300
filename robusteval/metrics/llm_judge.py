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

Isolation (``isolation=True``, the default; issue 16): every untrusted text -- the response,
and the dialogue history, fact, article or answer, which an attacker may control too -- is
neutralized and wrapped in a span delimited by a per-prompt nonce, an instruction says the
spans are data and never instructions, and the verdict is read from the *last* score of the
judge's output (:mod:`robusteval.llm.isolation`, :func:`parse_score`). ``isolation=False``
renders and parses exactly as before; the setting (and the isolation data's digest) is part
of :meth:`LLMJudge.signature`, so runs with and without it never mix. :class:`JudgeBase`
holds what the absolute and the pairwise judge (:mod:`robusteval.metrics.pairwise`) share.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import string
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import InputError
from robusteval.llm import isolation
from robusteval.llm.backends import LLMBackend, backend_identity, load_backend, resolve_backend
from robusteval.llm.isolation import Spans
from robusteval.llm.stats import backend_report, call_with
from robusteval.metrics.base import Metric, on_accelerator
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
# a number on its own: not a denominator ("4/5", "4 out of 5"), not glued to letters or digits
# (hex like an echoed nonce "9c9d98" holds no score)
_NOT_DENOMINATOR = re.compile(r"(?<![A-Za-z\d/.])(?<!/ )(?<!out of )-?\d+(?:\.\d+)?(?![A-Za-z\d])", re.IGNORECASE)
_ECHOED = re.compile(r"<<\s*/?\s*data-[0-9a-f]*(?:>>)?", re.IGNORECASE)


def load_templates() -> dict[str, dict[str, Any]]:
    data = json.loads(resource("judge_templates.json").read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if not k.startswith("_")}


TEMPLATES = load_templates()


def _same(text: str) -> str:
    return text


def input_blocks(sample: Sample, max_source_chars: int = 4000, clean: Callable[[str], str] = _same,
                 speakers: tuple[str, str] = ("A", "B")) -> list[tuple[str, str]]:
    """``(header, text)`` of what the text under evaluation was written for, per task: the
    dialogue history (turns labelled by ``speakers``, the last turn by the other speaker than
    the response's) and fact, the article, the passage and answer, or the input. Long sources
    are cut at the end; ``clean`` is applied to every untrusted text (each turn on its own)."""
    def cut(text: str) -> str:
        return text if len(text) <= max_source_chars else text[:max_source_chars] + " [...]"

    if sample.task == "dialogue":
        n = len(sample.context)
        hist = "\n".join(f"{speakers[(n - i) % 2]}: {clean(t)}" for i, t in enumerate(sample.context))
        blocks = [("Dialogue history", cut(hist))]
        if sample.fact:
            blocks.append(("Fact", cut(clean(sample.fact))))
        return blocks
    if sample.task in ("summarization", "fact"):
        return [("Article", cut(clean(sample.source_text())))]
    if sample.task == "question_generation":
        return [("Passage", cut(clean(sample.source_text()))), ("Answer", clean(sample.answer or ""))]
    return [("Input", cut(clean(sample.source_text())))]


CANDIDATE = {"dialogue": "Response (by A)", "summarization": "Summary", "fact": "Summary",
             "question_generation": "Question"}


def render_blocks(blocks: Sequence[tuple[str, str]], spans: Spans | None = None) -> str:
    """``Header:\ntext`` blocks separated by blank lines; with ``spans``, each block sits in a
    nonce-delimited span (header inside, so a header and its text stay together)."""
    parts = [f"{header}:\n{text}" for header, text in blocks]
    return "\n\n".join(spans.wrap(p) if spans else p for p in parts)


def task_inputs(sample: Sample, max_source_chars: int = 4000, spans: Spans | None = None) -> str:
    """The sample laid out for a prompt, per task; long sources are cut at the end. With
    ``spans`` (isolation), every untrusted text is neutralized and wrapped in a span."""
    clean = spans.clean if spans else _same
    blocks = input_blocks(sample, max_source_chars, clean)
    blocks.append((CANDIDATE.get(sample.task, "Text"), clean(sample.response)))
    return render_blocks(blocks, spans)


def _first_score(text: str, low: float, high: float, labels: Sequence[str]) -> float | None:
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


def _last_score(text: str, low: float, high: float, labels: Sequence[str]) -> float | None:
    # an echoed span delimiter is no score, and a neutralized marker the judge quotes back
    # ("Score¦: 100") is the response's verdict, not the judge's
    text = _ECHOED.sub(" ", text)
    text = re.sub(rf"{re.escape(isolation.break_mark())}{isolation.label_separator()}\s*-?\d+(?:\.\d+)?",
                  " ", text)
    if labels:
        vals = []
        for label in labels:
            found = _labelled(text, (label,))
            if not found or not low <= found[-1] <= high:
                return None
            vals.append(found[-1])
        return float(np.mean(vals))
    labelled = [v for v in _labelled(text, isolation.verdict_labels()) if low <= v <= high]
    if labelled:
        return labelled[-1]
    plain = [float(m.group(0)) for m in _NOT_DENOMINATOR.finditer(text)]
    plain = [v for v in plain if low <= v <= high]
    return plain[-1] if plain else None


@functools.lru_cache(maxsize=64)
def _verdict_regex(labels: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(isolation.label_regex(labels).pattern + r"\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)


def _labelled(text: str, labels: Sequence[str]) -> list[float]:
    """The numbers after each ``label:`` in ``text``, in order."""
    return [float(m.group(3)) for m in _verdict_regex(tuple(labels)).finditer(text)]


def parse_score(text: str, low: float, high: float, labels: Sequence[str] = (), last: bool = False) -> float | None:
    """The score in ``text`` (the mean of labelled numbers if ``labels``), or None.

    ``last=False`` (the judge without isolation): the first number in range, or the first
    value of each label. ``last=True`` (with isolation): the *last* labelled verdict ("Score:
    7", "Rating: 4", or each of ``labels``), else the last number in range that is not a
    denominator ("4/5", "4 out of 5" give 4). A judge that quotes the response's own "Score: 100"
    before its verdict, or restates the scale first ("from 1 to 100 ... 35"), is read at its
    verdict, not at the quote."""
    return _last_score(text, low, high, labels) if last else _first_score(text, low, high, labels)


def require_source(samples: Sequence[Sample], metric: str) -> None:
    """A judge cannot rate a summary, fact or question without the text it was written from."""
    for s in samples:
        if s.task in ("summarization", "fact", "question_generation") and is_blank(s.source_text()):
            raise InputError(s.id, "context", f"{metric} needs the source text for {s.task}")


def template_fields(text: str) -> set[str]:
    """The names of the fields a ``str.format`` template fills (``{criterion!s:>10}`` and
    ``{criterion.x}`` are ``criterion``; ``{{literal}}`` is none)."""
    names = set()
    for _, field, _, _ in string.Formatter().parse(text):
        if field:
            names.add(re.split(r"[.\[]", field, maxsplit=1)[0])
    return names


class JudgeBase(Metric):
    """What every LLM-judge metric shares (the absolute judge here, the pairwise judge in
    :mod:`robusteval.metrics.pairwise`): the backend (a spec string resolved once and shared
    by the process, a backend object, or a spec with ``backend_options``), the sampling
    settings (``n``, ``temperature``, ``max_new_tokens``, ``seed``; a template's ``defaults``
    fill what is not given), what a failed request does (``on_llm_error``), the ``isolation``
    of untrusted text (:mod:`robusteval.llm.isolation`) and the report with the backend's
    counters under ``llm``."""

    def __init__(self, backend: str | LLMBackend | None = None, *, defaults: dict[str, Any] | None = None,
                 n: int | None = None, temperature: float | None = None, seed: int = 0,
                 max_new_tokens: int | None = None, backend_options: dict[str, Any] | None = None,
                 on_llm_error: str = "error", isolation: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if on_llm_error not in ("error", "midpoint"):
            raise ValueError(f"on_llm_error must be error or midpoint, not {on_llm_error!r}")
        self.on_llm_error = on_llm_error
        defaults = defaults or {}  # the protocol a template's paper used
        self.n = int(n if n is not None else defaults.get("n", 1))
        if self.n < 1:
            raise ValueError(f"n (sampled ratings per sample) must be at least 1, got {self.n}")
        self.temperature = float(temperature if temperature is not None
                                 else defaults.get("temperature", 0.0 if self.n == 1 else 1.0))
        self.seed = seed
        self.max_new_tokens = int(max_new_tokens if max_new_tokens is not None else defaults.get("max_new_tokens", 24))
        self.isolation = bool(isolation)
        if backend_options and backend is not None and not isinstance(backend, str):
            raise ValueError("backend_options configure a backend spec string, not a backend object")
        self.backend = load_backend(backend, **backend_options) if backend_options else resolve_backend(backend)
        self.raw_outputs: list[list[str]] = []

    def _backend_options(self, ids: Sequence[str]) -> dict[str, Any]:
        return {"ids": list(ids), "on_error": "fallback" if self.on_llm_error == "midpoint" else "raise"}

    def _generate(self, prompts: Sequence[str], ids: Sequence[str],
                  accept: Callable[[list[str]], bool]) -> list[list[str]]:
        """``n`` outputs per prompt; a failed request (fallback mode) comes back empty. Only
        outputs ``accept`` approves are cached by the backend."""
        opts = {**self._backend_options(ids), "accept": accept}
        outs = call_with(self.backend.generate, list(prompts), optional=opts, n=self.n, temperature=self.temperature,
                         max_new_tokens=self.max_new_tokens, seed=self.seed)
        self.raw_outputs = outs
        return outs

    def _next_token_probs(self, prompts: Sequence[str], options: Sequence[str], ids: Sequence[str]) -> np.ndarray:
        """P(option) as the next token per prompt (rows of NaN where a request failed)."""
        return np.asarray(call_with(self.backend.next_token_probs, list(prompts), list(options),
                                    optional=self._backend_options(ids)), dtype=np.float64)

    def leaves_cpu_idle(self) -> bool:
        """A judge behind an OpenAI-compatible server waits on the network; a local one on cuda
        or mps leaves the CPU to others too."""
        from robusteval.llm.openai_compat import OpenAICompatible

        backend = self.backend
        return isinstance(backend, OpenAICompatible) or on_accelerator(getattr(backend, "device", "cpu"))

    def _spans(self, content: str, labels: Sequence[str] = ()) -> Spans | None:
        """The isolation of a prompt whose plain rendering is ``content`` (None without isolation)."""
        return Spans.for_content(self.seed, content, tuple(labels)) if self.isolation else None

    def _prompt_signature(self) -> str:
        """The isolation version (when on) and, for a judge that generates (not ``mode="prob"``,
        which reads next-token probabilities), the generation length: two judges that differ in
        either write different prompts or read different outputs, so a resumed log must not
        mix them."""
        generates = getattr(self, "mode", None) != "prob"
        return ((f"|max_new={self.max_new_tokens}" if generates else "")
                + (f"|isolation={isolation.version()}" if self.isolation else ""))

    def report(self) -> dict[str, Any]:
        """The metric's fallback counters plus the backend's report under ``llm``."""
        return {**super().report(), "llm": backend_report(self.backend)}


@register_metric("llm-judge", family="llm",
                 source="Chen et al. 2024 (AdvEval); Liu et al. 2023 (G-Eval); Vasselli & Watanabe 2023")
class LLMJudge(JudgeBase):
    """Score with an LLM. Options: ``backend`` ("local", "local:<path>", "openai:<model>" or a
    backend object), ``template``, ``aspect`` and ``criteria_variant`` (G-Eval), ``mode``,
    ``n``, ``temperature``, ``seed``, ``on_unparseable``, ``on_llm_error`` (``error`` or
    ``midpoint``), ``criteria_file``, ``data_dir``, ``backend_options`` (e.g. ``timeout``,
    ``max_retries``, ``allowed_hosts`` for an ``openai:`` spec), ``isolation`` (default on:
    untrusted text in nonce-delimited spans with markers neutralized, the last verdict parsed;
    :mod:`robusteval.llm.isolation`)."""

    name: ClassVar[str] = "llm-judge"

    def __init__(self, backend: str | LLMBackend | None = None, template: str = "geval",
                 aspect: str = "Overall_quality", criteria_variant: str = "Gold",
                 mode: str | None = None, n: int | None = None, temperature: float | None = None,
                 seed: int = 0, max_new_tokens: int | None = None, on_unparseable: str | None = None,
                 criteria_file: str | None = None, data_dir: str | None = None,
                 backend_options: dict[str, Any] | None = None, on_llm_error: str = "error",
                 isolation: bool = True, **kwargs: Any) -> None:
        if template not in TEMPLATES:
            raise ValueError(f"unknown template {template!r} (have: {', '.join(TEMPLATES)})")
        if TEMPLATES[template].get("kind", "absolute") != "absolute":
            raise ValueError(f"template {template!r} compares two texts; use the llm-pairwise metric")
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
        self.aspect = aspect
        self.criterion = self._criterion(aspect, criteria_variant, criteria_file, data_dir)
        super().__init__(backend, defaults=self.template.get("defaults", {}), n=n, temperature=temperature,
                         seed=seed, max_new_tokens=max_new_tokens, backend_options=backend_options,
                         on_llm_error=on_llm_error, isolation=isolation, **kwargs)

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
        """The template filled with ``sample``; with isolation, the instruction first and every
        untrusted text neutralized inside a span whose nonce hashes the plain prompt."""
        obj = OBJECTS.get(sample.task, "text")
        fields = {"object": obj, "aspect": self.aspect.replace("_", " ").lower(),
                  "source": SOURCES.get(sample.task, "input"),
                  "criterion": self.criterion.replace("{T}", obj).replace("{S}", SOURCES.get(sample.task, "input"))}
        plain = self.template["text"].format(task_inputs=task_inputs(sample), **fields)
        spans = self._spans(plain, self.template.get("labels", ()))
        if spans is None:
            return plain
        return spans.isolate(self.template["text"].format(task_inputs=task_inputs(sample, spans=spans), **fields))

    def _parse(self, text: str) -> float | None:
        return parse_score(text, self.low, self.high, self.template.get("labels", ()), last=self.isolation)

    def _usable(self, texts: Sequence[str]) -> bool:
        """True when at least one output carries a score (only such answers are cached)."""
        return any(self._parse(t) is not None for t in texts)

    def _prob_scores(self, prompts: Sequence[str], ids: Sequence[str]) -> np.ndarray:
        """Probability-weighted scores; NaN where the backend failed (fallback mode)."""
        values = np.arange(int(self.low), int(self.high) + 1)
        return self._next_token_probs(prompts, [str(v) for v in values], ids) @ values

    def _parse_scores(self, samples: list[Sample], prompts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Mean parsed score per sample (NaN: none usable) and which samples' requests failed."""
        outs = self._generate(prompts, [s.id for s in samples], self._usable)
        raw = np.full(len(samples), np.nan)
        failed = np.zeros(len(samples), dtype=bool)
        for i, texts in enumerate(outs):
            if not texts and self.on_llm_error == "midpoint":
                failed[i] = True  # the backend's placeholder for a failed request
                continue
            vals = [self._parse(t) for t in texts]
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
        require_source(samples, self.name)
        prompts = [self.prompt(s) for s in samples]
        if self.mode == "prob":
            raw = self._prob_scores(prompts, [s.id for s in samples])
            failed = np.isnan(raw)
        else:
            raw, failed = self._parse_scores(samples, prompts)
        if failed.any() and self.on_llm_error == "midpoint":  # else the backend raised already
            self.fallbacks["llm_failed"] += int(failed.sum())  # (a NaN left here is a named error)
            self.failed_requests.extend(samples[i].id for i in np.flatnonzero(failed))
            raw[failed] = (self.low + self.high) / 2
        return 100.0 * (raw - self.low) / (self.high - self.low)

    def signature(self) -> str:
        # the criterion's text, not its name, where the template writes it: criteria_variant,
        # criteria_file and the data folder it was read from all change that prompt (a template
        # without a {criterion} field, in any spelling, reads none of them, and its identity
        # does not depend on them)
        criterion = ""
        if "criterion" in template_fields(self.template["text"]):
            digest = hashlib.sha256(self.criterion.encode("utf-8", "surrogatepass")).hexdigest()[:10]
            criterion = f"criterion={digest}|"
        return (f"backend={backend_identity(self.backend)}|template={self.template_name}|aspect={self.aspect}|"
                f"{criterion}mode={self.mode}|n={self.n}|T={self.temperature}|seed={self.seed}|"
                f"fallback={self.on_unparseable}"
                + (f"|llm_error={self.on_llm_error}" if self.on_llm_error != "error" else "")
                + self._prompt_signature())
