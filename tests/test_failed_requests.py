"""Per-sample attribution of failed LLM requests (``on_llm_error="midpoint"``): the judge names
the samples that got a fallback score, a score or attack log marks exactly their rows, and a
resume retries those rows and keeps every finished one -- a failure is never a cached result."""

from __future__ import annotations

import json

import numpy as np
from toy import LengthMetric, ScriptedLLM

from robusteval import Sample, attacks
from robusteval.attacks.base import Perturbation
from robusteval.attacks.runner import run_attacks
from robusteval.attacks.victim import CachedVictim
from robusteval.metrics.committee import Committee
from robusteval.metrics.inner import failed_since, failure_marks, fallback_total, inner_metrics
from robusteval.metrics.llm_judge import LLMJudge
from robusteval.results import read_jsonl, score_summary, score_with_log, sum_counters


class Flaky(ScriptedLLM):
    """A backend whose requests fail (an empty answer: the backend's fallback placeholder) for
    every prompt containing one of ``down`` (a text, or a tuple of texts that must all be in
    it); the set can change between runs."""

    def __init__(self, down: set[str], **kw) -> None:
        super().__init__(answer=lambda p: "Score: 8", **kw)
        self.down = down

    def generate(self, prompts, n=1, temperature=0.0, max_new_tokens=32, seed=0, **kw):
        out = super().generate(prompts, n=n, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
        def fails(p: str) -> bool:
            return any(all(t in p for t in ((d,) if isinstance(d, str) else d)) for d in self.down)

        return [[] if fails(p) else o for p, o in zip(prompts, out, strict=True)]


def dlg(sid: str, response: str) -> Sample:
    return Sample(id=sid, task="dialogue", response=response, context=("Hi!", f"How was the trip, {sid}?"))


SAMPLES = [dlg("a", "It was lovely, thanks."), dlg("b", "Rainy but fun."), dlg("c", "Too long a drive."),
           dlg("d", "We saw the sea.")]


def judge(backend: Flaky) -> LLMJudge:
    return LLMJudge(backend=backend, template="adveval-dialogue", on_llm_error="midpoint")


def test_the_judge_names_the_samples_whose_request_failed() -> None:
    j = judge(Flaky({"Rainy", "the sea"}))
    marks = failure_marks(j)
    scores = j.score(SAMPLES)
    assert failed_since(marks) == {"b": 1, "d": 1} and j.report()["fallbacks"]["llm_failed"] == 2
    assert scores[1] == scores[3] == 50.0 and scores[0] != 50.0  # the midpoint, for those two only
    marks = failure_marks(j)
    j.score(SAMPLES[:1])
    assert failed_since(marks) == {}  # only what was recorded after the marks


def test_a_resumed_score_log_retries_exactly_the_failed_rows(tmp_path) -> None:
    backend = Flaky({"Rainy"})  # "b" is the last sample of the first chunk: it carries the counters
    log = tmp_path / "scores.jsonl"
    first = score_with_log(judge(backend), SAMPLES, log, resume=False, chunk=2)
    rows = {r["id"]: r for r in read_jsonl(log)}
    assert first[1] == 50.0 and rows["b"]["llm_failed"] == 1
    assert not any("llm_failed" in rows[i] for i in "acd")
    assert score_summary(log, "abcd")["llm_failed_rows"] == 1
    assert sum_counters(read_jsonl(log))["fallbacks.llm_failed"] == 1

    backend.down.clear()  # the server is back
    backend.prompts.clear()
    second = score_with_log(judge(backend), SAMPLES, log, resume=True, chunk=2)
    assert len(backend.prompts) == 1 and "Rainy" in backend.prompts[0]  # only "b" was asked again
    assert second[1] == first[0] and np.array_equal(np.delete(second, 1), np.delete(first, 1))
    rows = {r["id"]: r for r in read_jsonl(log)}
    assert "llm_failed" not in rows["b"] and len(rows) == 4
    assert score_summary(log, "abcd")["llm_failed_rows"] == 0
    # the counters stay the run's history: the failed request happened, and the retried row that
    # replaced the chunk's carrier row took its counters over
    assert sum_counters(read_jsonl(log))["fallbacks.llm_failed"] == 1

    backend.prompts.clear()
    score_with_log(judge(backend), SAMPLES, log, resume=True, chunk=2)
    assert backend.prompts == []  # nothing left to retry


def test_a_committee_calibration_failure_is_no_scored_sample_s() -> None:
    """The calibration set may share ids with the scored samples: its failed requests are the
    scale's (counted apart), not a failure of the scored sample with the same id."""
    backend = Flaky({"calibration text 0"})
    members = [judge(backend), judge(backend)]
    calib = [dlg("a", f"calibration text {i}") for i in range(3)]
    backend.answer = lambda p: f"Score: {3 + sum(map(ord, p)) % 5}"
    committee = Committee(members, normalize="quantile", calibration=calib)
    marks = failure_marks(committee)
    committee.score(SAMPLES)
    assert failed_since(marks) == {}
    assert list(committee.report()["normalize"]["calibration_fallbacks"].values()) == [{"llm_failed": 1}] * 2


def test_the_stack_is_walked_once_and_a_committee_member_s_fallback_blocks_the_cache() -> None:
    backend = Flaky({"Rainy"})
    members = [judge(backend), LengthMetric()]
    committee = Committee(members)
    victim = CachedVictim(committee)
    assert [type(m).__name__ for m in inner_metrics(victim)] == ["CachedVictim", "Committee", "LLMJudge",
                                                                  "LengthMetric"]
    before = fallback_total(victim)
    victim.score(SAMPLES[1], ["Rainy but fun."])
    assert fallback_total(victim) > before  # the member's llm_failed counts
    victim.score(SAMPLES[1], ["Rainy but fun."])
    assert victim.cache_hits == 0  # a batch in which a member fell back is not cached


def test_a_metric_with_an_analyze_method_keeps_its_fallbacks_in_the_cache_check() -> None:
    """A detector's own counters are left out of fallback_total by its class (is_detector), not
    by having an ``analyze`` method: a plugin metric that happens to define one still blocks the
    victim cache when it falls back; a detector's abstentions still do not."""
    from robusteval import detectors

    class Analyzing(DownOnHello):
        def analyze(self, samples):  # a metric's own helper, nothing to do with detectors
            return [{"n": len(s.response)} for s in samples]

    metric = Analyzing()
    before = fallback_total(metric)
    metric.score([dlg("x", "hello there")])
    assert fallback_total(metric) == before + 1
    det = detectors.load("source_support")
    det.fallbacks["abstained_language:fr"] += 3
    assert fallback_total(det) == 0


def test_a_resumed_attack_log_attacks_again_the_samples_whose_requests_failed(tmp_path) -> None:
    backend = Flaky({("trip, b?", "ucumber")})  # only b's adversarial text: "Cucumber" in b's dialogue
    chosen = [attacks.load("generic-cucumber"), attacks.load("generic-hello")]
    samples = SAMPLES[:2]
    out = tmp_path / "results.jsonl"
    run_attacks(samples, chosen, judge(backend), out, progress=False)
    rows = {r["key"]: r for r in read_jsonl(out)}
    failed = {k for k, r in rows.items() if r["meta"].get("llm_failed")}
    assert {rows[k]["sample_id"] for k in failed} == {"b"} and len(failed) == 2  # both of b's rows
    kept = {k: r for k, r in rows.items() if r["sample_id"] == "a"}
    counters = sum_counters((r["meta"] for r in rows.values()), "victim_counters")
    assert counters["fallbacks.llm_failed"] == 1  # b's one adversarial text the judge was asked about

    backend.down = set()
    backend.prompts.clear()
    run_attacks(samples, chosen, judge(backend), out, resume=True, progress=False)
    assert backend.prompts and all("trip, b?" in p for p in backend.prompts)  # only b was attacked again
    rows = {r["key"]: r for r in read_jsonl(out)}
    assert len(rows) == 4 and not any(r["meta"].get("llm_failed") for r in rows.values())
    assert {k: r for k, r in rows.items() if r["sample_id"] == "a"} == kept
    again = sum_counters((r["meta"] for r in rows.values()), "victim_counters")
    assert again["fallbacks.llm_failed"] == counters["fallbacks.llm_failed"]  # history, taken over


def test_a_replayed_row_does_not_inherit_the_source_run_s_failure_mark() -> None:
    from robusteval.compare.replay import ReplayAttack

    row = {"attack": "generic-cucumber", "family": "generic", "direction": "R-", "sample_id": "a",
           "outcome": "attacked", "adversarial": "Cucumber", "meta": {"llm_failed": 1, "kept": True}}
    result = ReplayAttack([row]).run(SAMPLES[0])
    assert result.meta == {"kept": True}  # else every resume of the transfer run would retry it


class Duck:
    """A committee member that is no Metric: anything with ``score``."""

    def score(self, samples):
        return np.array([10.0 * len(s.response.split()) for s in samples])


def test_a_committee_whose_first_member_is_a_plain_scorer_is_still_walked() -> None:
    committee = Committee([Duck(), judge(Flaky({"Rainy"}))])
    marks = failure_marks(committee)
    committee.score(SAMPLES)
    assert failed_since(marks) == {"b": 1}


def test_a_judge_inside_a_guard_s_committee_detector_is_walked_and_its_failure_not_memoized() -> None:
    from robusteval.detectors.committee import CommitteeDisagreement

    from robusteval import detectors

    backend = Flaky({"Rainy"})
    det = CommitteeDisagreement(members=[judge(backend), Duck()])
    guarded = detectors.guard(LengthMetric(), [det], policy="floor")
    marks = failure_marks(guarded)
    guarded.score(SAMPLES)
    assert failed_since(marks) == {"b": 1}
    assert det.report()["fallbacks"] == {"llm_failed": 1}
    backend.down.clear()
    backend.prompts.clear()
    guarded.score(SAMPLES)
    assert len(backend.prompts) == 1 and "Rainy" in backend.prompts[0]  # only b was asked again


def test_a_transfer_log_redoes_the_rows_whose_recorded_text_changed(tmp_path) -> None:
    from robusteval.compare.replay import replays

    chosen = [attacks.load("generic-cucumber"), attacks.load("generic-hello")]
    base = list(run_attacks(SAMPLES[:3], chosen, LengthMetric(), tmp_path / "base.jsonl", progress=False))
    out = tmp_path / "transfer.jsonl"
    first = {r["key"]: r for r in run_attacks(SAMPLES[:3], replays(base), LengthMetric(delay=0.0), out,
                                              progress=False)}
    changed = [dict(r, adversarial="a brand new text with many more words in it")
               if r["sample_id"] == "b" and r["attack"] == "generic-hello" else r for r in base]
    again = {r["key"]: r for r in run_attacks(SAMPLES[:3], replays(changed), LengthMetric(delay=0.0), out,
                                              resume=True, progress=False)}
    redone = {k for k in again if again[k] != first[k]}
    assert redone == {next(k for k, r in first.items() if r["sample_id"] == "b" and r["attack"] == "generic-hello")}
    assert again[next(iter(redone))]["adversarial"] == "a brand new text with many more words in it"


def test_a_committee_detector_names_the_failed_candidate_not_every_text_of_its_sample(tmp_path) -> None:
    """An attack's candidates share their sample's id: a failure lands on the one text whose
    request failed, which alone is counted and asked again (in memory and in a saved log)."""
    from robusteval.detectors.calibrate import detect_logged
    from robusteval.detectors.committee import CommitteeDisagreement

    from robusteval.results import JsonlLog

    backend = Flaky({"Rainy"})
    det = CommitteeDisagreement(members=[judge(backend), Duck()])
    texts = [SAMPLES[0].with_response(t) for t in ("Fine, thanks.", "Rainy but fun.", "Sunny and warm.")]
    marks = failure_marks(det)
    rows = det.analyze(texts)
    assert [r.get("llm_failed") for r in rows] == [None, 1, None]
    assert failed_since(marks) == {"a": 1}  # recorded under the id the caller (a victim, a log) knows
    assert det.report()["fallbacks"] == {"llm_failed": 1}
    assert texts[1].id == "a" and [r["members"] for r in rows]  # the caller's samples keep their ids

    backend.down.clear()
    backend.prompts.clear()
    det.analyze(texts)
    assert len(backend.prompts) == 1 and "Rainy" in backend.prompts[0]  # the other two were memoized

    saved = tmp_path / "suspicion.jsonl"
    backend.down.add("Rainy")
    fresh = CommitteeDisagreement(members=[judge(backend), Duck()])
    detect_logged(fresh, texts, JsonlLog(saved, key="key"))
    assert [bool(r.get("llm_failed")) for r in read_jsonl(saved)] == [False, True, False]
    backend.down.clear()
    backend.prompts.clear()
    again = CommitteeDisagreement(members=[judge(backend), Duck()])
    detect_logged(again, texts, JsonlLog(saved, key="key", resume=True))
    assert len(backend.prompts) == 1 and "Rainy" in backend.prompts[0]  # only the failed one, resumed
    assert not any(r.get("llm_failed") for r in read_jsonl(saved))


class PickSuffix(Perturbation):
    """A toy universal attack: fitted, it appends the suffix the victim scored highest on the
    fitting samples (a failed request's midpoint can win the pick)."""

    name = "pick-suffix"
    family = "universal"
    direction = "R-"
    needs_fit = True
    SUFFIXES = (" alpha", " beta")

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.suffix: str | None = None

    def fit(self, samples, victim) -> None:
        means = [np.mean([victim.score(s, [s.response + x])[0] for s in samples]) for x in self.SUFFIXES]
        self.suffix = self.SUFFIXES[int(np.argmax(means))]

    def fitted_state(self) -> dict:
        return {"suffix": self.suffix}

    def load_fitted(self, state: dict) -> None:
        self.suffix = state["suffix"]

    def perturb(self, sample, rng):
        return sample.response + self.suffix


def test_a_trigger_fitted_over_a_failed_request_is_fitted_again_and_its_rows_made_again(tmp_path) -> None:
    backend = Flaky({"beta"})
    backend.answer = lambda p: "Score: 3" if "beta" in p else "Score: 4"  # healthy, beta scores lower
    out = tmp_path / "results.jsonl"
    samples = SAMPLES[:3]
    run_attacks(samples, [PickSuffix()], judge(backend), out, progress=False, fit_on=samples[:2])
    fitted = json.loads((tmp_path / "fitted.json").read_text())["pick-suffix"]
    assert fitted["suffix"] == " beta" and fitted["llm_failed"] == 2  # the midpoint (5.5) beat alpha's 4
    assert {r["adversarial"][-5:] for r in read_jsonl(out)} == {" beta"}

    backend.down.clear()
    run_attacks(samples, [PickSuffix()], judge(backend), out, resume=True, progress=False, fit_on=samples[:2])
    fitted = json.loads((tmp_path / "fitted.json").read_text())["pick-suffix"]
    assert fitted["suffix"] == " alpha" and "llm_failed" not in fitted
    rows = read_jsonl(out)
    assert len(rows) == 3 and {r["adversarial"][-6:] for r in rows} == {" alpha"}  # every row made again

    backend.prompts.clear()
    run_attacks(samples, [PickSuffix()], judge(backend), out, resume=True, progress=False, fit_on=samples[:2])
    assert backend.prompts == []  # a clean fit is reused, and so is every row made with it


def test_a_refit_that_picks_the_same_constant_keeps_the_rows(tmp_path) -> None:
    """The rows' version is what the fit applies, not its search history: a fit done again after
    a failed request has other scores in its history, and the same null response attacks the same."""
    from robusteval.attacks.judge import NullModel

    responses = ("Good answer here.", "Bad.")
    backend = Flaky({"Bad."})  # Bad's request fails: its midpoint still loses to Good's 90 of 100
    backend.answer = lambda p: "Score: 30" if "Bad." in p else "Score: 90"
    out = tmp_path / "results.jsonl"
    samples = SAMPLES[:3]
    run_attacks(samples, [NullModel(responses=responses)], judge(backend), out, progress=False, fit_on=samples[:2])
    first = json.loads((tmp_path / "fitted.json").read_text())["null-model"]
    rows = {r["key"]: r for r in read_jsonl(out)}
    assert first["llm_failed"] == 2 and len(rows) == 3 and first["response"] == "Good answer here."

    backend.down.clear()
    run_attacks(samples, [NullModel(responses=responses)], judge(backend), out, resume=True, progress=False,
                fit_on=samples[:2])
    again = json.loads((tmp_path / "fitted.json").read_text())["null-model"]
    assert "llm_failed" not in again and again["history"] != first["history"]  # fitted again, other scores
    assert {r["key"]: r for r in read_jsonl(out)} == rows  # the same constant: not one row made again


def test_a_second_fit_of_one_universal_attack_starts_its_history_afresh() -> None:
    from robusteval import Sample as S
    from robusteval.attacks.universal import GATrigger

    ga = GATrigger(preset="fast", rounds=1, generations=1, pop_size=4)
    fit_on = [S(id="x", task="summarization", response="r", reference="ref one")]
    ga.fit(fit_on, CachedVictim(LengthMetric()))
    once = list(ga.history)
    ga.fit(fit_on, CachedVictim(LengthMetric()))
    assert len(ga.history) == len(once) == 1  # harden rounds fit one attack object in several folders


def test_a_comparison_names_every_result_file_with_rows_on_a_failed_request(tmp_path) -> None:
    """compare's report, its HTML and the command's output list the files whose rows rest on a
    failed request, so a midpoint fallback is never silent in the headline."""
    from robusteval.compare.report_html import warnings
    from robusteval.compare.report_md import failure_warnings
    from robusteval.results import failed_rows

    backend = Flaky({"Rainy"})
    score_with_log(judge(backend), SAMPLES, tmp_path / "suite" / "scores" / "judge.jsonl", resume=False, chunk=2)
    run_attacks(SAMPLES[:2], [attacks.load("generic-hello")], judge(Flaky({("trip, b?", "ello")})),
                tmp_path / "suite" / "plain" / "results.jsonl", progress=False)
    (tmp_path / "suite" / "plain" / "fitted.json").write_text(json.dumps({"ga-trigger": {"llm_failed": 3},
                                                                           "null-model": {"response": "x"}}))
    (tmp_path / "clean.jsonl").write_text('{"key": "k", "suspicion": 0.1}\n')
    (tmp_path / "other.jsonl").write_text('[1, 2]\n{"meta": "text"}\nnot json\n{"x": 1}\n')  # not ours: no crash
    found = failed_rows(tmp_path)
    assert found == {"suite/plain/fitted.json": 1, "suite/plain/results.jsonl": 1, "suite/scores/judge.jsonl": 1}
    report = {"llm_failed": found}
    lines = failure_warnings(report)
    assert len(lines) == 3 and lines[0].startswith("suite/plain/results.jsonl: 1 row(s) rest on a failed LLM")
    assert lines[2].startswith("suite/plain/fitted.json: 1 fitted state(s) rest on a failed LLM")
    assert all(line.endswith("rerun the same command with --resume to ask again for exactly those") for line in lines)
    assert 'data-callout="llm-failed"' in warnings(report) and warnings({}) == ""


def test_every_command_says_the_same_thing_about_failed_requests() -> None:
    """score, attack and compare print one sentence (retry_note): how many, which (up to five),
    why they hold the midpoint and what a resume does."""
    from robusteval.metrics.inner import retry_note

    assert retry_note(2, "scored row(s)") == (
        "2 scored row(s) rest on a failed LLM request scored at the midpoint (on_llm_error: midpoint): "
        "rerun the same command with --resume to ask again for exactly those")
    named = retry_note(7, "attacked sample(s)", ["a", "b", "c", "d", "e", "f", "g"])
    assert named.startswith("7 attacked sample(s) (a, b, c, d, e, ...) rest on") and "f" not in named.split("rest")[0]
    assert retry_note(1, "attacked sample(s)", ["你好"]).startswith("1 attacked sample(s) (你好) rest on")


class DownOnHello(LengthMetric):
    """A stand-in for a judge under on_llm_error="midpoint" whose server fails every request
    about a reply that says hello: scored at the midpoint, counted and named, as LLMJudge does."""

    name = "down-on-hello"

    def _score(self, samples):
        out = super()._score(samples)
        for i, s in enumerate(samples):
            if "hello" in s.response.lower():
                out[i] = 50.0
                self.fallbacks["llm_failed"] += 1
                self.failed_requests.append(s.id)
        return out


def test_score_and_attack_print_the_retry_note(tmp_path, capsys) -> None:
    """The commands themselves print retry_note's sentence: score for its failed rows, attack
    for the samples whose attacked text met a failed request (every generic-hello text here)."""
    from robusteval.cli.main import main
    from robusteval.metrics.inner import retry_note

    path = tmp_path / "in.jsonl"
    rows = [("a", ["Hi!", "How was the trip?"], "Hello, it was lovely."), ("b", ["你好！"], "很好，谢谢。"),
            ("c", ["مرحبا"], "شكرا، بخير."), ("d", ["Salut !"], "hello là-bas")]
    path.write_text("".join(json.dumps({"id": i, "context": c, "response": r}, ensure_ascii=False) + "\n"
                            for i, c, r in rows), encoding="utf-8")
    metric = "test_failed_requests:DownOnHello"
    assert main(["score", "--metric", metric, "--input", str(path), "--task", "dialogue",
                 "--out-dir", str(tmp_path / "score")]) == 0
    assert retry_note(2, "scored row(s)") in capsys.readouterr().out  # "a" and "d"
    assert main(["attack", "--metric", metric, "--dataset", str(path), "--task", "dialogue",
                 "--attacks", "generic-hello", "--out-dir", str(tmp_path / "attack")]) == 0
    assert retry_note(4, "attacked sample(s)", ["a", "b", "c", "d"]) in capsys.readouterr().out


def test_a_failed_request_of_adveval_s_own_gold_judge_marks_the_sample(tmp_path) -> None:
    """AdvEval builds its gold judge on first use and keeps it in a dict per task: a failure of
    that judge marks the sample's rows, both in the unit that built it (a list no mark knew)
    and in later units (the dict is walked)."""
    from test_attacks_adveval import Generator

    backend = Flaky({"trip, b?", "trip, d?"})
    attack = attacks.load("adveval-neg", generator=Generator(), candidates=2, max_iters=1,
                          gold={"backend": backend, "on_llm_error": "midpoint", "n": 1})
    order = [SAMPLES[1], SAMPLES[0], SAMPLES[3]]  # b builds the judge and fails; a is fine; d fails
    rows = read_jsonl(run_attacks(order, [attack], LengthMetric(), tmp_path / "results.jsonl", progress=False).path)
    marked = {r["sample_id"]: r["meta"].get("llm_failed") for r in rows}
    assert marked["b"] and marked["d"] and not marked["a"]
