from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
from toy import LengthMetric

from robusteval import Sample, attacks
from robusteval.asr import summarize
from robusteval.attacks.base import AttackResult
from robusteval.attacks.criteria import Criteria
from robusteval.attacks.runner import run_attacks
from robusteval.attacks.victim import CachedVictim
from robusteval.metrics.base import Metric
from robusteval.results import read_jsonl


def make_samples(n: int) -> list[Sample]:
    return [Sample(id=f"s{i}", task="dialogue", response=f"this is answer number {i} .",
                   context=("hello .", f"question {i} ?")) for i in range(n)]


def test_cached_victim_counts_calls_and_hits() -> None:
    v = CachedVictim(LengthMetric())
    s = make_samples(1)[0]
    assert list(v.score(s, ["a b", "a b c", "a b"])) == [10.0, 15.0, 10.0]
    assert (v.model_calls, v.cache_hits) == (2, 1)  # the repeated "a b" in the batch is a hit
    scores, scored = v.score_with_status(s, ["a b", "x y z w", "x y z w"])
    assert list(scores) == [10.0, 20.0, 20.0] and scored == [False, True, False]
    assert (v.model_calls, v.cache_hits) == (3, 3)


def test_criteria() -> None:
    c = Criteria()
    r = AttackResult("a", "f", "s", "R-", "o", "x", "low", victim_before=50, victim_after=60, gold_after=10)
    assert c.judge(r, reference_score=55) == {"gold": True, "beats_reference": True, "expectation": True,
                                              "invariance": None}
    r.victim_after = 45
    assert c.judge(r, reference_score=55) == {"gold": False, "beats_reference": False, "expectation": False,
                                              "invariance": None}
    p = AttackResult("a", "f", "s", "R+", "o", "x", "high", victim_before=80, victim_after=20, gold_after=75)
    assert c.judge(p, reference_score=None) == {"gold": True, "beats_reference": None, "expectation": None,
                                                "invariance": True}
    p.victim_after = 80.5
    assert c.judge(p, None)["invariance"] is False  # moved less than the tolerance
    assert Criteria(invariance_tolerance=0.25).judge(p, None)["invariance"] is True


def test_runner_rows_and_summary(tmp_path) -> None:
    chosen = [attacks.load("generic-cucumber"), attacks.load("previous-utterance-prefix")]
    log = run_attacks(make_samples(4), chosen, LengthMetric(), tmp_path / "r.jsonl", progress=False)
    rows = list(log)
    assert len(rows) == 8
    summ = summarize(rows)
    # "Cucumber" (1 word) never beats a 6-word answer; a prefixed answer always does
    assert summ["generic-cucumber"]["criteria"]["beats_reference"]["asr"] == 0.0
    assert summ["previous-utterance-prefix"]["criteria"]["beats_reference"]["asr"] == 1.0
    assert summ["previous-utterance-prefix"]["criteria"]["beats_reference"]["successes"] == 4
    assert summ["previous-utterance-prefix"]["criteria"]["gold"]["asr"] is None
    assert summ["generic-cucumber"]["model_calls"] == 4


SCRIPT = textwrap.dedent('''
    import sys, time
    import numpy as np
    sys.path.insert(0, {tests!r})
    from test_attack_runner import LengthMetric, make_samples
    from robusteval import attacks
    from robusteval.attacks.runner import run_attacks
    chosen = [attacks.load(n) for n in ("generic-hello", "reversed-words", "repeat-words")]
    run_attacks(make_samples(40), chosen, LengthMetric(delay=0.02), {out!r}, resume=True, progress=False)
''')


def test_sigkill_midway_then_resume_loses_and_duplicates_nothing(tmp_path) -> None:
    out = tmp_path / "results.jsonl"
    tests_dir = os.path.dirname(__file__)
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.format(tests=tests_dir, out=str(out))])
    deadline = time.time() + 120
    while time.time() < deadline:
        if out.exists() and len(out.read_text().splitlines()) >= 15:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = out.read_text().splitlines()
    assert 15 <= len(partial) < 120, "the kill must land midway"
    chosen = [attacks.load(n) for n in ("generic-hello", "reversed-words", "repeat-words")]
    log = run_attacks(make_samples(40), chosen, LengthMetric(), out, resume=True, progress=False)
    lines = read_jsonl(out)
    assert "_fingerprint" in json.loads(out.read_text().splitlines()[0])  # the header, once
    keys = [x["key"] for x in lines]
    assert len(keys) == len(set(keys)) == 120 == len(log)
    fresh = run_attacks(make_samples(40), chosen, LengthMetric(), tmp_path / "fresh.jsonl", progress=False)
    strip = ("wall_time", "model_calls", "cache_hits")
    a = {x["key"]: {k: v for k, v in x.items() if k not in strip} for x in lines}
    b = {x["key"]: {k: v for k, v in x.items() if k not in strip} for x in fresh}
    assert a == b


class CountingGold(Metric):
    """Test gold: remembers every text it had to score."""

    name = "counting-gold"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def _score(self, samples):
        self.seen.extend(s.response for s in samples)
        return np.full(len(samples), 80.0)


def test_one_gold_cache_serves_every_victim_of_a_command(tmp_path) -> None:
    """The gold's rating of a text does not depend on the victim: with a shared CachedVictim
    (what ``robusteval attack`` passes) a second victim re-asks the gold nothing, and the rows
    still record the gold's real scores and identity."""
    samples = make_samples(3)
    chosen = attacks.select("aspect-word-exchange,aspect-sentence-deletion", 0)
    metric = CountingGold()
    gold = CachedVictim(metric)
    run_attacks(samples, chosen, LengthMetric(), tmp_path / "a.jsonl", gold_metric=gold, progress=False)
    first = len(metric.seen)
    assert first > 0 and len(set(metric.seen)) == first  # each text once
    log = run_attacks(samples, chosen, LengthMetric(delay=0.0), tmp_path / "b.jsonl", gold_metric=gold,
                      progress=False)
    assert len(metric.seen) == first
    rows = [r for r in read_jsonl(tmp_path / "b.jsonl") if "key" in r]
    assert len(rows) == 6 and all(r["gold_before"] == 80.0 for r in rows)
    assert all(r["key"] in log for r in rows)
    # the run's fingerprint names the gold metric itself, not the cache wrapped around it
    assert "counting-gold" in (tmp_path / "b.jsonl").read_text(encoding="utf-8").splitlines()[0]
