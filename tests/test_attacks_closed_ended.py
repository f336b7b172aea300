from __future__ import annotations

import random

import pytest

from robusteval import Sample, attacks
from robusteval.attacks.closed_ended import shift_numeric

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
