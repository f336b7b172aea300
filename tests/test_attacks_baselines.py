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
    assert attacks.load("adveval-contraction").run(S.with_response("It's fine, I'm here.")).adversarial == \
        "It is fine, I am here."
    assert attacks.load("adveval-change-name").run(S).adversarial == "I do not think Mary will come , he is busy ."
    assert attacks.load("adveval-negate-previous").run(S).adversarial == "Is not Mary coming to the party tonight?"
    q2a = attacks.load("adveval-question-to-assertion")
    assert q2a.run(S.with_response("Did he go to the market?")).adversarial == "He went to the market."
    assert q2a.run(S.with_response("Can you help me?")).adversarial == "You can help me."
    assert not q2a.run(S).applicable  # not a question


def test_seeded_choices() -> None:
    ext = attacks.load("adveval-extension").run(S).adversarial
    assert ext.startswith(S.response) and ext[len(S.response) + 1:] in DATA["extensions"]
    cq = attacks.load("adveval-change-question-word").run(S.with_response("Where did you park the car?"))
    assert cq.adversarial.endswith(" did you park the car?") and not cq.adversarial.startswith("Where")
    syn = attacks.load("adveval-synonym").run(S)
    changed = [(a, b) for a, b in zip(S.response.split(), syn.adversarial.split(), strict=False) if a != b]
    assert syn.direction == "R+" and 1 <= len(changed) <= 2
    jum = attacks.load("adveval-jumble").run(S).adversarial
    assert sorted(jum.split()) == sorted(S.response.split())
