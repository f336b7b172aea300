from __future__ import annotations

import pytest

from robusteval import Sample, attacks
from robusteval.attacks.aspect import ASPECTS, ancestors, related
from robusteval.attacks.base import AttackResult
from robusteval.attacks.criteria import Criteria, expectation_test, victim_aspect

TEXT = ("The mayor opened the new bridge in Paris on Monday. Critics said it was too expensive. "
        "The city paid 5 million dollars for it.")
S = Sample(id="a", task="summarization", response=TEXT, context=("The mayor of London opened a bridge on Tuesday.",))

EXACT = {
    "aspect-negation": "The mayor did not open the new bridge in Paris on Monday. Critics said it was too expensive. "
                       "The city paid 5 million dollars for it.",
    "aspect-incorrect-verb-form": "The mayor opened the new bridge in Paris on Monday. Critics said it was too "
                                  "expensive. The city paying 5 million dollars for it.",
    "aspect-hypernym": "The politician opened the new bridge in Paris on Monday. Critics said it was too expensive. "
                       "The city paid 5 million dollars for it.",
    "aspect-different-entity": "The mayor opened the new bridge in Paris on Tuesday. Critics said it was too "
                               "expensive. The city paid 5 million dollars for it.",
}


def test_eighteen_aspect_attacks_with_hierarchy_metadata() -> None:
    names = [n for n in attacks.names() if attacks.ATTACKS.info(n)["family"] == "aspect"]
    assert len(names) == 18
    rule = [n for n in names if not attacks.ATTACKS.get(n).needs_llm]
    assert len(rule) == 10
    d = attacks.describe("aspect-spelling-mistake")
    assert d["targets"] == ["Grammaticality", "Fluency", "Readability", "Overall_quality"]
    assert "Faithfulness" in d["keeps"] and "Fluency" not in d["keeps"]


def test_hierarchy() -> None:
    assert len(ASPECTS) == 11
    assert ancestors("Non-hallucination") == ["Non-hallucination", "Faithfulness", "Adequacy", "Overall_quality"]
    assert related("Fluency", "Grammaticality") and not related("Fluency", "Faithfulness")


@pytest.mark.parametrize(("name", "expected"), sorted(EXACT.items()))
def test_rule_perturbations_exact(name: str, expected: str) -> None:
    assert attacks.load(name).run(S).adversarial == expected


def test_sentence_level_perturbations_properties() -> None:
    sents = ["The mayor opened the new bridge in Paris on Monday.", "Critics said it was too expensive.",
             "The city paid 5 million dollars for it."]
    ex = attacks.load("aspect-sentence-exchange").run(S).adversarial
    assert ex != TEXT
    assert sorted(x.strip(".") for x in ex.split(". ")) == sorted(x.strip(".") for x in sents)
    de = attacks.load("aspect-sentence-deletion").run(S).adversarial
    assert sum(s in de for s in sents) == 2
    rep = attacks.load("aspect-repetition").run(S).adversarial
    assert any(rep.count(s) == 2 for s in sents)
    con = attacks.load("aspect-improper-connective").run(S).adversarial
    assert any(w in con for w in ("However,", "Nevertheless,", "Therefore,", "Thus,", "As a result,",
                                  "Consequently,", "On the contrary,", "In contrast,"))
    sp = attacks.load("aspect-spelling-mistake").run(S).adversarial
    diff = [(a, b) for a, b in zip(TEXT.split(), sp.split(), strict=True) if a != b]
    assert len(diff) == 1
    old, new = diff[0]
    assert sorted(old) == sorted(new) or len(new) == len(old) - 1  # two letters swapped, or one dropped
    we = attacks.load("aspect-word-exchange").run(S).adversarial
    assert sorted(we.split()) == sorted(TEXT.split()) and we != TEXT


def test_negation_both_ways() -> None:
    neg = attacks.load("aspect-negation")
    assert neg.run(S.with_response("She is not happy.")).adversarial == "She is happy."
    assert neg.run(S.with_response("They will come tomorrow.")).adversarial == "They will not come tomorrow."


def test_single_sentence_texts_are_not_applicable_for_sentence_ops() -> None:
    one = S.with_response("A single sentence here.")
    for n in ("aspect-sentence-exchange", "aspect-sentence-deletion", "aspect-improper-connective"):
        assert not attacks.load(n).run(one).applicable


class Rewriter:
    name = "scripted"
    calls = 0
    cache_hits = 0

    def generate(self, prompts, n=1, temperature=0.0, max_new_tokens=32, seed=0):
        self.prompts = prompts
        return [["Rewritten: The bridge was opened by the mayor on Monday."] for _ in prompts]


def test_llm_perturbation_prompt_and_output() -> None:
    gen = Rewriter()
    r = attacks.load("aspect-passive-voice", generator=gen).run(S)
    assert r.adversarial == "The bridge was opened by the mayor on Monday."
    assert "passive voice" in gen.prompts[0] and f"Text: {TEXT}" in gen.prompts[0]
    assert r.meta["aspect"] == "Fluency"


def test_directional_and_invariance_expectations() -> None:
    assert expectation_test("Grammaticality", "Fluency") == "directional"
    assert expectation_test("Grammaticality", "Overall_quality") == "directional"
    assert expectation_test("Grammaticality", "Faithfulness") == "invariance"
    assert expectation_test("Fluency", "Grammaticality") is None
    c = Criteria()
    r = AttackResult("aspect-spelling-mistake", "aspect", "s", "R-", "o", "x", "low",
                     victim_before=80, victim_after=60, meta={"aspect": "Grammaticality"})
    assert c.judge(r, None, "Fluency")["expectation"] is False  # dropped: fine
    assert c.judge(r, None, "Faithfulness")["expectation"] is True  # moved on an unrelated aspect
    r.victim_after = 80.2
    assert c.judge(r, None, "Faithfulness")["expectation"] is False


def test_victim_aspect_from_metric_attributes() -> None:
    class J:
        aspect = "Coherence"

    class U:
        dimension = "consistency"

    assert victim_aspect(J()) == "Coherence" and victim_aspect(U()) == "Faithfulness"
    assert victim_aspect(object()) == "Overall_quality"
