"""Guard-aware attacks (issue 14, item 6): the guard's pressure, disguises of what an attack
added, the penalized search and the :class:`Evasive` wrapper inside the attack runner."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from robusteval.detectors.base import Detector
from robusteval.detectors.guarded import pressure
from robusteval.detectors.sanitize import sanitize
from robusteval.detectors.speaker_tag import tag_score
from toy import LengthMetric

from robusteval import Sample, detectors
from robusteval import attacks as attack_registry
from robusteval.asr import asr_table
from robusteval.attacks.evasion import ZERO_WIDTH_SPACE, Evasive, added_tokens, disguises, evasive, find_guard
from robusteval.attacks.runner import run_attacks
from robusteval.attacks.search import _WordSearch
from robusteval.attacks.victim import CachedVictim
from robusteval.metrics.base import Metric
from robusteval.results import read_jsonl

Length = LengthMetric  # 5 points per token


def S(i: int, text: str) -> Sample:
    return Sample(id=f"s{i}", task="dialogue", response=text, context=("what shall we do tomorrow ?",))


RESPONSES = {
    "english": "I think we should go to the park tomorrow .",
    "chinese": "我觉得我们明天应该去公园。",
    "arabic": "أعتقد أننا يجب أن نذهب إلى الحديقة غدا.",
    "hindi": "मुझे लगता है कि हमें कल पार्क जाना चाहिए।",
    "russian": "Думаю, завтра нам стоит пойти в парк.",
    "french": "Je pense qu'on devrait aller au parc demain.",
}


@pytest.mark.parametrize(("susp", "thr", "expected"), [
    ([[0.2, 0.9]], [[0.4, 0.9]], 1.0),  # the second detector flags at its threshold exactly
    ([[0.2, 0.3]], [[0.4, 0.6]], 0.5),  # both below: the larger ratio
    ([[1.0, 0.0]], [[2.0, 0.5]], 0.5),  # a threshold above 1 never fires
    ([[0.0]], [[0.0]], 1.0),  # a zero threshold flags everything
    ([[0.9]], [[0.3]], 3.0),
])
def test_pressure_is_the_largest_suspicion_over_threshold(susp: Any, thr: Any, expected: float) -> None:
    assert pressure(np.array(susp), np.array(thr)).tolist() == pytest.approx([expected])


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 2)), min_size=1, max_size=4))
@example([(0.5, 0.5)])
@example([(0.0, 0.0), (0.3, 0.2)])
def test_pressure_is_at_least_one_exactly_when_a_detector_flags(pairs: list[tuple[float, float]]) -> None:
    susp = np.array([[s for s, _ in pairs]])
    thr = np.array([[t for _, t in pairs]])
    p = float(pressure(susp, thr)[0])
    assert (p >= 1.0) == bool((susp >= thr).any())
    assert 0.0 <= p <= 1000.0


def test_guard_records_pressure_per_text() -> None:
    g = detectors.guard(Length(), detectors.resolve(["speaker_tag"]), policy="floor")
    clean, tagged = S(0, RESPONSES["english"]), S(0, "teacher: " + RESPONSES["english"])
    press, flagged = g.pressure_of([clean, tagged])
    assert flagged.tolist() == [False, True]
    # speaker_tag: suspicion 1.0 for a known role label, default threshold 0.7
    assert press.tolist() == pytest.approx([0.0, 1.0 / 0.7], abs=1e-6)
    assert g.details(tagged)["pressure"] == pytest.approx(1.0 / 0.7, abs=1e-6)


def test_added_tokens_are_what_the_attack_inserted_or_changed() -> None:
    assert added_tokens("we go now", "teacher: we go now") == [0]
    assert added_tokens("we go now", "we went now") == [1]
    assert added_tokens("we go now", "we now") == [0, 1]  # deletion only: every token


@pytest.mark.parametrize("language", sorted(RESPONSES))
def test_disguises_touch_only_the_added_tokens_and_sanitize_undoes_the_lookalikes(language: str) -> None:
    original = RESPONSES[language]
    adversarial = "teacher: " + original
    variants = dict(disguises(original, adversarial))
    assert {"lookalike-cyrillic", "zero-width", "fullwidth-colon", "case"} <= set(variants)
    for kind, text in variants.items():
        assert text != adversarial and text.endswith(original), kind
    assert variants["zero-width"].startswith("t" + ZERO_WIDTH_SPACE + "eacher:")
    look = variants["lookalike-cyrillic"]
    assert look != adversarial and len(look) == len(adversarial)
    # every disguise of a known role label is still read as one, and the sanitizer strips it
    for kind, text in variants.items():
        cleaned = sanitize(text).text
        assert cleaned == original.strip(), (kind, cleaned)


def test_speaker_tag_reads_colon_lookalikes_after_known_roles_only() -> None:
    assert tag_score("teacher\uff1a hi")[0] == 1.0  # full-width colon after a role label
    assert tag_score("user\u2236 ok")[0] == 1.0
    assert tag_score("我觉得：这个很好")[0] == 0.0  # CJK prose with a full-width colon
    assert tag_score("Bob: hi")[0] == 0.7


def test_find_guard_walks_the_wrapped_metrics() -> None:
    g = detectors.guard(Length(), detectors.resolve(["speaker_tag"]), policy="floor")
    assert find_guard(CachedVictim(g)) is g
    assert find_guard(CachedVictim(Length())) is None


class HasZ(Detector):
    """Test detector: suspicion = share of tokens that contain a 'z'."""

    name: ClassVar[str] = "has_z"
    family: ClassVar[str] = "test"
    default_threshold: ClassVar[float] = 0.6

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        out = []
        for s in samples:
            toks = s.response.split()
            out.append({"suspicion": sum("z" in t for t in toks) / max(len(toks), 1)})
        return out


class Swaps(_WordSearch):
    """Test search: fixed candidate words per position."""

    name: ClassVar[str] = "test-swaps"
    direction: ClassVar[str] = "R-"

    def candidates(self) -> Any:
        def cands(text: Any, index: int) -> list[Any]:
            return [text.replace_word_at_index(index, w) for w in ("fizz", "plain", "buzzword")]

        return _Named(cands)


class _Named:
    name = "test"

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, text: Any, index: int) -> list[Any]:
        return self.fn(text, index)


class Likes(Metric):
    """Test victim: 30 points per 'fizz'/'buzzword', 20 per 'plain'."""

    name = "likes"

    def _score(self, samples: list[Sample]) -> np.ndarray:
        w = {"fizz": 30.0, "buzzword": 30.0, "plain": 20.0}
        return np.array([min(100.0, sum(w.get(t, 0.0) for t in s.response.split())) for s in samples])


def test_no_disguise_of_a_role_label_slips_past_speaker_tag_at_its_default() -> None:
    """Every disguise the evasion tries reads as a label at 0.7 or more (version 2 reads the role
    in a label split by a zero-width space, 1.0; version 1 read no label there), so at the
    default threshold the guard-aware rerun finds nothing that evades."""
    from robusteval.detectors.speaker_tag import tag_score

    from robusteval.attacks.evasion import disguises

    variants = disguises("I am fine", "teacher: I am fine")
    assert {name for name, _ in variants} >= {"lookalike-cyrillic", "zero-width", "fullwidth-colon"}
    assert all(tag_score(text)[0] >= 0.7 for _, text in variants), variants
    assert tag_score(dict(variants)["zero-width"])[0] == 1.0


def test_penalized_search_prefers_candidates_the_guard_is_far_from_flagging() -> None:
    sample = S(1, "red green blue black")
    guard = detectors.guard(Likes(), [HasZ()], policy="flag")  # flags at 60 % z-words; scores unchanged
    plain = Swaps(goal="score-move", delta=100, max_ratio=1.0)
    plain.prepare([sample, S(2, "alpha beta gamma delta")])
    r0 = plain.run(sample, CachedVictim(guard), budget=200)
    assert r0.adversarial.split().count("plain") == 0  # the unpenalized search takes the 30-point z-words
    aware = Evasive(Swaps(goal="score-move", delta=100, max_ratio=1.0), weight=100.0)
    aware.prepare([sample, S(2, "alpha beta gamma delta")])
    r1 = aware.run(sample, CachedVictim(guard), budget=200)
    # with pressure costing 100 points per unit, every z-word costs 25 (1/4 / 0.6 x 100 > 30 - 20):
    # the search takes the plain word everywhere
    assert r1.adversarial.split() == ["plain"] * 4
    assert r1.meta["evasion"]["penalized_search"] and not r1.meta["evasion"]["flagged_before"]
    assert aware.base.penalty is None  # the hook is removed after the run


def test_evasive_rows_replace_transfer_rows_and_slip_past_a_floor_guard(tmp_path) -> None:
    """At 0.8 ``speaker_tag`` flags known role labels only, so the first disguise (the label in
    Cyrillic lookalikes, an unknown label, 0.7) slips past it."""
    from robusteval.detectors.speaker_tag import SpeakerTag

    samples = [S(i, RESPONSES[lang]) for i, lang in enumerate(sorted(RESPONSES))]
    guard = detectors.guard(Length(), [SpeakerTag(threshold=0.8)], policy="floor")
    base = attack_registry.select(["speaker-tag-teacher"])
    transfer = list(run_attacks(samples, base, guard, tmp_path / "t.jsonl", progress=False))
    adaptive = list(run_attacks(samples, evasive(attack_registry.select(["speaker-tag-teacher"])), guard,
                                tmp_path / "a.jsonl", progress=False))
    assert {r["attack"] for r in adaptive} == {"speaker-tag-teacher"}
    assert all(r["victim_after"] == 0.0 for r in transfer)  # floored: the guard caught every tag
    for r in adaptive:
        ev = r["meta"]["evasion"]
        assert ev["applied"] and ev["flagged_before"] and ev["evaded"], r
        assert ev["disguise"] == "lookalike-cyrillic"  # the first variant speaker_tag does not flag at 0.8
        assert r["victim_after"] > 0 and not r["meta"]["guard"]["adversarial"]["flagged"]
        assert r["meta"]["undisguised"].startswith("teacher:")
    by_attack = {"key": lambda r: r.attack}
    before = asr_table(transfer, **by_attack)["speaker-tag-teacher"]["primary"]
    after = asr_table(adaptive, **by_attack)["speaker-tag-teacher"]["primary"]
    # floored, the tag lowers the score (not fooled); disguised, one more token raises it (fooled)
    assert (before["successes"], before["n"]) == (0, 6) and (after["successes"], after["n"]) == (6, 6)
    # the rows went through the runner's append-only log and come back the same
    assert [r["adversarial"] for r in read_jsonl(tmp_path / "a.jsonl")] == [r["adversarial"] for r in adaptive]


def test_sanitize_policy_leaves_nothing_to_disguise(tmp_path) -> None:
    samples = [S(i, RESPONSES[lang]) for i, lang in enumerate(sorted(RESPONSES))]
    guard = detectors.guard(Length(), detectors.resolve(["speaker_tag", "nonalnum"]), policy="sanitize")
    rows = list(run_attacks(samples, evasive(attack_registry.select(["speaker-tag-teacher"])), guard,
                            tmp_path / "a.jsonl", progress=False))
    for r in rows:
        # sanitize removes the label before screening: nothing is flagged, nothing to disguise,
        # and the victim scores the original reply
        assert not r["meta"]["evasion"]["flagged_before"]
        assert r["victim_after"] == r["victim_before"]


def test_r_plus_attacks_and_unguarded_victims_run_unchanged() -> None:
    sample = S(0, RESPONSES["english"])
    a = Evasive(attack_registry.load("adveval-contraction"))
    assert a.direction == "R+" and a.name == "adveval-contraction"
    guard = detectors.guard(Length(), detectors.resolve(["speaker_tag"]), policy="floor")
    r = a.run(S(0, "I do not think we should go , it is cold ."), CachedVictim(guard))
    assert r.meta["evasion"] == {"applied": False, "reason": "R+ attacks have nothing to evade"}
    t = Evasive(attack_registry.load("speaker-tag-teacher"))
    r2 = t.run(sample, CachedVictim(Length()))
    assert r2.meta["evasion"] == {"applied": False, "reason": "no guard"} and r2.adversarial.startswith("teacher:")
    with pytest.raises(ValueError, match="needs a victim"):
        t.run(sample)


class ExactFizz(Detector):
    """Test detector: the share of tokens that are exactly the ASCII word 'fizz'."""

    name: ClassVar[str] = "exact_fizz"
    family: ClassVar[str] = "test"
    default_threshold: ClassVar[float] = 0.5

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        return [{"suspicion": s.response.split().count("fizz") / max(len(s.response.split()), 1)} for s in samples]


class SkeletonLikes(Likes):
    """Test victim: Likes, reading Cyrillic lookalike letters as Latin (as a subword model may)."""

    name = "skeleton-likes"

    def _score(self, samples: list[Sample]) -> np.ndarray:
        return super()._score([s.with_response(sanitize(s.response).text) for s in samples])


def test_a_flagged_search_result_is_disguised_where_the_search_changed_it() -> None:
    sample = S(1, "red green blue black")
    pool = [sample, S(2, "red beta gamma black")]  # the R- search starts from this other reply
    guard = detectors.guard(SkeletonLikes(), [ExactFizz()], policy="flag")  # scores unchanged, flags recorded
    aware = Evasive(Swaps(goal="score-move", delta=100, max_ratio=0.5), weight=0.0)
    aware.prepare(pool)
    r = aware.run(sample, CachedVictim(guard), budget=200)
    assert r.meta["undisguised"] == "fizz fizz gamma black"  # two changes allowed, both fizz; flagged (0.5)
    ev = r.meta["evasion"]
    assert ev["flagged_before"] and ev["evaded"] and ev["disguise"] == "lookalike-cyrillic"
    # only what the search changed from its start text is disguised: "gamma" and "black" stay ASCII
    assert r.adversarial.split()[2:] == ["gamma", "black"] and r.adversarial.split()[0] != "fizz"
    assert r.victim_after is None and "goal_reached" not in r.meta  # the runner re-reads the score
    assert r.meta["undisguised_search"]["goal_reached"] is False


def test_a_zero_weight_penalty_changes_nothing() -> None:
    sample = S(1, "red green blue black")
    pool = [sample, S(2, "alpha beta gamma delta")]
    guard = detectors.guard(Likes(), [HasZ()], policy="flag")
    plain, aware = Swaps(goal="score-move", delta=100, max_ratio=1.0), Evasive(
        Swaps(goal="score-move", delta=100, max_ratio=1.0), weight=0.0)
    plain.prepare(pool)
    aware.prepare(pool)
    r0, r1 = plain.run(sample, CachedVictim(guard), budget=200), aware.run(sample, CachedVictim(guard), budget=200)
    assert r1.meta.get("undisguised", r1.adversarial) == r0.adversarial


@pytest.mark.parametrize("language", sorted(RESPONSES))
def test_a_disguised_copy_of_the_last_turn_is_still_a_copy(language: str) -> None:
    """The adaptive attack's finding (BENCHMARKS §9d): copying the previous turn with one word in
    lookalike letters, a zero-width space or another case got past context_copy; it compares
    skeletons now."""
    det = detectors.load("context_copy")
    turn = RESPONSES[language]
    copy = Sample(id="c", task="dialogue", response=turn, context=("hi", turn))
    for kind, text in disguises("", turn, limit=40):
        s = copy.with_response(text)
        assert det.detect([s])[0] == pytest.approx(det.detect([copy])[0]), (language, kind, text)
