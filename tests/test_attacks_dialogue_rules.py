from __future__ import annotations

import pytest

from robusteval import Sample, attacks

S = Sample(id="x", task="dialogue", response="i would love to , but i am busy tonight .",
           context=("hi .", "do you want to go out tonight ?"))

EXACT = {
    "speaker-tag-teacher": "teacher: i would love to , but i am busy tonight .",
    "speaker-tag-agent": "agent: i would love to , but i am busy tonight .",
    "speaker-tag-user": "user: i would love to , but i am busy tonight .",
    "generic-hello": "Hello",
    "generic-cucumber": "Cucumber",
    "generic-idk": "I don't know",
    "generic-idk-wdyt": "I don't know, what do you think?",
    "generic-idk-wdyt-i-think": "I don't know, what do you think? I think",
    "generic-repeat-request": "I'm sorry, can you repeat?",
    "generic-i-will-do": "I will do",
    "generic-fantastic": "fantastic! how are you?",
    "no-punctuation": "i would love to but i am busy tonight",
    "no-stopwords": "love , busy tonight .",
    "only-nouns": "tonight",
    "only-nouns-verbs": "i love i tonight",
    "reversed-words": ". tonight busy am i but , to love would i",
    "previous-utterance": "do you want to go out tonight ?",
    "previous-utterance-prefix": "do you want to go out tonight ? i would love to , but i am busy tonight .",
}


def test_twenty_dialogue_rule_attacks_registered_with_metadata() -> None:
    fam = [n for n in attacks.names() if attacks.ATTACKS.info(n)["family"] == "dialogue-rules"]
    assert len(fam) == 20
    for n in fam:
        d = attacks.describe(n)
        assert d["direction"] == "R-" and "Vasselli" in d["source"] and d["targets"]


@pytest.mark.parametrize(("name", "expected"), sorted(EXACT.items()))
def test_deterministic_rules_exact_output(name: str, expected: str) -> None:
    r = attacks.load(name).run(S)
    assert r.applicable and r.adversarial == expected and r.direction == "R-" and r.expected == "low"


def test_jumbled_words_is_a_seeded_permutation() -> None:
    a = attacks.load("jumbled-words", seed=1).run(S).adversarial
    assert sorted(a.split()) == sorted(S.response.split()) and a != S.response
    assert a == attacks.load("jumbled-words", seed=1).run(S).adversarial
    outs = {attacks.load("jumbled-words", seed=k).run(S).adversarial for k in range(5)}
    assert len(outs) > 1


def test_repeat_words_duplicates_ceil_p_n_distinct_positions() -> None:
    long = S.with_response(" ".join(f"w{i}" for i in range(23)))
    out = attacks.load("repeat-words", seed=3).run(long).adversarial.split()
    assert [w for i, w in enumerate(out) if i == 0 or w != out[i - 1]] == long.response.split()
    assert len(out) - 23 == 5  # ceil(0.2 * 23)
    assert len({w for i, w in enumerate(out) if i and w == out[i - 1]}) == 5
    assert out == attacks.load("repeat-words", seed=3).run(long).adversarial.split()
    assert attacks.load("repeat-words", p=0.0).run(S).applicable is False


def test_not_applicable_is_reported_not_faked() -> None:
    r = attacks.load("only-nouns").run(S.with_response("oh , yes !"))
    assert not r.applicable and r.adversarial is None and "does not change" in r.note
    r = attacks.load("previous-utterance").run(Sample(id="n", task="dialogue", response="hi"))
    assert not r.applicable
