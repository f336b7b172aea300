from __future__ import annotations

import json

import numpy as np
import pytest

from robusteval import Sample, attacks
from robusteval.asr import summarize
from robusteval.attacks.runner import run_attacks
from robusteval.attacks.universal import TRIGGER_CHARS, broken_string, decode
from robusteval.attacks.victim import CachedVictim
from robusteval.metrics.base import Metric

SRC = ("The mayor of Springfield opened a new bridge on Monday . The bridge cost 5 million dollars "
       "and links the old town with the harbour . Critics said the bridge was too expensive .")
REF = "Springfield mayor opened new bridge linking old town with harbour ."


def sample(i: int = 0, ref: str = REF) -> Sample:
    return Sample(id=f"s{i}", task="summarization", response="A summary .", context=(SRC,), reference=ref)


def test_dot_trigger() -> None:
    r = attacks.load("dot-trigger").run(sample())
    assert r.adversarial == "." and r.direction == "R-"


def test_broken_string_algorithm_exact() -> None:
    """Mu & Lim, Algorithm 1: "while |W| > 0: c <- longest consecutive salient subsequence of a;
    if |c| < C: break; s <- s + c; W <- W - c" -- C is a minimum run length, not a run count."""
    bag = {"p", "q", "r", "s", "t", "u", "v"}
    assert broken_string("p q r s a p q b t u", bag, min_run=3) == "p q r s"  # "t u" is shorter than C
    assert broken_string("p q r s a p q b t u", bag, min_run=2) == "p q r s t u"
    # the used words leave the bag, so "p q" is not taken twice; runs come longest first
    assert broken_string("t u v a p q r s b p q", bag, min_run=2) == "p q r s t u v"
    assert broken_string("a x y z b x y c x", {"x", "y", "z"}, min_run=3) == "x y z"
    assert broken_string("nothing here", {"x"}) is None
    assert broken_string("a x y b", {"x", "y"}, min_run=3) is None
    with pytest.raises(ValueError, match="min_run"):
        broken_string("a", {"a"}, min_run=0)


def test_broken_sentence_oracle_uses_reference_words() -> None:
    """The oracle bag is the paper's target b(1, s_ref) (Eq. 4-5): every reference word, stop
    words included, so "old town with" is a salient run of three; C = 3 stops after it, the
    paper's C = 2 variant goes on with the two-word runs."""
    assert attacks.load("broken-sentence").run(sample()).adversarial == "old town with"
    adv = attacks.load("broken-sentence-c2").run(sample()).adversarial
    assert adv == "old town with Springfield opened new bridge"


def test_broken_string_bag_difference_keeps_counts() -> None:
    """Algorithm 1's "W <- W - c" is a bag difference: a word the reference uses twice may be
    taken twice; a set bag takes it once."""
    from collections import Counter

    assert broken_string("x y a x y", Counter({"x": 2, "y": 2}), min_run=2) == "x y x y"
    assert broken_string("x y a x y", {"x", "y"}, min_run=2) == "x y"
    assert broken_string("x y a x y", Counter({"x": 2, "y": 1}), min_run=2) == "x y"
    # within one run too: a run may not use a word more often than the bag holds it
    assert broken_string("x y x y", Counter({"x": 1, "y": 1}), min_run=2) == "x y"
    assert broken_string("x y x y", Counter({"x": 2, "y": 2}), min_run=2) == "x y x y"


class TriggerLovingMetric(Metric):
    """Test victim: rewards '!' and '?' characters (so the GA has a clear optimum)."""

    name = "bang"

    def _score(self, samples):
        return np.array([10.0 * sum(ch in "!?" for ch in s.response) for s in samples])


def test_decode_and_ga_search_is_seeded_and_improves() -> None:
    assert decode([0, len(TRIGGER_CHARS), 1]) == TRIGGER_CHARS[0] + TRIGGER_CHARS[1]
    v = CachedVictim(TriggerLovingMetric())
    samples = [sample(i, ref=f"reference {i}") for i in range(4)]
    a = attacks.load("ga-trigger", length=6, pop_size=16, generations=8, rounds=2, fit_size=4, seed=3)
    trig = a.fit(samples, v)
    assert trig and not any(ch.isalnum() for ch in trig)
    assert sum(ch in "!?" for ch in trig) >= 3  # far better than the "." start
    b = attacks.load("ga-trigger", length=6, pop_size=16, generations=8, rounds=2, fit_size=4, seed=3)
    assert b.fit(samples, CachedVictim(TriggerLovingMetric())) == trig
    assert a.run(samples[0]).adversarial == trig


def test_runner_fits_once_saves_trigger_and_excludes_fitting_samples(tmp_path) -> None:
    samples = [sample(i, ref=f"reference number {i}") for i in range(10)]
    chosen = [attacks.load("ga-trigger", length=4, pop_size=8, generations=3, rounds=1, fit_size=3)]
    log = run_attacks(samples, chosen, TriggerLovingMetric(), tmp_path / "r.jsonl", progress=False,
                      fit_size=3)
    fitted = json.loads((tmp_path / "fitted.json").read_text())
    assert fitted["ga-trigger"]["fitted_on"] == ["s0", "s1", "s2"]
    rows = list(log)
    assert sum(bool(r["meta"].get("fitting_sample")) for r in rows) == 3
    assert summarize(rows)["ga-trigger"]["attacked"] == 7 and summarize(rows)["ga-trigger"]["fitting"] == 3
    assert summarize(rows)["ga-trigger"]["primary"]["n"] == 7
    assert {r["adversarial"] for r in rows} == {fitted["ga-trigger"]["trigger"]}


def test_ga_presets_follow_the_paper() -> None:
    """Mu & Lim §4: "set population size at 10, and terminate at 2000 generations"; §3.3:
    "a threshold of -0.88, or maximum of 2000 iterations"; "we can stop iterating when i=5";
    the trigger is "a sequence of independent randomly initialized non-alphanumeric characters"."""
    from robusteval.attacks.universal import ALL_NON_ALNUM

    paper = attacks.load("ga-trigger")
    assert (paper.preset, paper.pop_size, paper.generations, paper.rounds, paper.target) == ("paper", 10, 2000, 6, 88.0)
    assert paper.alphabet == ALL_NON_ALNUM and "\x07" in paper.alphabet and " " in paper.alphabet
    assert not any(ch.isalnum() for ch in ALL_NON_ALNUM) and len(ALL_NON_ALNUM) == 128 - 62
    fast = attacks.load("ga-trigger", preset="fast")
    assert (fast.pop_size, fast.generations, fast.rounds, fast.target, fast.alphabet) == (24, 12, 3, None, TRIGGER_CHARS)
    assert attacks.load("ga-trigger", preset="fast", generations=5).generations == 5
    with pytest.raises(ValueError, match="preset"):
        attacks.load("ga-trigger", preset="slow")
    fast.load_fitted({"trigger": "!?", "history": [], "preset": "fast"})  # an older state: its preset only
    assert fast.trigger == "!?"
    with pytest.raises(ValueError, match=r"preset='fast' \(this attack: 'paper'\)"):
        paper.load_fitted(fast.fitted_state())
    with pytest.raises(ValueError, match=r"generations=12 \(this attack: 5\)"):
        attacks.load("ga-trigger", preset="fast", generations=5).load_fitted(fast.fitted_state())
    with pytest.raises(ValueError, match="preset='fast'"):
        paper.load_fitted({"trigger": "!?", "preset": "fast"})
    same = attacks.load("ga-trigger", preset="fast")
    same.load_fitted(fast.fitted_state())
    assert same.trigger == "!?"


def test_ga_stops_at_the_fitness_threshold() -> None:
    v = CachedVictim(TriggerLovingMetric())
    samples = [sample(i, ref=f"reference {i}") for i in range(3)]
    a = attacks.load("ga-trigger", length=6, pop_size=16, generations=400, rounds=1, target=30.0, seed=1)
    trig = a.fit(samples, v)
    assert sum(ch in "!?" for ch in trig) >= 3
    assert v.model_calls < 16 * 400 // 4  # stopped long before 400 generations


def test_trigger_broken_hides_the_broken_text_past_512_tokens() -> None:
    """Mu & Lim §3.3: "If we set the number of tokens in s_emu greater than 512 (the max
    sequence length for BERT), sigma_ROUGE(a) would then not affect the effectiveness"."""
    a = attacks.load("trigger-broken", trigger="!?", min_run=2)
    adv = a.run(sample()).adversarial
    trigger, broken = adv.split(" ", 1)
    assert len(trigger) >= 513 and set(trigger) == {"!", "?"} and broken == "old town with Springfield opened new bridge"
    once = attacks.load("trigger-broken", trigger="!?", min_run=2, pad_to=0).run(sample()).adversarial
    assert once == "!? old town with Springfield opened new bridge"


def test_system_level_success() -> None:
    """Mu & Lim §2.5: "we consider our attack to be successful if an attacker obtains a score
    higher than the threshold [the scores of the top summarizers] using clearly inferior
    summaries" -- the attack's mean against each system's mean on the same documents."""
    from robusteval.asr import system_level
    from robusteval.attacks.base import ResultRow

    def row(doc: str, score: float) -> ResultRow:
        return ResultRow(attack="dot-trigger", family="universal", sample_id=doc, direction="R-",
                         original="o", adversarial=".", expected="low", victim_before=50.0,
                         victim_after=score)

    rows = [row("d1", 80.0), row("d2", 70.0), row("d3", 10.0)]
    systems = {"M1": {"d1": 60.0, "d2": 60.0}, "M2": {"d1": 90.0, "d2": 40.0, "d3": 50.0}}
    out = system_level(rows, systems)
    assert out["n_docs"] == 2 and out["attack_mean"] == 75.0  # d3: not covered by M1
    assert out["systems"] == {"M1": 60.0, "M2": 65.0} and out["beats"] == ["M1", "M2"]
    assert out["success"] and out["rank"] == 1 and out["of"] == 3
    middle = system_level([row("d1", 70.0), row("d2", 56.0)], systems)  # mean 63: above M1 only
    assert middle["beats"] == ["M1"] and not middle["success"] and middle["rank"] == 2
    assert system_level([], systems)["success"] is None


def test_attack_cli_reports_system_level(tmp_path, monkeypatch) -> None:
    """`system_level: true` in an attack config scores every system on the attacked documents."""
    import json as _json

    from robusteval import data as data_mod
    from robusteval.cli.main import main

    docs = [Sample(id=f"d{i}/{sys}", task="summarization", response=f"{sys} summary of document {i} .",
                   context=(f"document {i} text about bridges .",), reference=f"bridges open in town {i} .",
                   human={"relevance": float(len(sys))}, meta={"system_id": sys})
            for i in range(3) for sys in ("M1", "M22")]
    monkeypatch.setattr(data_mod, "load", lambda name, data_dir=None, **kw: list(docs))
    cfg = tmp_path / "c.yaml"
    cfg.write_text("dataset: toy-systems\nselect: best-per-context\nselect_aspect: relevance\n"
                   "attacks: [dot-trigger]\nsystem_level: true\nvictim: {name: rougeL}\n", encoding="utf-8")
    assert main(["attack", "--config", str(cfg), "--out-dir", str(tmp_path / "run")]) == 0
    summary = _json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    lv = summary["attacks"]["dot-trigger"]["system_level"]
    assert lv["n_docs"] == 3 and set(lv["systems"]) == {"M1", "M22"} and lv["success"] is False
    assert "System level" in (tmp_path / "run" / "summary.md").read_text(encoding="utf-8")
