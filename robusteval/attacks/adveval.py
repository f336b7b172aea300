"""AdvEval (Chen et al. 2024, "Unveiling the Achilles' Heel of NLG Evaluators: A Unified
Adversarial Framework Driven by Large Language Models", ACL Findings; §3, Algorithm 1).

A generator LLM proposes ``candidates`` (8) texts per iteration from a prompt holding the
task instruction, optional evaluation criteria and the ``top_k`` (10) best texts so far with
their feedback scores in ascending order. A gold evaluator (§3.4: the LLM judge with the
task's App. B prompt, each score the mean of 8 ratings sampled at temperature 1) and the
victim score each candidate; the feedback is
``a * S_gold - S_victim`` for R+ (good text the victim under-rates) and
``S_victim - a * S_gold`` for R- (bad text the victim over-rates). The loop stops when the
best text meets the gold criterion (tau1 / tau2, as in the runner's ``gold`` criterion) or
after ``max_iters`` iterations, or when the victim-query budget is spent.

Speed without changing the attack: the ``candidates`` samples of an iteration are one batched
request to the generator, and a sample stops as soon as its first non-empty line is complete
(:func:`first_line_settled`), since that line is all :func:`clean_candidate` keeps; texts
already scored for the sample are never scored again.
"""

from __future__ import annotations

import json
import time
from typing import Any, ClassVar

from robusteval.attacks.base import Attack, AttackResult
from robusteval.attacks.criteria import Criteria
from robusteval.attacks.registry import register_attack
from robusteval.llm.backends import LazyBackend
from robusteval.llm.clean import clean_candidate
from robusteval.paths import resource
from robusteval.types import Sample

PROMPTS = {k: v for k, v in json.loads(resource("attacks/adveval_prompts.json").read_text(encoding="utf-8")).items()
           if not k.startswith("_")}
SOURCE_NAMES = {"dialogue": "Dialogue history", "summarization": "Article", "fact": "Article",
                "question_generation": "Passage and answer", "data_to_text": "Input data"}
GOLD_TEMPLATES = {"dialogue": "adveval-dialogue", "summarization": "adveval-summary", "fact": "adveval-summary",
                  "question_generation": "adveval-question"}
OBJECTS = {"dialogue": "response", "summarization": "summary", "fact": "summary",
           "question_generation": "question", "data_to_text": "text"}


def first_line_settled(text: str) -> bool:
    """True once ``text`` holds a complete line (ended by a line break) that
    :func:`clean_candidate` keeps: whatever follows cannot change the candidate, so the
    generator may stop there (a backend without ``stop=`` just generates the rest)."""
    parts = text.splitlines(keepends=True)
    if parts and parts[-1].splitlines() == [parts[-1]]:  # the last line is still open
        parts.pop()
    return bool(parts) and bool(clean_candidate("".join(parts)))


class _AdvEval(Attack):
    family: ClassVar[str] = "adveval"
    source: ClassVar[str] = "Chen et al. 2024 (AdvEval), §3"
    needs_victim: ClassVar[bool] = True
    needs_llm: ClassVar[bool] = True

    def __init__(self, generator: Any = None, gold: Any = None, a: float = 1.0, candidates: int = 8,
                 top_k: int = 10, max_iters: int = 5, criteria_text: str | None = None,
                 temperature: float = 1.0, max_new_tokens: int = 96, seed: int = 0,
                 criteria: Criteria | None = None) -> None:
        super().__init__(seed=seed)
        self._generator_spec, self._gold_spec = generator, gold
        self.a, self.n_candidates, self.top_k, self.max_iters = a, candidates, top_k, max_iters
        self.criteria_text = criteria_text
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        self.criteria = criteria or Criteria()
        self._golds: dict[str, Any] = {}

    generator = LazyBackend("_generator_spec")

    def gold_for(self, task: str) -> Any:
        """The gold evaluator for ``task``. Default (AdvEval §3.4 and App. B): the LLM judge with
        the task's gold prompt (dialogue: five 0-20 sub-scores; summarization: factual
        consistency; question generation: the answerability steps), scoring each text as the
        mean of 8 ratings sampled at temperature 1. ``gold=`` a dict overrides judge options,
        a Metric replaces the judge."""
        spec = self._gold_spec
        if spec is not None and not isinstance(spec, str | dict):
            return spec
        if task not in self._golds:
            from robusteval import metrics

            opts: dict[str, Any] = dict(spec) if isinstance(spec, dict) else {}
            if isinstance(spec, str):
                opts["backend"] = spec
            defaults = {"template": GOLD_TEMPLATES.get(task, "adveval-dialogue"), "n": 8, "temperature": 1.0}
            self._golds[task] = metrics.load("llm-judge", **{**defaults, **opts})
        return self._golds[task]

    def feedback(self, gold: float, victim: float) -> float:
        return self.a * gold - victim if self.direction == "R+" else victim - self.a * gold

    def done(self, gold: float, victim: float) -> bool:
        """AdvEval's success criterion (Eq. 3), the same one the runner reports."""
        return self.criteria.gold_verdict(self.direction, gold, victim)

    def prompt(self, sample: Sample, history: list[dict[str, Any]]) -> str:
        top = sorted(history, key=lambda h: h["feedback"])[-self.top_k:]
        trajectory = "\n".join(f"- ({h['feedback']:.1f}) {h['text']}" for h in top)
        crit = f"\n\nEvaluation criteria:\n{self.criteria_text}" if self.criteria_text else ""
        source = "\n".join(sample.context) if sample.task == "dialogue" else sample.source_text()[:3000]
        if sample.task == "question_generation":
            source = f"{source}\nAnswer: {sample.answer or ''}"
        return PROMPTS[self.direction].format(
            object=OBJECTS.get(sample.task, "text"), source_name=SOURCE_NAMES.get(sample.task, "Input"),
            source=source, trajectory=trajectory, criteria=crit)

    def run(self, sample: Sample, victim: Any = None, budget: int | None = None) -> AttackResult:
        if victim is None:
            raise ValueError(f"{self.name} needs a victim")
        t0 = time.perf_counter()
        calls0 = victim.model_calls
        budget = budget or 300

        gold = self.gold_for(sample.task)

        def gold_score(text: str) -> float:
            return float(gold.score([sample.with_response(text)])[0])

        v0, g0 = victim.score_one(sample, sample.response), gold_score(sample.response)
        history = [{"text": sample.response, "victim": v0, "gold": g0, "feedback": self.feedback(g0, v0),
                    "iteration": 0}]
        seen = {sample.response}
        stop_reason = "max_iters"
        for it in range(1, self.max_iters + 1):
            if self.done(max(history, key=lambda h: h["feedback"])["gold"],
                         max(history, key=lambda h: h["feedback"])["victim"]):
                stop_reason = "criterion met"
                break
            if victim.model_calls - calls0 >= budget:
                stop_reason = "budget"
                break
            from robusteval.llm import call_with

            outs = call_with(self.generator.generate, [self.prompt(sample, history)],
                             optional={"ids": [sample.id], "stop": first_line_settled},
                             n=self.n_candidates, temperature=self.temperature, max_new_tokens=self.max_new_tokens,
                             seed=self.seed * 7919 + it)[0]
            cands = [c for c in dict.fromkeys(clean_candidate(o) for o in outs) if c and c not in seen]
            room = budget - (victim.model_calls - calls0)
            cands = cands[:max(room, 0)]
            if not cands:
                continue
            seen.update(cands)
            vs = victim.score(sample, cands)
            gs = gold.score([sample.with_response(c) for c in cands])
            for c, v, g in zip(cands, vs, gs, strict=True):
                history.append({"text": c, "victim": float(v), "gold": float(g),
                                "feedback": self.feedback(float(g), float(v)), "iteration": it})
        else:
            best = max(history, key=lambda h: h["feedback"])
            if self.done(best["gold"], best["victim"]):
                stop_reason = "criterion met"
        best = max(history[1:] or history, key=lambda h: h["feedback"])
        result = self.row(
            sample, adversarial=best["text"] if len(history) > 1 else None,
            # no usable candidate is a failed attack (attacked, not fooled), not a skip
            note="" if len(history) > 1 else "the generator produced no usable candidate",
            victim_before=v0, victim_after=best["victim"] if len(history) > 1 else None,
            gold_before=g0, gold_after=best["gold"] if len(history) > 1 else None,
            trace=history, wall_time=time.perf_counter() - t0,
            meta={"stop": stop_reason, "iterations": max(h["iteration"] for h in history),
                  "generator": getattr(self.generator, "name", "?"), "a": self.a})
        return result


@register_attack
class AdvEvalPos(_AdvEval):
    """R+: LLM-generated good texts that the victim under-rates (gold high, victim low)."""

    name: ClassVar[str] = "adveval-pos"
    direction: ClassVar[str] = "R+"
    keeps: ClassVar[tuple[str, ...]] = ("overall",)


@register_attack
class AdvEvalNeg(_AdvEval):
    """R-: LLM-generated bad texts that the victim over-rates (gold low, victim high)."""

    name: ClassVar[str] = "adveval-neg"
    direction: ClassVar[str] = "R-"
    targets: ClassVar[tuple[str, ...]] = ("overall",)
