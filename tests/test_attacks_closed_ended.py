from __future__ import annotations

import random

import pytest

from robusteval import Sample, attacks
from robusteval.attacks.closed_ended import dstc7_count, dstc7_negate
from robusteval.nlp import shift_numeric

S = Sample(id="a", task="dialogue", response="Yes, Barack Obama visited Paris in May 2012 with 3 advisers.",
           context=("Did Joe Biden go to London in 2012?",), fact="Obama visited Paris in May 2012.")


@pytest.mark.parametrize(("name", "old", "new"), [
    ("fact-swap-entity", "Barack Obama", "Joe Biden"),
    ("fact-swap-place", "Paris", "London"),
])
def test_swap_takes_same_type_mention_from_context(name: str, old: str, new: str) -> None:
    r = attacks.load(name).run(S)
    assert r.adversarial == S.response.replace(old, new) and r.direction == "R-"


def test_number_and_date_shift_only_the_key_span() -> None:
    num = attacks.load("fact-swap-number").run(S).adversarial
    prefix, suffix = "Yes, Barack Obama visited Paris in May 2012 with ", " advisers."
    assert num.startswith(prefix) and num.endswith(suffix)
    assert num[len(prefix):-len(suffix)].isdigit() and num[len(prefix):-len(suffix)] != "3"
    date = attacks.load("fact-swap-date").run(S).adversarial
    assert date != S.response and date.endswith("2012 with 3 advisers.") and "May" not in date
    assert date == attacks.load("fact-swap-date").run(S).adversarial  # seeded per sample


def test_shift_numeric_rules() -> None:
    rng = random.Random(0)
    assert shift_numeric("in 1999", rng) in {f"in {y}" for y in (1996, 1997, 1998, 2000, 2001, 2002)}
    assert shift_numeric("on Monday", rng).startswith("on ") and "Monday" not in shift_numeric("on Monday", rng)
    assert shift_numeric("no digits", rng) is None


def test_not_applicable_without_the_fact_type() -> None:
    r = attacks.load("fact-swap-place").run(S.with_response("I like it a lot."))
    assert not r.applicable


def test_fact_swap_never_repeats_a_name_the_response_already_has() -> None:
    """Liu et al. §3: the swapped fact must contradict the context, not turn "Josh will call
    Brian" into "Josh will call Josh" (a mention the response already names)."""
    s = Sample(id="j", task="dialogue", response="Josh will call Brian after work.",
               context=("Josh called Brian and Maria Lopez on Monday.",))
    outs = {attacks.load("fact-swap-entity", seed=seed).run(s).adversarial for seed in range(6)}
    assert outs == {"Maria Lopez will call Brian after work."}


@pytest.mark.parametrize(("text", "expected"), [
    ("there's only one person man", "there is not only one person man"),
    ("there's only a single man in the room.", "there is not only a single man in the room."),
    ("he can see the dog", "he can not see the dog"),
    ("The man is sitting.", "The man is not sitting."),
    ("I don't know", None),
    ("I can't go there.", None),  # already negated: never "can not't"
    ("We met in May and he is here.", "We met in May and he is not here."),  # May the month
])
def test_dstc7_negation(text: str, expected: str | None) -> None:
    """Liu et al. §3.2 (DSTC7-ADV): "we reverse the semantics of responses ... by negation
    transformations, such as "can" -> "can not", "is" -> "is not", "only" -> "not only"";
    Table 1: "there's only one person man" -> "there is not only one person man"."""
    assert dstc7_negate(text) == expected
    r = attacks.load("dstc7-negation").run(Sample(id="d", task="dialogue", response=text))
    assert r.adversarial == expected and r.outcome == ("attacked" if expected else "skipped")


def test_dstc7_count() -> None:
    """Liu et al., Table 1 (DSTC7-ADV): "...one person..." becomes "...two persons..." /
    "...seven persons..." -- another count, the noun made plural."""
    for seed in range(5):
        out = dstc7_count("there's only one person man", random.Random(seed))
        count, noun = out.split()[2:4]
        assert count in {"two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}
        assert noun in {"persons", "people"}
    assert dstc7_count("no count here", random.Random(0)) is None
    assert dstc7_count("the one I like", random.Random(0)) is None  # a pronoun, not a count
    out = dstc7_count("In 2019 there were 3 cats", random.Random(0))
    assert out.startswith("In 2019 there were ") and not out.endswith(" 3 cats")  # the year stays
    assert attacks.describe("dstc7-count")["family"] == "closed-ended"


class FiveResponses:
    name = "scripted"
    calls = 0
    cache_hits = 0

    def __init__(self, text: str) -> None:
        self.text = text

    def generate(self, prompts, n=1, temperature=0.0, max_new_tokens=32, seed=0):
        self.prompts = prompts
        return [[self.text] for _ in prompts]


def test_kdconv_adv_construction() -> None:
    """Liu et al. §3.1 (KdConv-ADV): GPT-4 generates five candidates from the dialogue history,
    "we intentionally alter key candidate information to be irrelevant or even false", and
    "we select three candidates with the lowest BLEU scores compared to the reference"."""
    s = Sample(id="k", task="dialogue", response="He was born in Tokyo in 1990.",
               reference="He was born in Tokyo in 1990.",
               context=("Where was Ken Sato born?", "Ken Sato was born in Tokyo, not in Osaka."))
    gen = FiveResponses(" He was born in Tokyo.\n2. Tokyo, in 1990.\n3. I think he was born in Tokyo in 1990.\n"
                        "4. Ken comes from Tokyo.\n5. He is not sure.")
    a = attacks.load("kdconv-adv", generator=gen)
    r = a.run(s)
    assert "Dialogue history:\nWhere was Ken Sato born?" in gen.prompts[0] and "5 different" in gen.prompts[0]
    kept = r.meta["kept"]
    assert len(kept) == 3 and r.adversarial == kept[0] and r.outcome == "attacked"
    import sacrebleu

    bleu = [sacrebleu.sentence_bleu(k, [s.reference]).score for k in kept]
    assert bleu == sorted(bleu)
    # every kept candidate had its key fact falsified: Tokyo -> Osaka, 1990 shifted, or negated
    assert all(("Tokyo" not in k) or ("1990" not in k and any(ch.isdigit() for ch in k)) or " not " in k
               for k in kept)
    with pytest.raises(ValueError, match="keep"):
        attacks.load("kdconv-adv", generator=gen, keep=6)
