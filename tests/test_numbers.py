"""The figures robusteval prints (issue "trustworthy numbers"): resume refuses another run,
denominators keep failed searches, criteria are the papers', intervals are right, and
summaries come from the log of this run alone."""

from __future__ import annotations

import errno
import json

import numpy as np
import pytest
from toy import LengthMetric

from robusteval import Sample, attacks
from robusteval.asr import asr, asr_table, counted, overall, summarize
from robusteval.attacks.base import AttackResult, ResultRow
from robusteval.attacks.criteria import Criteria
from robusteval.attacks.runner import read_results, run_attacks
from robusteval.errors import RobustevalError, RunMismatchError
from robusteval.metrics.base import Metric
from robusteval.results import claim_folder, read_jsonl, run_fingerprint, score_summary, score_with_log
from robusteval.stats import binomial_upper, flag_rate, pct, proportion, wilson


class ConstantMetric(Metric):
    """A perfectly robust victim: nothing an attacker does moves it."""

    name = "constant"

    def _score(self, samples):
        return np.full(len(samples), 50.0)


def samples(n: int) -> list[Sample]:
    return [Sample(id=f"s{i}", task="dialogue", response=f"the movie was really good number {i}",
                   context=("hello .", f"question {i} ?"), reference=f"a reference answer {i}")
            for i in range(n)]


def row(outcome="attacked", direction="R-", fooled=True, sample="s0", attack="a", family="f", **meta) -> dict:
    crit = "beats_reference" if direction == "R-" else "invariance"
    r = ResultRow(attack, family, sample, direction, "o", "x" if outcome == "attacked" else None,
                  "low" if direction == "R-" else "high", outcome=outcome, victim_before=50.0, victim_after=60.0,
                  success={crit: fooled if outcome == "attacked" else None}, meta=dict(meta), context_id=sample)
    return r.to_dict()


# -- intervals and rates ---------------------------------------------------------------------
def test_wilson_matches_known_values() -> None:
    # Newcombe (1998), Table I: 0/10 -> [0, 0.2775]; 5/10 -> [0.2366, 0.7634]; 81/263 -> [0.2553, 0.3662]
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(81, 263) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    assert wilson(0, 0) is None
    p = proportion([True] * 3 + [False] * 5)
    assert (p["k"], p["n"], p["rate"], p["ci_method"]) == (3, 8, 0.375, "wilson")
    assert proportion([])["rate"] is None  # an empty denominator is never "0 %"
    assert pct(proportion([])) == "n/a" and pct(proportion([True, False])) == "50.0 [9.5, 90.5]"


def test_binomial_upper_is_the_one_sided_clopper_pearson_bound() -> None:
    """The bound u for k of n solves P(Binomial(n, u) <= k) = 1 - confidence; k = 0 has the
    closed form 1 - (1 - c)^(1/n). A swapped k and n, or k + 1 for k, fails both."""
    from scipy.stats import binom

    assert binomial_upper(0, 300, 0.95) == pytest.approx(1 - 0.05 ** (1 / 300), rel=1e-9)
    for k, n in ((0, 50), (3, 500), (7, 681), (40, 100)):
        u = binomial_upper(k, n, 0.9)
        assert k / n < u < 1 and binom.cdf(k, n, u) == pytest.approx(0.1, abs=1e-9)
    assert binomial_upper(4, 1000, 0.95) < 0.01 < binomial_upper(5, 1000, 0.95)
    assert binomial_upper(5, 5, 0.95) == 1.0 and binomial_upper(0, 0, 0.95) == 1.0
    with pytest.raises(ValueError):
        binomial_upper(1, 10, 1.0)
    with pytest.raises(ValueError):
        binomial_upper(11, 10, 0.95)


def test_a_unanimous_cluster_bootstrap_keeps_a_real_interval() -> None:
    """0/40 fooled in 8 contexts is not "0 % [0, 0]": the interval keeps Wilson's at 8 contexts."""
    zero = proportion([False] * 40, clusters=[i // 5 for i in range(40)])
    assert zero["ci"][0] == 0.0 and zero["ci"][1] == pytest.approx(wilson(0, 8)[1], abs=1e-6)
    assert zero["ci"][1] > 0.3
    full = proportion([True] * 40, clusters=[i // 5 for i in range(40)])
    assert full["ci"][1] == 1.0 and full["ci"][0] == pytest.approx(wilson(8, 8)[0], abs=1e-6)
    assert full["ci"][0] < 0.7


def test_shared_contexts_use_a_cluster_bootstrap() -> None:
    # 4 contexts, 2 rows each: the rows are not independent
    p = proportion([True, True, False, False, True, True, False, False], clusters=list("aabbccdd"))
    assert p["ci_method"] == "cluster-bootstrap" and p["rate"] == 0.5
    lo, hi = p["ci"]
    w_lo, w_hi = wilson(4, 8)
    assert lo < 0.5 < hi and (hi - lo) > (w_hi - w_lo)  # wider than pretending 8 independent rows


def test_pooled_datasets_never_share_a_cluster() -> None:
    """Two sets' rows with the same conversation id (a shared opener, or ids "1", "2" in both files)
    are resampled as separate clusters when pooled: one ASR bootstrap unit per (dataset, context)."""
    rows = []
    for ds, hit in (("dailydialog-zhao", {"c0", "c1"}), ("persona-zhao", {"c2", "c3"})):
        for c in ("c0", "c1", "c2", "c3"):
            for k in range(2):
                r = ResultRow("a", "f", f"{c}/{k}", "R-", "o", "x", "low", success={"beats_reference": c in hit},
                              dataset=ds, context_id=c)
                rows.append(r)
    got = asr(rows)
    verdicts = [r.success["beats_reference"] for r in rows]
    assert (got["successes"], got["n"]) == (8, 16)
    assert got["ci"] == proportion(verdicts, clusters=[f"{r.dataset}/{r.context_id}" for r in rows])["ci"]
    # merged by context id alone, each of 4 clusters would hold 2 fooled and 2 not rows: every draw is
    # 50 %, and the interval falls back to Wilson at 4 clusters, narrower than the 8 real ones give
    merged = proportion(verdicts, clusters=[r.context_id for r in rows])["ci"]
    assert merged[1] - merged[0] < got["ci"][1] - got["ci"][0]


def test_flag_rate_is_flagged_over_n() -> None:
    r = flag_rate(np.array([True, False, False, False]))
    assert (r["flagged"], r["n"], r["rate"]) == (1, 4, 0.25) and r["ci"][0] < 0.25 < r["ci"][1]


# -- denominators ----------------------------------------------------------------------------
def test_asr_denominator_counts_attacked_rows_only() -> None:
    rows = [row(fooled=True, sample="s0"), row(fooled=True, sample="s1"), row(fooled=False, sample="s2"),
            row(fooled=False, sample="s3", exhausted=True),  # a failed search: attacked, not fooled
            row(outcome="skipped", sample="s4"), row(outcome="original_floored", sample="s5"),
            row(fooled=True, sample="s6", fitting_sample=True)]
    t = asr_table(rows)["f (R-)"]
    assert (t["primary"]["successes"], t["primary"]["n"]) == (2, 4)
    assert (t["attacked"], t["skipped"], t["original_floored"], t["fitting"]) == (4, 1, 1, 1)
    assert overall(rows)["asr"] == 0.5
    assert len(counted(rows)) == 4


def test_mean_before_and_after_average_the_same_rows() -> None:
    """A refused row (no after score) leaves both means, not only the after one: 50 -> 90 and a
    refused row scored 10 before read 50 / 90 (n 1), the paired change's +40, not 30 / 90."""
    a = row(sample="s0")
    a["victim_before"], a["victim_after"] = 50.0, 90.0
    b = row(outcome="rejected", sample="s1")
    b["victim_before"], b["victim_after"], b["success"] = 10.0, None, {"beats_reference": False}
    s = summarize([a, b])["a"]
    assert (s["mean_before"], s["mean_after"], s["n_scored"]) == (50.0, 90.0, 1)
    assert s["mean_after"] - s["mean_before"] == s["score_change"]["mean"] == 40.0
    assert s["primary"]["n"] == 2 and s["rejected"] == 1  # the refused row stays in the ASR's n
    only_refused = summarize([b])["a"]
    assert only_refused["mean_before"] is None and only_refused["n_scored"] == 0


def test_an_exhausted_search_is_attacked_and_not_fooled(tmp_path) -> None:
    """Observation 2: a robust victim reads 0 %, not n/a."""
    pool = samples(3)
    a = attacks.load("textfooler-pos", goal="score-move", delta=20)
    log = run_attacks(pool, [a], ConstantMetric(), tmp_path / "r.jsonl", progress=False, budget=40)
    rows, _ = read_results(tmp_path / "r.jsonl")
    assert all(r.outcome == "attacked" and r.meta["exhausted"] for r in rows)
    assert all(r.adversarial is not None and r.victim_after == 50.0 for r in rows)  # best candidate kept
    s = summarize(list(log))["textfooler-pos"]
    assert (s["primary"]["successes"], s["primary"]["n"], s["primary"]["asr"]) == (0, 3, 0.0)


# -- criteria --------------------------------------------------------------------------------
def test_adveval_criterion_is_strict() -> None:
    """AdvEval Eq. 3: S_gold > tau1 and S_gold - S_victim > tau2 (R+), mirrored for R-."""
    c = Criteria()
    assert not c.gold_verdict("R+", gold=70.0, victim=10.0)  # gold not above 70
    assert not c.gold_verdict("R+", gold=80.0, victim=40.0)  # gap exactly 40
    assert c.gold_verdict("R+", gold=80.1, victim=40.0)
    assert not c.gold_verdict("R-", gold=30.0, victim=90.0)  # gold not below 30
    assert not c.gold_verdict("R-", gold=20.0, victim=60.0)
    assert c.gold_verdict("R-", gold=20.0, victim=60.5)
    assert Criteria.from_config({"invariance_tolerance": 3}).invariance_tolerance == 3.0
    # ... and judge() applies it: a gap of exactly 40 with gold 80 is not a success
    r = ResultRow("a", "f", "s", "R+", "o", "x", "high", victim_before=80.0, victim_after=40.0, gold_after=80.0)
    assert c.judge(r, None)["gold"] is False
    r.victim_after = 39.0
    assert c.judge(r, None)["gold"] is True
    with pytest.raises(Exception, match="unknown criteria option"):
        Criteria.from_config({"tolerance": 3})


def test_an_unchanged_text_never_counts_as_moved() -> None:
    """An exhausted R+ search keeps the clean original as its best candidate: two scorings of
    one text (a noisy victim) must not count as a move."""
    r = ResultRow("a", "f", "s", "R+", "same text", "same text", "high", victim_before=50.0, victim_after=58.0)
    assert Criteria().judge(r, None)["invariance"] is False
    r.adversarial = "same text, edited"
    assert Criteria().judge(r, None)["invariance"] is True


def test_a_tie_within_float_noise_is_a_tie() -> None:
    """The same text scored in two batches differs by a few millionths of a point (measured:
    13.62752616405487 vs 13.627524673938751 for BERTScore MiniLM under the sanitize guard); an
    exact >= made such a tie "not fooled". Within tie_tolerance it is tied; beyond, it is not."""
    def row(before: float, after: float) -> AttackResult:
        return AttackResult(attack="a", family="f", sample_id="s", direction="R-", original="x y",
                            adversarial="teacher: x y", expected="low", victim_before=before,
                            victim_after=after)

    crit = Criteria()
    noisy = crit.judge(row(13.62752616405487, 13.627524673938751), 13.62752616405487)
    assert noisy["beats_reference"] is True and noisy["expectation"] is True
    lower = crit.judge(row(13.6275, 13.6175), 13.6275)  # 0.01 points lower: a real drop
    assert lower["beats_reference"] is False and lower["expectation"] is False
    exact = Criteria(tie_tolerance=0.0).judge(row(13.62752616405487, 13.627524673938751), 13.62752616405487)
    assert exact["beats_reference"] is False  # the old, exact comparison
    assert Criteria.from_config({"tie_tolerance": "0.01"}).tie_tolerance == 0.01
    for bad, why in (("nan", "finite"), ("inf", "finite"), ("-0.1", "negative")):
        with pytest.raises(RobustevalError, match=rf"criteria: tie_tolerance .*{why}"):
            Criteria.from_config({"tie_tolerance": bad})


def test_rows_record_criteria_dataset_and_victim(tmp_path) -> None:
    run_attacks(samples(2), [attacks.load("generic-cucumber")], LengthMetric(), tmp_path / "r.jsonl",
                progress=False, dataset="toy", criteria=Criteria(invariance_tolerance=2.5))
    rows, dataset = read_results(tmp_path / "r.jsonl")
    assert dataset == "toy"
    assert rows[0].criteria == {"version": "robusteval.criteria/4", "tau1_pos": 70.0, "tau1_neg": 30.0,
                                "tau2": 40.0, "invariance_tolerance": 2.5, "human_agreed_only": True,
                                "tie_tolerance": 0.001}
    assert rows[0].victim == "length" and rows[0].victim_repro.startswith("length|")


# -- the clean original ----------------------------------------------------------------------
def test_victim_before_is_the_clean_original_for_mismatched_start_searches(tmp_path) -> None:
    """Observation 4: the histogram's clean scores are the originals' scores."""
    from robusteval.compare.pipeline import score_distributions

    pool = [Sample(id=f"s{i}", task="dialogue", response=" ".join(["word"] * (i + 2)), context=(f"c{i}",))
            for i in range(4)]
    log = run_attacks(pool, [attacks.load("textfooler-neg", goal="score-move", delta=5)], LengthMetric(), tmp_path / "r.jsonl",
                      progress=False, budget=20)
    rows = list(log)
    for r in rows:
        original = next(s for s in pool if s.id == r["sample_id"])
        assert r["original"] == original.response  # the row names the clean original...
        assert r["victim_before"] == 5.0 * len(original.response.split())  # ...and its score
        # the search started from another context's response, whose score is kept apart
        assert r["meta"]["start_text"] != original.response
        assert r["meta"]["start_score"] == 5.0 * len(r["meta"]["start_text"].split()) != r["victim_before"]
    dist = score_distributions(rows)
    assert dist["clean"] == sorted(5.0 * (i + 2) for i in range(4))


def test_a_floored_original_is_its_own_outcome(tmp_path) -> None:
    """Observation 5: a guard that floors the clean original does not turn R- attacks into successes."""
    from robusteval.detectors import guard
    from robusteval.detectors.base import Detector

    class FlagsTheOriginalOfS1(Detector):
        name = "s1"

        def _analyze(self, samples):
            return [{"suspicion": float(s.id == "s1" and "movie" in s.response)} for s in samples]

    pool = samples(3)
    for policy, floored in (("floor", {"s1"}), ("flag", set())):
        guarded = guard(LengthMetric(), [FlagsTheOriginalOfS1(threshold=0.5)], policy=policy)
        out = tmp_path / f"{policy}.jsonl"
        run_attacks(pool, [attacks.load("generic-cucumber")], guarded, out, progress=False)
        rows, _ = read_results(out)
        assert {r.sample_id for r in rows if r.outcome == "original_floored"} == floored
        for r in rows:
            if r.outcome == "original_floored":
                assert r.victim_before == 0.0 and all(v is None for v in r.success.values())
            else:  # "Cucumber" scores 5 < the original's 35: not fooled
                assert r.outcome == "attacked" and r.success["expectation"] is False
        t = summarize(rows)["generic-cucumber"]
        assert (t["primary"]["n"], t["original_floored"]) == (3 - len(floored), len(floored))


# -- resume only the same run ----------------------------------------------------------------
def test_attack_resume_refuses_another_victim_seed_or_limit(tmp_path) -> None:
    out = tmp_path / "r.jsonl"
    chosen = [attacks.load("generic-cucumber")]
    run_attacks(samples(4), chosen, LengthMetric(), out, progress=False, fingerprint={"seed": 0})
    with pytest.raises(RunMismatchError, match="victim"):
        run_attacks(samples(4), chosen, ConstantMetric(), out, resume=True, progress=False, fingerprint={"seed": 0})
    with pytest.raises(RunMismatchError, match="seed"):
        run_attacks(samples(4), chosen, LengthMetric(), out, resume=True, progress=False, fingerprint={"seed": 1})
    with pytest.raises(RunMismatchError, match="samples"):  # --limit 3
        run_attacks(samples(3), chosen, LengthMetric(), out, resume=True, progress=False, fingerprint={"seed": 0})
    with pytest.raises(RunMismatchError, match="budget"):
        run_attacks(samples(4), chosen, LengthMetric(), out, resume=True, progress=False, budget=5,
                    fingerprint={"seed": 0})
    with pytest.raises(RunMismatchError, match="invariance_tolerance"):
        run_attacks(samples(4), chosen, LengthMetric(), out, resume=True, progress=False, fingerprint={"seed": 0},
                    criteria=Criteria(invariance_tolerance=2.0))
    with pytest.raises(RunMismatchError, match="gold"):
        run_attacks(samples(4), chosen, LengthMetric(), out, resume=True, progress=False, fingerprint={"seed": 0},
                    gold_metric=ConstantMetric())
    with pytest.raises(RunMismatchError, match="attacks"):  # another attack option
        run_attacks(samples(4), [attacks.load("generic-cucumber", seed=5)], LengthMetric(), out, resume=True,
                    progress=False, fingerprint={"seed": 0})
    log = run_attacks(samples(4), chosen, LengthMetric(), out, resume=True, progress=False, fingerprint={"seed": 0})
    assert len(log) == 4


def test_resume_with_reused_attack_objects_is_the_same_run(tmp_path) -> None:
    """A search's pool (set by prepare) and a fitted trigger are runtime state, not settings:
    the same attack objects reused across runs (as harden does round after round) or fresh
    ones after a kill give the same fingerprint."""
    search = attacks.load("textfooler-neg", goal="score-move", delta=5)
    run_attacks(samples(3), [search], LengthMetric(), tmp_path / "a.jsonl", progress=False, budget=10)
    assert search.pool  # prepared: runtime state now set
    run_attacks(samples(4), [search], LengthMetric(), tmp_path / "b.jsonl", progress=False, budget=10)
    fresh = attacks.load("textfooler-neg", goal="score-move", delta=5)
    assert len(run_attacks(samples(4), [fresh], LengthMetric(), tmp_path / "b.jsonl", resume=True, progress=False,
                           budget=10)) == 4


def test_compare_folder_refuses_another_policy(tmp_path) -> None:
    fp = run_fingerprint(command="compare", config={"guard": {"policy": "floor"}, "budget": 60})
    claim_folder(tmp_path, fp, resume=False)
    claim_folder(tmp_path, fp, resume=True)  # the same run continues
    with pytest.raises(RunMismatchError, match=r"config\.guard\.policy: 'floor' -> 'flag'"):
        claim_folder(tmp_path, run_fingerprint(command="compare", config={"guard": {"policy": "flag"}, "budget": 60}),
                     resume=True)
    with pytest.raises(FileExistsError):
        claim_folder(tmp_path, fp, resume=False)


def test_a_folder_holding_only_its_lock_file_resumes_as_a_new_run(tmp_path) -> None:
    """A command killed before it wrote its fingerprint leaves the folder's (empty) lock file:
    that is no earlier run's output, so --resume starts the run there."""
    from robusteval.results import exclusive_folder

    fp = run_fingerprint(command="compare", config={"budget": 60})
    with exclusive_folder(tmp_path / "run") as folder:
        pass
    assert not folder.exists()  # made for a command that wrote nothing: removed again
    folder.mkdir()
    with exclusive_folder(folder):
        pass
    assert [p.name for p in folder.iterdir()] == [".robusteval.lock"]  # an existing folder keeps it
    claim_folder(folder, fp, resume=True)
    assert (folder / "fingerprint.json").is_file()
    other = tmp_path / "other"
    other.mkdir()
    (other / ".robusteval.lock").write_text("")
    (other / "scores.jsonl").write_text("")
    with pytest.raises(RunMismatchError):  # real outputs without a fingerprint are still refused
        claim_folder(other, fp, resume=True)


def test_score_cli_refuses_to_relabel_another_metric(tmp_path, capsys) -> None:
    """Observation 1: `score --metric bleu` then `score --metric rougeL --resume` printed BLEU's mean."""
    from robusteval.cli.main import main

    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"x{i}", "response": f"the cat sat on mat {i}",
                                        "reference": f"the cat sat on the mat {i}"}) + "\n" for i in range(5)))
    out = tmp_path / "out"
    args = ["score", "--input", str(data), "--columns", "response=response", "--columns", "reference=reference", "--out-dir", str(out)]
    assert main([*args, "--metric", "bleu"]) == 0
    capsys.readouterr()
    assert main([*args, "--metric", "rougeL", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "different run" in err and "metric" in err
    assert main([*args, "--metric", "bleu", "--limit", "3", "--resume"]) == 2  # another --limit
    assert main([*args, "--metric", "bleu", "--resume"]) == 0  # the same run continues
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 5 and summary["metric"] == "bleu"


class Interrupting(Metric):
    """Scores one chunk, then the user presses Ctrl-C."""

    name = "interrupting"

    def __init__(self, after: int) -> None:
        super().__init__()
        self.left = after

    def _score(self, samples):
        if self.left <= 0:
            raise KeyboardInterrupt
        self.left -= 1
        return np.full(len(samples), 40.0)


def test_summary_counters_come_from_the_log_of_this_run(tmp_path) -> None:
    """Observation 1: after kills, flags and fallbacks counted only the last process."""
    from robusteval.detectors import guard
    from robusteval.detectors.base import Detector

    class FlagsOdd(Detector):
        name = "odd"

        def _analyze(self, samples):
            return [{"suspicion": float(int(s.id[1:]) % 2)} for s in samples]

    pool = samples(10)
    log = tmp_path / "scores.jsonl"
    for after in (1, 1):  # two processes, each killed after one chunk of 3
        metric = guard(Interrupting(after), [FlagsOdd(threshold=0.5)], policy="flag")
        with pytest.raises(KeyboardInterrupt):
            score_with_log(metric, pool, log, resume=True, chunk=3)
    metric = guard(Interrupting(99), [FlagsOdd(threshold=0.5)], policy="flag")
    score_with_log(metric, pool, log, resume=True, chunk=3)
    s = score_summary(log, [p.id for p in pool])
    assert s["n"] == 10 and s["guard"]["flagged"] == {"odd": 5} and s["guard"]["flagged_any"] == 5
    assert s["counters"]["guard.flagged.odd"] == 5  # summed over the three processes' rows
    assert score_summary(log, ["s0", "s1"])["n"] == 2  # only the rows asked for
    assert len(read_jsonl(log)) == 10


def test_cli_interrupt_and_disk_errors_end_in_one_line(tmp_path, capsys, monkeypatch) -> None:
    from robusteval.cli import score_cmd
    from robusteval.cli.main import main

    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "x", "response": "hello there", "reference": "hi there"}) + "\n")
    args = ["score", "--metric", "bleu", "--input", str(data), "--columns", "response=response", "--columns", "reference=reference",
            "--out-dir", str(tmp_path / "o")]

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(score_cmd, "score_with_log", interrupt)
    assert main(args) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "--resume" in err and "Traceback" not in err

    def disk_full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "o" / "scores.jsonl"))

    monkeypatch.setattr(score_cmd, "score_with_log", disk_full)
    assert main(args) == 74
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "No space left on device" in err and "scores.jsonl" in err


class FlakyJudge(Metric):
    """Falls back (counted) on its first call, answers on later ones."""

    name = "flaky"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def _score(self, samples):
        self.calls += 1
        if self.calls == 1:
            self.fallbacks["unparseable"] += len(samples)
            return np.full(len(samples), 50.0)
        return np.full(len(samples), 90.0)


def test_the_victim_cache_never_keeps_a_fallback_score() -> None:
    from robusteval.attacks.victim import CachedVictim

    v = CachedVictim(FlakyJudge())
    s = samples(1)[0]
    assert v.score_one(s, "a reply") == 50.0  # the fallback, counted by the metric...
    assert v.score_one(s, "a reply") == 90.0  # ...is asked again, not served from the cache
    assert v.score_one(s, "a reply") == 90.0 and v.cache_hits == 1


def test_correlation_drops_nonfinite_pairs_and_resamples_contexts() -> None:
    from robusteval.metaeval import metaevaluate

    rng = np.random.default_rng(0)
    pool = [Sample(id=f"r{i}", task="dialogue", response=f"reply {i}", context=(f"context {i // 3}",),
                   human={"overall": float(h)}) for i, h in enumerate(rng.integers(1, 6, 30))]
    pool[4] = Sample(id="r4", task="dialogue", response="x", context=("context 1",), human={"overall": float("nan")})
    scores = np.array([float(s.human["overall"]) + rng.normal() for s in pool])
    e = metaevaluate(pool, scores, n_boot=200)["overall"]
    assert e["n"] == 29 and e["dropped_nonfinite"] == 1  # the NaN pair is not counted in n
    assert e["spearman"]["r"] is not None and e["spearman"]["ci95"] is not None  # one NaN no longer voids it
    assert e["ci_method"] == "context-bootstrap" and e["n_contexts"] == 10


def test_cluster_intervals_do_not_depend_on_the_order_of_the_rows() -> None:
    """A log written by Ray workers holds the same rows in another order: same interval."""
    from robusteval.stats import mean_ci, proportion

    verdicts = [i % 3 == 0 for i in range(60)]
    clusters = [f"c{i // 4}" for i in range(60)]
    values = [float(i % 7) for i in range(60)]
    perm = np.random.default_rng(1).permutation(60)
    a = proportion(verdicts, clusters, n_boot=300, seed=0)
    b = proportion([verdicts[i] for i in perm], [clusters[i] for i in perm], n_boot=300, seed=0)
    assert a == b and a["ci_method"] == "cluster-bootstrap"
    assert mean_ci(values, clusters, n_boot=300, seed=0) == mean_ci([values[i] for i in perm],
                                                                    [clusters[i] for i in perm], n_boot=300, seed=0)


def test_cli_sigterm_stops_like_ctrl_c_and_the_run_resumes(tmp_path) -> None:
    """A scheduler's SIGTERM used to kill the process wherever it was; now the command stops the
    way Ctrl-C stops it (exit 143, one line saying how to resume) and the same command with
    --resume finishes the run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "slowmetric.py").write_text(
        "import os, pathlib, time\n"
        "def overlap(predictions, references=None, sources=None):\n"
        "    if os.environ.get('SLOW_METRIC'):\n"
        "        pathlib.Path(os.environ['SLOW_METRIC']).write_text('started')\n"
        "        time.sleep(60)\n"
        "    return [50.0 for _ in predictions]\n", encoding="utf-8")
    data = tmp_path / "in.jsonl"
    rows = [{"id": f"s{i}", "response": r, "reference": "the cat"} for i, r in
            enumerate(["the cat", "猫", "قطة", "बिल्ली", "кошка", "le chat"])]
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "robusteval.cli.main", "score", "--metric", "slowmetric:overlap", "--dataset",
           str(data), "--out-dir", str(out)]
    marker = tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "SLOW_METRIC": str(marker)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), proc.communicate()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "--resume" in err and "Traceback" not in err
    env.pop("SLOW_METRIC")
    done = subprocess.run([*cmd, "--resume"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert sorted(r["id"] for r in read_jsonl(out / "scores.jsonl")) == [f"s{i}" for i in range(6)]


def test_starting_ray_keeps_the_clis_sigterm_handler(monkeypatch) -> None:
    """ray.init installs its own SIGTERM handler (sys.exit(15)); the executor puts the CLI's
    back, so a SIGTERM during a Ray run still stops with exit 143 and the resume hint."""
    import signal

    from robusteval.execution import ray_backend
    from robusteval.signals import stopping_on_sigterm

    class FakeRay:
        initialized = False

        def is_initialized(self) -> bool:
            return self.initialized

        def init(self, **options) -> None:
            self.initialized = True
            signal.signal(signal.SIGTERM, lambda signum, frame: (_ for _ in ()).throw(SystemExit(signum)))

    monkeypatch.setattr(ray_backend, "_ray", FakeRay)
    with stopping_on_sigterm():
        ours = signal.getsignal(signal.SIGTERM)
        ray_backend.RayExecutor(workers=1).ensure_started()
        assert signal.getsignal(signal.SIGTERM) is ours
    assert signal.getsignal(signal.SIGTERM) is not ours  # and the CLI's own is put back after the run


def test_paired_change_counts_matched_rows_and_pools_pairs_by_context() -> None:
    from robusteval.asr import paired_change

    # seed A: 4 samples; before fooled on s0, s1, s2; after on s2, s3; s4 only before has (unmatched)
    before_a = [row(sample=f"s{i}", fooled=i < 3) for i in range(5)]
    after_a = [row(sample=f"s{i}", fooled=i >= 2) for i in range(4)]
    # a skipped row on one side leaves the pair out of the denominator
    before_a.append(row(sample="s9", fooled=True))
    after_a.append(row(sample="s9", outcome="skipped"))
    one = paired_change([(before_a, after_a)])["f (R-)"]
    assert (one["n_pairs"], one["before"], one["after"]) == (4, 3, 2)
    assert (one["only_before"], one["only_after"], one["unmatched"]) == (2, 1, 2)
    assert one["change"]["mean"] == pytest.approx((2 - 3) / 4)
    # a second seed with the same sample ids: its contexts are other clusters, not merged
    before_b = [row(sample=f"s{i}", fooled=False) for i in range(4)]
    after_b = [row(sample=f"s{i}", fooled=False) for i in range(4)]
    pooled = paired_change([(before_a, after_a), (before_b, after_b)])["f (R-)"]
    assert pooled["n_pairs"] == 8 and pooled["change"]["mean"] == pytest.approx(-1 / 8)
    assert pooled["change"]["ci_method"] == "bootstrap"  # 8 contexts, one row each
    # seed A: s0, s1 fooled less, s3 more; seed B moved nothing (4 tied contexts)
    assert pooled["sign_test"] == {"down": 2, "up": 1, "tied": 5, "p": pytest.approx(1.0)}
    lo, hi = pooled["change"]["ci"]
    assert lo <= -1 / 8 <= hi
    # groups by family and direction; R+ rows pair under their own (invariance) criterion
    plus = paired_change([([row(direction="R+", fooled=True)], [row(direction="R+", fooled=False)])])
    assert list(plus) == ["f (R+)"] and plus["f (R+)"]["only_before"] == 1
    with pytest.raises(ValueError, match="pair 1, after: two rows of attack 'a' on sample 's0'"):
        paired_change([(before_a, after_a + after_a[:1])])


def test_sign_test_counts_clusters_not_rows_and_is_exact() -> None:
    """17 contexts, 4 fooled less and none more: the percentile bootstrap of the mean change
    excludes 0, the exact sign test says p = 2 * 0.5**4 = 0.125 (why paired_change has both)."""
    from robusteval.stats import mean_ci, sign_test

    diffs = [-1.0] * 4 + [0.0] * 13
    contexts = [f"c{i}" for i in range(17)]
    assert mean_ci(diffs, contexts)["ci"][1] < 0  # the bootstrap alone would call it clear
    assert sign_test(diffs, contexts) == {"down": 4, "up": 0, "tied": 13, "p": pytest.approx(0.125)}
    # rows of one context are summed first: -1 and +1 in c0 cancel (tied), c1's two rows are one "down"
    got = sign_test([-1.0, 1.0, -1.0, -1.0, 1.0], ["c0", "c0", "c1", "c1", "c2"])
    assert got == {"down": 1, "up": 1, "tied": 1, "p": pytest.approx(1.0)}
    assert sign_test([0.0, 0.0], ["a", "b"])["p"] is None and sign_test([], [])["p"] is None
    # rows moved both ways inside one context only: no context moved on balance, so no p
    from robusteval.asr import paired_change

    before = [row(sample="s0", fooled=True), row(attack="b", sample="s0", fooled=False)]
    after = [row(sample="s0", fooled=False), row(attack="b", sample="s0", fooled=True)]
    both_ways = paired_change([(before, after)])["f (R-)"]
    assert (both_ways["only_before"], both_ways["only_after"], both_ways["sign_test"]["p"]) == (1, 1, None)
    assert sign_test([-1.0] * 10)["p"] == pytest.approx(2 * 0.5 ** 10)  # no clusters: every value its own
    with pytest.raises(ValueError, match="1 cluster labels for 2 values"):
        sign_test([1.0, -1.0], ["a"])


def test_auc_is_the_share_of_attacked_clean_pairs_ranked_right_ties_half() -> None:
    from robusteval.stats import auc, auc_ci

    neg, pos = [0.1, 0.4, 0.4, 0.9], [0.4, 0.8, 0.95]
    pairs = [(1.0 if p > n else 0.5 if p == n else 0.0) for p in pos for n in neg]
    assert auc(neg, pos) == pytest.approx(sum(pairs) / 12) == 0.75  # 9 of 12 pairs (two ties at 0.4)
    assert auc([], pos) is None and auc(neg, []) is None
    got = auc_ci(neg, pos, ["d0", "d0", "d1", "d2"], ["c0", "c1", "c1"], n_boot=200)
    assert got["auc"] == 0.75 and (got["n_clean"], got["n_adversarial"]) == (4, 3)
    assert got["ci_method"] == "two-sample cluster-bootstrap" and got["ci"][0] <= got["auc"] <= got["ci"][1]
    assert auc_ci(neg, pos, ["d"] * 4, None)["ci"] is None  # one clean cluster: nothing to resample
    with pytest.raises(ValueError, match="3 clean cluster labels for 4 texts"):
        auc_ci(neg, pos, ["a", "b", "c"])
    with pytest.raises(ValueError, match="finite"):  # a NaN would rank anywhere: refused, not printed as nan
        auc([0.1, float("nan")], pos)


def test_read_results_reads_a_key_written_twice_once(tmp_path) -> None:
    """Two processes that resumed one folder at once both append a row of one key: the results
    read back hold it once, its later row, and a bad line is still named by its line."""
    from robusteval.results import read_jsonl

    path = tmp_path / "results.jsonl"
    first, other, again = row(sample="s0", fooled=False), row(sample="s1"), row(sample="s0", fooled=True)
    for r in (first, other, again):
        r["key"] = f"a|{r['sample_id']}"
    header = json.dumps({"_fingerprint": {"command": "attack"}}) + "\n"
    path.write_text(header + "".join(json.dumps(r) + "\n" for r in (first, other, again)), encoding="utf-8")
    rows, _ = read_results(path)
    assert [r.key for r in rows] == ["a|s0", "a|s1"] and rows[0].success["beats_reference"] is True
    assert len(read_jsonl(path)) == 2 and len(read_jsonl(path, dedupe=False)) == 3
    path.write_text(path.read_text(encoding="utf-8") + '{"key": "a|s2", "schema": "old"}\n', encoding="utf-8")
    with pytest.raises(RobustevalError, match="line 5"):  # the header, three rows, then the bad one
        read_results(path)
