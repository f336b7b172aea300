from __future__ import annotations

from robusteval import Sample, attacks
from robusteval.attacks.baselines import DATA

S = Sample(id="q", task="dialogue", response="I do not think John will come , he is busy .",
           context=("Is Mary coming to the party tonight?",))


def test_eight_baselines_registered() -> None:
    names = [n for n in attacks.names() if attacks.ATTACKS.info(n)["family"] == "adveval-baselines"]
    assert sorted(names) == sorted([
        "adveval-synonym", "adveval-extension", "adveval-contraction", "adveval-jumble",
        "adveval-negate-previous", "adveval-question-to-assertion", "adveval-change-question-word",
        "adveval-change-name"])
    assert {attacks.ATTACKS.info(n)["direction"] for n in names} == {"R+", "R-"}


def test_exact_rewrites() -> None:
    assert attacks.load("adveval-contraction").run(S).adversarial == "I don't think John will come , he is busy ."
    assert attacks.load("adveval-change-name").run(S).adversarial == "I do not think Mary will come , he is busy ."
    assert attacks.load("adveval-negate-previous").run(S).adversarial == "Is not Mary coming to the party tonight?"
    q2a = attacks.load("adveval-question-to-assertion")
    assert q2a.run(S.with_response("Did he go to the market?")).adversarial == "He went to the market."
    assert q2a.run(S.with_response("Can you help me?")).adversarial == "You can help me."
    assert not q2a.run(S).applicable  # not a question


def test_contraction_never_expands_and_extension_expands() -> None:
    """Chen et al. 2024, §4 Baselines: the invariant perturbations are "synonym adjective,
    expansion, contraction" -- contraction and expansion are two baselines, so contraction
    must not expand (a text with nothing to contract is not applicable)."""
    contracted = S.with_response("It's fine, I'm here.")
    assert attacks.load("adveval-contraction").run(contracted).outcome == "skipped"
    ext = attacks.load("adveval-extension")
    assert ext.run(contracted).adversarial == "It is fine, I am here."
    tokenized = S.with_response("i 'm fine . it 's a big house , don 't worry . we wo n't go .")
    assert ext.run(tokenized).adversarial == "i am fine . it is a big house , do not worry . we will not go ."
    assert ext.run(S.with_response("John's car can't start.")).adversarial == "John's car cannot start."
    assert ext.run(S).outcome == "skipped"  # nothing to expand; never an appended question
    assert not any(q in (ext.run(contracted).adversarial or "") for q in DATA["extensions"])


def test_synonym_adjective_keeps_sense_and_pos() -> None:
    """Chen et al. 2024, §4: the R+ rule baselines keep the label ("synonym adjective"): only
    adjectives change, to a synonym of the same (most frequent) sense, still an adjective --
    never "Josh need to buy a tab and doesn't jazz"."""
    syn = attacks.load("adveval-synonym")
    r = syn.run(S.with_response("The movie was good and the food was delicious ."))
    assert r.adversarial == "The movie was good and the food was delightful ."
    josh = S.with_response("Josh needs to buy a tablet and does not know which brand to choose .")
    assert syn.run(josh).outcome == "skipped"  # no adjective: nouns and verbs are left alone
    assert syn.run(S).outcome == "skipped"  # "busy": no synonym passes the sense check


def test_seeded_choices() -> None:
    cq = attacks.load("adveval-change-question-word").run(S.with_response("Where did you park the car?"))
    assert cq.adversarial.endswith(" did you park the car?") and not cq.adversarial.startswith("Where")
    adj = S.with_response("The movie was good and the food was delicious .")
    syn = attacks.load("adveval-synonym").run(adj)
    changed = [(a, b) for a, b in zip(adj.response.split(), syn.adversarial.split(), strict=True) if a != b]
    assert syn.direction == "R+" and len(changed) == 1
    jum = attacks.load("adveval-jumble").run(S).adversarial
    assert sorted(jum.split()) == sorted(S.response.split())
