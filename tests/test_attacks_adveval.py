from __future__ import annotations

import numpy as np

from robusteval import Sample, attacks
from robusteval.attacks.victim import CachedVictim
from robusteval.llm.clean import clean_candidate
from robusteval.metrics.base import Metric

S = Sample(id="d", task="dialogue", response="sure , see you at noon .", context=("lunch tomorrow ?",))


class Generator:
    """Scripted generator: iteration k proposes texts with k+1 'please' words."""

    name = "scripted-generator"

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.calls = 0

    def generate(self, prompts, n=1, temperature=0.0, max_new_tokens=32, seed=0):
        self.calls += 1
        self.prompts += list(prompts)
        k = self.calls
        return [[f"{i + 1}. " + " ".join(["please"] * k) + f" variant {i}" for i in range(n)]]


class Gold(Metric):
    name = "gold"

    def _score(self, samples):  # the gold likes politeness
        return np.array([min(100.0, 30.0 * s.response.count("please") + 20) for s in samples])


class Victim(Metric):
    name = "victim"

    def _score(self, samples):  # the victim dislikes long texts
        return np.array([max(0.0, 60.0 - 5 * len(s.response.split())) for s in samples])


def test_clean_candidate() -> None:
    assert clean_candidate("1. Response: \"hello there\"\nmore") == "hello there"
    assert clean_candidate("\n- fine thanks") == "fine thanks"


def test_adveval_pos_loop_feedback_trajectory_and_stop() -> None:
    gen = Generator()
    a = attacks.load("adveval-pos", generator=gen, gold=Gold(), candidates=4, max_iters=5)
    v = CachedVictim(Victim())
    r = a.run(S, v, budget=300)
    assert r.applicable and r.direction == "R+"
    assert r.meta["stop"] == "criterion met"
    assert r.gold_after >= 70 and r.gold_after - r.victim_after >= 40
    feedbacks = [h["feedback"] for h in r.trace]
    assert all(h["feedback"] == h["gold"] - h["victim"] for h in r.trace)  # a = 1, R+
    assert max(feedbacks) == r.gold_after - r.victim_after
    # the second prompt lists the earlier texts with feedback in ascending order
    listed = [float(x) for x in __import__("re").findall(r"^- \((-?[\d.]+)\)", gen.prompts[1], flags=8)]
    assert listed == sorted(listed) and len(listed) == 5
    assert v.model_calls <= 1 + 4 * r.meta["iterations"]


def test_adveval_neg_feedback_sign_and_budget() -> None:
    a = attacks.load("adveval-neg", generator=Generator(), gold=Gold(), candidates=8, max_iters=10)
    v = CachedVictim(Victim())
    r = a.run(S, v, budget=5)
    assert v.model_calls <= 5 and r.meta["stop"] in ("budget", "max_iters")
    assert all(h["feedback"] == h["victim"] - h["gold"] for h in r.trace)


class _Silent:
    name = "silent"
    calls = 0
    cache_hits = 0


def test_gold_defaults_follow_section_3_4_and_appendix_b() -> None:
    """Chen et al. 2024, §3.4: "We first obtain 8 ratings from the evaluator through repeatedly
    sampling. Then, we take the arithmetic mean of these ratings as the final gold score";
    App. B: per-task gold prompts (dialogue: five dimensions of 0-20 summed; summarization:
    factual consistency only; question generation: the answerability steps)."""
    a = attacks.load("adveval-pos", generator=_Silent(), gold={"backend": _Silent()})
    want = {"dialogue": "adveval-dialogue", "summarization": "adveval-summary",
            "question_generation": "adveval-question"}
    for task, template in want.items():
        g = a.gold_for(task)
        assert (g.template_name, g.n, g.temperature) == (template, 8, 1.0)
    assert a.gold_for("dialogue") is a.gold_for("dialogue")
    text = a.gold_for("dialogue").template["text"]
    assert text.count("0 to 20") == 1 and all(f"{i}. " in text for i in range(1, 6))
    assert "factually consistent" in a.gold_for("summarization").template["text"]
    assert "passage alone cannot answer" in a.gold_for("question_generation").template["text"]
    one = attacks.load("adveval-pos", generator=_Silent(), gold={"backend": _Silent(), "n": 1})
    assert one.gold_for("dialogue").n == 1  # options win over the defaults
