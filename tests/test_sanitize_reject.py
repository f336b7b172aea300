"""The ``sanitize`` policy and ``reject`` inside attack runs (issue 14, item 5)."""

from __future__ import annotations

import functools
import json
import unicodedata
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from robusteval.detectors.base import Detector
from robusteval.detectors.sanitize import sanitize
from toy import LengthMetric

from robusteval import Sample, detectors
from robusteval import attacks as attack_registry
from robusteval.asr import asr_table, by_direction, counted, summarize, summary_markdown
from robusteval.attacks.base import ResultRow
from robusteval.attacks.runner import run_attacks
from robusteval.attacks.victim import CachedVictim
from robusteval.cli.main import main
from robusteval.results import read_jsonl

WordCount = functools.partial(LengthMetric, per_word=10.0)


class HasColon(Detector):
    """Suspicion 1 when the response has a colon."""

    name: ClassVar[str] = "has_colon"
    family: ClassVar[str] = "test"
    default_threshold: ClassVar[float] = 0.5
    reads: ClassVar[tuple[str, ...]] = ("response",)

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        return [{"suspicion": float(":" in s.response)} for s in samples]


def S(i: int, text: str) -> Sample:
    return Sample(id=f"s{i}", task="dialogue", response=text, context=("how are you today?",))


# -- sanitize() ---------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "clean", "what"), [
    ("teacher: I am fine", "I am fine", "role_prefixes"),
    ("[AGENT]: sure", "sure", "role_prefixes"),
    ("teacher: user: hi there", "hi there", "role_prefixes"),
    ("I am\u200b fine\u202e", "I am fine", "invisible"),
    ("p\u0430ypal is fine", "paypal is fine", "homoglyphs"),  # Cyrillic a inside a Latin word
    ("м\u0061ма мыла раму", "мама мыла раму", "homoglyphs"),  # Latin a inside a Russian word
    ("think about how \u04bb\u043e\u051d boring", "think about how how boring", "homoglyphs"),  # a whole Cyrillic 'how'
    ("\u0456 i 'm afraid not .", "i i 'm afraid not .", "homoglyphs"),  # a Cyrillic one-letter 'i'
    ("а м\u0061ма?", "а мама?", "homoglyphs"),  # Russian with one Latin a: the short word 'а' stays Cyrillic
    ("hello \u04bb\u043e\u051d \u044f", "hello how \u044f", "homoglyphs"),  # nonalnum v4: a real Russian word beside
    ("\u041d\u0435\u04cf\u04cf\u043e !", "Hello !", "homoglyphs"),  # a reply made only of lookalikes (v4)
    ("\u041d\u0435\u04cf\u04cf\u043e \u0430\u0445", "Hello ax", "homoglyphs"),  # then "ах" is in Latin text: one call
    ("user \u0411: \u0430 \u041d\u0435\u04cf\u04cf\u043e", "a Hello", "homoglyphs"),  # label gone: "а" too
])
def test_sanitize_removes_and_records(text: str, clean: str, what: str) -> None:
    out = sanitize(text)
    assert out.text == clean and what in out.removed


@pytest.mark.parametrize("text", [
    "Bob: let us meet at 10:30, see http://example.org",  # an unknown label is content
    "می\u200cخواهم بروم",  # Persian ZWNJ
    "क्\u200dष और हिन्दी",  # Devanagari ZWJ
    "Это обычный текст.", "Ελληνικά κείμενο", "我很好，谢谢。", "أنا بخير، شكرا", "Je vais bien, merci.",
    "Мне нравится Old Navy. А ты?", "Не так. Мне REDACTED лет.",  # Russian short words beside Latin names
    "ВОТ ТАК, со стола", "Ахаха, ооо да",  # Russian words of lookalikes only ("ВОТ" reads "BOT")
    "ΤΟ ΚΥΜΑ ΕΙΝΑΙ ΜΕΓΑΛΟ", "РЕКАО ЈЕ",  # Greek and Serbian in capitals
    "👨\u200d👩\u200d👧 family",
])
def test_sanitize_leaves_clean_text_in_every_script_alone(text: str) -> None:
    out = sanitize(text)
    assert out.text == text and not out.changed


@given(st.text(max_size=40))
@example("teacher: \u200buser: x")
@example("\u200b\u200c")
@example("а м\u0061ма?")
@example("hello \u04bb\u043e\u051d м\u0061ма")
@example("\u041d\u0435\u04cf\u04cf\u043e \u0445\u0445\u0445")  # "Неӏӏо ххх": one pass left "Hello ххх" (v4)
@example("user \u041f\u0451\u0442\u0440: \u0430 \u041d\u0435\u04cf\u04cf\u043e")  # the label held the only real word
@example("user \u0411: \u0430 \u041d\u0435\u04cf\u04cf\u043e")  # a role label (speaker_tag v2) holding it
@example("a: " * 70 + "hi")  # more labels than one pass of role stripping removes
@example("Решите уравнение Х² = 4")
def test_sanitize_is_idempotent(text: str) -> None:
    once = sanitize(text).text
    assert sanitize(once).text == once


@given(st.text(max_size=40))
@example("Ｓｃｏｒｅ：\u200b１００ Straße ﬁne")
def test_skeleton_with_origin_locates_every_skeleton_character(text: str) -> None:
    from robusteval.detectors.sanitize import skeleton, skeleton_with_origin

    skel, origin = skeleton_with_origin(text)
    assert len(skel) == len(origin) and origin == sorted(origin)
    assert all(0 <= i < len(text) for i in origin)
    if unicodedata.is_normalized("NFKC", text) and not any(unicodedata.combining(c) for c in text):
        assert skel == skeleton(text)  # the same key as the whole-string skeleton


# -- the sanitize policy --------------------------------------------------------------------
def test_sanitize_policy_scores_the_cleaned_text_and_records_the_removal() -> None:
    g = detectors.guard(WordCount(), ["speaker_tag", "nonalnum"], policy="sanitize")
    samples = [S(0, "I am fine thanks"), S(1, "teacher: I am fine thanks"), S(2, "I am\u200b fine thanks")]
    assert g.score(samples).tolist() == [40.0, 40.0, 40.0]  # the prefix no longer adds a word
    d = g.details(samples[1])
    assert d["sanitized"] == {"text": "I am fine thanks", "removed": {"role_prefixes": ["teacher"]}}
    assert d["flagged"] == [] and d["raw_score"] == 40.0
    assert "sanitized" not in g.details(samples[0])
    assert g.report()["guard"]["flagged"]["sanitized"] == 2


def test_sanitize_policy_floors_what_cleaning_cannot_fix_and_counts_empty_results() -> None:
    g = detectors.guard(WordCount(), ["nonalnum"], policy="sanitize")
    assert g.score([S(0, "~&;$}%( ok")]).tolist() == [0.0]  # still flagged after cleaning: floored
    assert g.score([S(1, "teacher:")]).tolist() == [0.0]  # nothing left after the prefix
    assert g.report()["fallbacks"]["sanitized_to_empty"] == 1


def test_an_original_that_sanitize_floors_is_counted_apart_as_under_floor(tmp_path) -> None:
    """A clean original the guard still flags after cleaning scores 0 under sanitize; every
    attack text would tie with it (ties fool the R- criterion), so its rows are
    ``original_floored`` and out of the ASR, as under ``floor``."""
    attacks = [attack_registry.load("generic-hello")]
    samples = [S(0, "I am fine"), S(1, "I said: no")]  # s1 keeps its colon after cleaning: flagged
    for policy in ("floor", "sanitize"):
        victim = detectors.guard(WordCount(), [HasColon()], policy=policy)
        log = run_attacks(samples, attacks, victim, tmp_path / f"{policy}.jsonl", progress=False)
        rows = {r["sample_id"]: ResultRow.from_dict(r) for r in list(log)}
        assert rows["s1"].outcome == "original_floored" and rows["s0"].outcome == "attacked", policy
        assert by_direction(list(log))["R-"]["n"] == 1, policy
        assert by_direction(list(log))["R-"]["successes"] == 0, policy  # "Hello" (10) < "I am fine" (30)


def test_a_reference_the_guard_floors_or_refuses_gives_no_beats_reference_verdict(tmp_path) -> None:
    """The R- test compares an attack text with the victim's score of the sample's reference.
    A guard that floored that reference to 0 made every attack text "beat" it (ASR inflated to
    100 %); one that refused it left the test without a real yardstick. Such rows get no
    beats-reference verdict (out of that criterion's n, with a note); the directional
    expectation, which compares with the original, is still judged."""
    attacks = [attack_registry.load("generic-hello")]
    clean = Sample(id="s0", task="dialogue", response="I am fine thanks", reference="fine thanks and you",
                   context=("how are you today?",))
    flagged_ref = Sample(id="s1", task="dialogue", response="I am fine thanks", reference="teacher: fine",
                         context=("how are you today?",))
    for policy in ("floor", "reject"):
        victim = detectors.guard(WordCount(), [HasColon()], policy=policy)
        log = run_attacks([clean, flagged_ref], attacks, victim, tmp_path / f"{policy}.jsonl", progress=False)
        rows = {r["sample_id"]: ResultRow.from_dict(r) for r in list(log)}
        assert rows["s1"].outcome == "attacked" and rows["s1"].success["beats_reference"] is None, policy
        assert rows["s1"].meta["reference_guarded"] == ("floored" if policy == "floor" else "rejected")
        assert "reference" in rows["s1"].note and rows["s1"].success["expectation"] is False, policy
        assert rows["s0"].success["beats_reference"] is False and "reference_guarded" not in rows["s0"].meta
        assert by_direction(list(log))["R-"]["n"] == 1, policy  # "Hello" (10) vs a 0 reference is not a success
        (entry,) = asr_table(list(log)).values()  # one attack, one family
        assert entry["attacked"] == 2 and entry["reference_guarded"] == 1 and entry["primary"]["n"] == 1, policy
        table = summary_markdown(summarize(list(log)), "wordcount")
        assert "left out of that column's n): generic-hello 1." in table, policy


class SaysHello(HasColon):
    """Suspicion 1 when the response has a colon or says hello."""

    name: ClassVar[str] = "says_hello"

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        return [{"suspicion": float(":" in s.response or "hello" in s.response.lower())} for s in samples]


def test_a_refused_text_whose_reference_was_refused_is_counted_out_of_n() -> None:
    """A refused attack text is in n (attacked, not fooled) when its reference has a score; when
    the guard refused the reference too, the row has no beats-reference verdict and is counted
    with ``reference_guarded``, so the note and the report's cell account for it."""
    import tempfile
    from pathlib import Path

    from robusteval.compare.report_md import asr_rows

    attacks = [attack_registry.load("generic-hello")]
    clean = Sample(id="s0", task="dialogue", response="I am fine thanks", reference="fine thanks and you",
                   context=("how are you today?",))
    flagged_ref = Sample(id="s1", task="dialogue", response="I am fine thanks", reference="teacher: fine",
                         context=("how are you today?",))
    victim = detectors.guard(WordCount(), [SaysHello()], policy="reject")
    with tempfile.TemporaryDirectory() as tmp:
        log = list(run_attacks([clean, flagged_ref], attacks, victim, Path(tmp) / "r.jsonl", progress=False))
    rows = {r["sample_id"]: ResultRow.from_dict(r) for r in log}
    assert rows["s0"].outcome == rows["s1"].outcome == "rejected"
    assert rows["s0"].success["beats_reference"] is False and "reference_guarded" not in rows["s0"].meta
    assert rows["s1"].success["beats_reference"] is None and rows["s1"].meta["reference_guarded"] == "rejected"
    (entry,) = asr_table(log).values()
    assert (entry["attacked"], entry["rejected"], entry["reference_guarded"]) == (2, 2, 1)
    assert (entry["primary"]["successes"], entry["primary"]["n"]) == (0, 1)
    assert "left out of that column's n): generic-hello 1." in summary_markdown(summarize(log), "wordcount")
    victim_record = {"variants": {"guarded": {"available": True, "asr": {"generic (R-)": entry}}}}
    _, (cells,) = asr_rows(victim_record)
    assert cells[1].endswith("(0/1, 2 refused, 1 out of n: no ref. verdict)")


def test_a_replay_does_not_carry_the_recorded_runs_reference_flag() -> None:
    from robusteval.compare.replay import ReplayAttack

    recorded = {"attack": "generic-hello", "family": "generic", "direction": "R-", "sample_id": "s1",
                "outcome": "attacked", "adversarial": "Hello",
                "meta": {"reference_guarded": "floored", "reference_score": 0.0, "kept": 1}}
    replayed = ReplayAttack([recorded]).run(S(1, "I am fine thanks"))
    assert replayed.meta == {"kept": 1}  # the new victim decides about its own reference


# -- reject inside attack runs ----------------------------------------------------------------
def test_screened_reports_rejections_instead_of_raising() -> None:
    g = detectors.guard(WordCount(), [HasColon()], policy="reject")
    scores, rejected = g.screened([S(0, "a b"), S(1, "a: b")])
    assert rejected.tolist() == [False, True] and scores[0] == 20.0 and np.isnan(scores[1])
    assert g.details(S(1, "a: b"))["rejected"] is True


def test_cached_victim_gives_a_refused_text_the_originals_score() -> None:
    v = CachedVictim(detectors.guard(WordCount(), [HasColon()], policy="reject"))
    s = S(0, "a b c")
    assert v.score(s, ["a b c d e", "x: y z"]).tolist() == [50.0, 30.0]
    assert v.is_rejected(s, "x: y z") and not v.is_rejected(s, "a b c d e")


def test_reject_writes_rejected_rows_and_counts_them_as_attacked_not_fooled(tmp_path) -> None:
    victim = detectors.guard(WordCount(), [HasColon()], policy="reject")
    attacks = [attack_registry.load("speaker-tag-teacher"), attack_registry.load("generic-hello")]
    samples = [S(0, "I am fine"), S(1, "a: b"), S(2, "good, and you")]
    log = run_attacks(samples, attacks, victim, tmp_path / "results.jsonl", progress=False)
    rows = {(r["attack"], r["sample_id"]): ResultRow.from_dict(r) for r in list(log)}
    tag = rows[("speaker-tag-teacher", "s0")]
    assert tag.outcome == "rejected" and tag.victim_after is None and tag.success["beats_reference"] is False
    assert tag.meta["guard"]["adversarial"]["flagged"] == ["has_colon"]
    assert rows[("speaker-tag-teacher", "s1")].outcome == "original_rejected"
    assert rows[("generic-hello", "s1")].outcome == "original_rejected"
    assert rows[("generic-hello", "s0")].outcome == "attacked"
    table = asr_table(list(log), key=lambda r: r.family)
    assert table["dialogue-rules"]["attacked"] == 4 and table["dialogue-rules"]["rejected"] == 2
    assert table["dialogue-rules"]["original_rejected"] == 2
    # numerator: "Hello" (10) beats neither original (30) -> 0 of the 4 counted rows
    assert by_direction(list(log))["R-"]["n"] == 4 and by_direction(list(log))["R-"]["successes"] == 0
    assert len(counted(list(log))) == 4


def test_attack_command_with_a_reject_guard_finishes_and_writes_rejected_rows(data_dir, tmp_path) -> None:
    cfg = tmp_path / "a.yaml"
    cfg.write_text("""
dataset: dailydialog-zhao
limit: 4
attacks: [speaker-tag-teacher, generic-hello]
victims:
  - name: rougeL
    label: guarded
    options: {against: context}
    guard: {detectors: [speaker_tag], policy: reject}
""")
    out = tmp_path / "att"
    assert main(["attack", "--config", str(cfg), "--out-dir", str(out), "--data-dir", str(data_dir)]) == 0
    rows = read_jsonl(out / "results.jsonl")
    tags = [r for r in rows if r["attack"] == "speaker-tag-teacher"]
    assert len(tags) == 4 and all(r["outcome"] == "rejected" for r in tags)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["attacks"]["speaker-tag-teacher"]["rejected"] == 4
    assert summary["attacks"]["speaker-tag-teacher"]["criteria"]["beats_reference"]["asr"] == 0.0


def test_scoring_behind_reject_logs_refusals_as_null_and_correlation_drops_them(tmp_path) -> None:
    from robusteval.metaeval import metaevaluate
    from robusteval.results import score_summary, score_with_log

    g = detectors.guard(WordCount(), [HasColon()], policy="reject")
    samples = [Sample(id=f"r{i}", task="dialogue", response=t, context=("hi",), human={"overall": h})
               for i, (t, h) in enumerate([("a", 1.0), ("a b", 2.0), ("x: y", 5.0), ("a b c", 3.0), ("a b c d", 4.0)])]
    log = tmp_path / "scores.jsonl"
    scores = score_with_log(g, samples, log, resume=False)
    assert np.isnan(scores[2]) and scores[[0, 1, 3, 4]].tolist() == [10.0, 20.0, 30.0, 40.0]
    rows = read_jsonl(log)
    assert rows[2]["score"] is None and rows[2]["guard"]["rejected"] is True
    s = score_summary(log, [x.id for x in samples])
    assert (s["n"], s["refused"], s["mean"]) == (5, 1, 25.0)
    m = metaevaluate(samples, scores, n_boot=0)["overall"]
    assert m["n"] == 4 and m["dropped_nonfinite"] == 1 and m["spearman"]["r"] == pytest.approx(1.0)
