"""UniEval (Zhong et al., 2022, "Towards a Unified Multi-Dimensional Evaluator for Text
Generation", EMNLP; Tables 2-5): every dimension is a Boolean question answered by a T5.

Port of the reference scorer: the 12 task/dimension inputs are upstream's strings with
literal ``</s>`` separators (``resources/unieval_prompts.json``); the score of one input is
P(Yes) / (P(Yes) + P(No)) from the softmax over the vocabulary at the first decoder step;
consistency/fluency (summarization), consistency (fact) average sentence scores,
engagingness (dialogue) sums them, and ``overall`` is the mean of the task's dimensions.
Upstream splits sentences with nltk's punkt, whose data cannot be installed here; robusteval
uses spaCy's rule-based sentencizer, which agrees on ordinary prose.

Checkpoints: ``MingZhong/unieval-sum`` (summarization, data-to-text), ``unieval-dialog``,
``unieval-fact`` from the user's hub, or any seq2seq folder (``model=``). On the 0-100
scale robusteval reports 100 x the upstream value; a summed engagingness (or an overall
that contains it) above 1 is capped at 100 and counted in ``report()``; the upstream
values are in :meth:`UniEval.score_dimensions`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import InputError
from robusteval.metrics.base import Metric, resolve_device
from robusteval.metrics.identity import model_identity
from robusteval.metrics.registry import register_metric
from robusteval.nlp import split_sentences
from robusteval.paths import resource
from robusteval.text import is_blank
from robusteval.types import Sample

TASK_ALIASES = {"summarization": "summarization", "dialogue": "dialogue",
                "data_to_text": "data2text", "data2text": "data2text", "fact": "fact"}
DEFAULT_CHECKPOINTS = {"summarization": "MingZhong/unieval-sum", "dialogue": "MingZhong/unieval-dialog",
                       "data2text": "MingZhong/unieval-sum", "fact": "MingZhong/unieval-fact"}


def load_prompts() -> dict[str, dict[str, dict[str, str]]]:
    data = json.loads(resource("unieval_prompts.json").read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if not k.startswith("_")}


PROMPTS = load_prompts()


def dialogue_source(sample: Sample) -> str:
    """The dialogue history as upstream's data has it: turns joined by ' \\n ', ending ' \\n\\n'."""
    raw = sample.meta.get("unieval_source")
    if isinstance(raw, str):
        return raw
    return " \n ".join(sample.context) + " \n\n"


def fields_for(sample: Sample, task: str) -> dict[str, str]:
    source = dialogue_source(sample) if task == "dialogue" else sample.source_text()
    return {"source": source, "reference": sample.reference or "", "fact": sample.fact or ""}


def yes_probability(model: Any, input_ids: Any, attention_mask: Any, yes: int, no: int,
                    inputs_embeds: Any = None) -> Any:
    """P(Yes) / (P(Yes) + P(No)) at the first decoder step (a tensor with gradients); UniEval's
    score, shared by the metric and the Boolean-QA training module (which passes
    ``inputs_embeds`` instead of ``input_ids`` for its embedding adversary)."""
    import torch

    start = model.config.decoder_start_token_id
    ref = input_ids if input_ids is not None else inputs_embeds
    dec = torch.full((ref.shape[0], 1), start, dtype=torch.long, device=ref.device)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=dec,
                   inputs_embeds=inputs_embeds).logits[:, 0, :]
    return torch.softmax(logits.float()[:, [yes, no]], dim=-1)[:, 0]


# Vasselli & Watanabe (App. A) score DailyDialog, which has no fact, with "a new prompt that does
# not refer to the fact for content"; the paper does not print it, so this is robusteval's: the
# engagingness question with the fact removed (summed over sentences, as engagingness is)
FACTLESS: dict[str, dict[str, str]] = {"engagingness": {
    "template": "question: Is this an engaging and informative response according to the dialogue history? "
                "</s> response: {output} </s> dialogue history: {source}",
    "unit": "sentence", "aggregate": "sum"}}


def spec_of(task: str, dimension: str) -> dict[str, str]:
    """The prompt spec of a dimension; ``<dim>-nofact`` is the fact-free variant."""
    if dimension.endswith("-nofact"):
        return FACTLESS[dimension.removesuffix("-nofact")]
    return PROMPTS[task][dimension]


def build_inputs(task: str, dimension: str, samples: Sequence[Sample]) -> tuple[list[str], list[int]]:
    """Boolean-QA inputs for one dimension and the number of inputs per sample."""
    spec = spec_of(task, dimension)
    template = spec["template"]
    needs = [k for k in ("source", "reference", "fact") if "{" + k + "}" in template]
    inputs, counts = [], []
    for s in samples:
        fields = fields_for(s, task)
        for k in needs:
            if is_blank(fields[k]):
                raise InputError(s.id, "context" if k == "source" else k,
                                 f"UniEval {task}/{dimension} needs a non-empty {k}")
        units = split_sentences(s.response) if spec["unit"] == "sentence" else [s.response]
        counts.append(len(units))
        inputs += [template.format(output=u, **fields) for u in units]
    return inputs, counts


# UniEval dimension -> the aspect of Hu et al. 2024 (robusteval.aspects) it scores
UNIEVAL_ASPECTS = {"fluency": "Fluency", "naturalness": "Fluency", "understandability": "Fluency",
                   "coherence": "Coherence", "consistency": "Faithfulness", "groundedness": "Faithfulness",
                   "relevance": "Informativeness", "informativeness": "Informativeness"}


@register_metric("unieval", family="learned", source="Zhong et al. 2022 (EMNLP), UniEval")
class UniEval(Metric):
    """UniEval Boolean-QA scorer. ``dimension`` = one of the task's dimensions or ``overall``.

    Options: ``model`` (seq2seq id/folder; default per task from ``DEFAULT_CHECKPOINTS``),
    ``task`` (force one task instead of each sample's), ``max_length`` (1024, as upstream),
    ``batch_size`` (8), ``device``, ``adapter`` (a peft LoRA adapter folder written by
    ``robusteval train`` with the Boolean-QA model, merged into ``model`` at load).
    """

    name: ClassVar[str] = "unieval"
    factless_is_fallback: ClassVar[bool] = True  # unieval-altered asks the fact-free question by design

    def __init__(self, model: str | None = None, dimension: str = "overall", task: str | None = None,
                 max_length: int = 1024, batch_size: int = 8, device: str = "cpu",
                 adapter: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        device = resolve_device(device)  # "auto": cuda when there is a GPU, also when built directly
        self.model_name = model
        self.adapter = adapter
        self.dimension = dimension
        self.aspect = UNIEVAL_ASPECTS.get(dimension, "Overall_quality")
        self.task = TASK_ALIASES[task] if task else None
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self._models: dict[str, tuple[Any, Any, int, int]] = {}
        self.model_calls = 0
        if self.task:
            self._check_dimension(self.task)
            self._model_for(self.task)  # load now, once

    def _check_dimension(self, task: str) -> None:
        if self.dimension != "overall" and self.dimension not in PROMPTS[task]:
            raise ValueError(f"UniEval {task} has no dimension {self.dimension!r} "
                             f"(has: {', '.join(PROMPTS[task])}, overall)")

    def _model_for(self, task: str) -> tuple[Any, Any, int, int]:
        name = self.model_name or DEFAULT_CHECKPOINTS[task]
        if name not in self._models:
            from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

            tok = AutoTokenizer.from_pretrained(name)
            model = AutoModelForSeq2SeqLM.from_pretrained(name)
            if self.adapter:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, self.adapter).merge_and_unload()
            model = model.to(self.device).eval()
            yes, no = tok("Yes")["input_ids"][0], tok("No")["input_ids"][0]
            if yes == no:
                raise ValueError(f"{name}: 'Yes' and 'No' start with the same token id {yes}")
            self._models[name] = (tok, model, yes, no)
        return self._models[name]

    def boolean_scores(self, task: str, inputs: Sequence[str]) -> np.ndarray:
        """P(Yes)/(P(Yes)+P(No)) at the first decoder step for each input string."""
        import torch

        tok, model, yes, no = self._model_for(task)
        out = []
        for i in range(0, len(inputs), self.batch_size):
            enc = tok(list(inputs[i:i + self.batch_size]), max_length=self.max_length,
                      truncation=True, padding=True, return_tensors="pt").to(self.device)
            with torch.no_grad():
                p = yes_probability(model, enc["input_ids"], enc["attention_mask"], yes, no)
            self.model_calls += 1
            out.append(p.cpu().numpy())
        return np.concatenate(out).astype(np.float64) if out else np.zeros(0)

    def _task_of(self, sample: Sample) -> str:
        if self.task:
            return self.task
        if sample.task not in TASK_ALIASES:
            raise InputError(sample.id, "task", f"UniEval has no prompts for task {sample.task!r}")
        return TASK_ALIASES[sample.task]

    def dimensions_for(self, task: str, sample: Sample) -> list[str]:
        """The dimensions scored for ``sample``. A dialogue ``overall`` without a fact leaves
        out groundedness and asks the fact-free engagingness question (counted in
        ``report()["fallbacks"]["overall_without_fact"]``) instead of failing."""
        if self.dimension != "overall":
            return [self.dimension]
        dims = list(PROMPTS[task])
        if task == "dialogue" and is_blank(sample.fact or ""):
            dims = [f"{d}-nofact" if d in FACTLESS else d for d in dims if d != "groundedness"]
        return dims

    def combine(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """``overall`` from the scored dimensions: their mean (upstream)."""
        return np.mean(list(values.values()), axis=0)

    def score_dimensions(self, samples: Sequence[Sample]) -> dict[str, np.ndarray]:
        """Upstream values per dimension (NaN where a dimension is not the sample's task's)."""
        samples = list(samples)
        by_dims: dict[tuple[str, tuple[str, ...]], list[int]] = {}
        for i, s in enumerate(samples):
            task = self._task_of(s)
            self._check_dimension(task)
            by_dims.setdefault((task, tuple(self.dimensions_for(task, s))), []).append(i)
        result: dict[str, np.ndarray] = {}
        for (task, dims), idx in by_dims.items():
            group = [samples[i] for i in idx]
            if self.dimension == "overall" and self.factless_is_fallback and any(d.endswith("-nofact") for d in dims):
                self.fallbacks["overall_without_fact"] += len(group)
            values: dict[str, np.ndarray] = {}
            for dim in dims:
                inputs, counts = build_inputs(task, dim, group)
                flat = self.boolean_scores(task, inputs)
                agg = spec_of(task, dim).get("aggregate", "mean")
                bounds = np.cumsum([0, *counts])
                vals = np.array([flat[a:b].sum() if agg == "sum" else flat[a:b].mean()
                                 for a, b in itertools.pairwise(bounds)])
                result.setdefault(dim, np.full(len(samples), np.nan))[idx] = vals
                values[dim] = vals
            if self.dimension == "overall":
                result.setdefault("overall", np.full(len(samples), np.nan))[idx] = self.combine(values)
        return result

    def _score(self, samples: list[Sample]) -> np.ndarray:
        return 100.0 * self.score_dimensions(samples)[self.dimension]

    def signature(self) -> str:
        import transformers

        model = model_identity(self.model_name) if self.model_name else "default-per-task"
        adapter = model_identity(self.adapter) if self.adapter else None
        return (f"model={model}|adapter={adapter}|dim={self.dimension}|"
                f"max_length={self.max_length}|split=spacy-sentencizer|"
                f"transformers={transformers.__version__}")


@register_metric("unieval-altered", family="learned",
                 source="Vasselli & Watanabe 2023, §3.2.2 and App. A (UniEval for ungrounded dialogue)")
class UniEvalAltered(UniEval):
    """UniEval altered for ungrounded dialogue (Vasselli & Watanabe, §3.2.2, App. A):
    content = the engagingness question without the fact, grammar = naturalness, relevance =
    coherence; groundedness and understandability are dropped, and ``overall`` is
    0.4 content + 0.2 grammar + 0.4 relevance. ``dimension`` = ``overall`` (default),
    ``content``, ``grammar`` or ``relevance``. Same checkpoint and options as ``unieval``."""

    name: ClassVar[str] = "unieval-altered"
    factless_is_fallback: ClassVar[bool] = False
    tasks: ClassVar[tuple[str, ...]] = ("dialogue",)
    PARTS: ClassVar[dict[str, str]] = {"content": "engagingness-nofact", "grammar": "naturalness",
                                       "relevance": "coherence"}
    WEIGHTS: ClassVar[dict[str, float]] = {"engagingness-nofact": 0.4, "naturalness": 0.2, "coherence": 0.4}

    def __init__(self, dimension: str = "overall", **kwargs: Any) -> None:
        if dimension != "overall" and dimension not in self.PARTS:
            raise ValueError(f"unieval-altered dimension must be overall, {', '.join(self.PARTS)}; got {dimension!r}")
        self.part = dimension
        super().__init__(dimension="overall", task="dialogue", **kwargs)
        self.aspect = {"content": "Informativeness", "grammar": "Fluency", "relevance": "Coherence"}.get(
            dimension, "Overall_quality")

    def dimensions_for(self, task: str, sample: Sample) -> list[str]:
        return list(self.WEIGHTS) if self.part == "overall" else [self.PARTS[self.part]]

    def combine(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        if self.part != "overall":
            return values[self.PARTS[self.part]]
        return sum(w * values[d] for d, w in self.WEIGHTS.items())

    def signature(self) -> str:
        return super().signature() + f"|altered={self.part}"
