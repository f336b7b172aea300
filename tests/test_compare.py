"""The comparison stage: config validation, ASR aggregation, transfer replays, ROC, and a real
end-to-end ``robusteval compare`` on the shipped quickstart data with a tiny learned victim."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from robusteval import detectors, metrics
from robusteval.asr import asr_table, overall
from robusteval.attacks.runner import run_attacks, yardstick
from robusteval.cli.main import main
from robusteval.compare import parse, plots
from robusteval.compare.guarding import roc
from robusteval.compare.replay import ReplayAttack, replays
from robusteval.compare.report_md import gate_rows
from robusteval.errors import RobustevalError
from robusteval.results import read_jsonl
from robusteval.types import Sample

FAST_DETECTORS = ["nonalnum", "speaker_tag", "context_copy", "generic", "judge_injection"]


def tiny_config(tiny_bert: Path) -> dict:
    """Two suites on the quickstart data: a tiny LoRA cross-encoder (trained in the run) and
    ROUGE-L; static attacks plus one search attack; a guard of fast detectors."""
    return {
        # seed 1: a learned victim trains under any seed (the model and data module share it)
        "name": "tiny", "seed": 1, "budget": 12, "n_boot": 50,
        "guard": {"detectors": FAST_DETECTORS, "policy": "floor",
                  "calibrate": {"clean": ["quickstart-references"], "target_fpr": 0.05}},
        "smoothing": {"perturbation": "mask", "n": 4, "options": {"rate": 0.9}, "radii": [1, 2], "tolerance": 50.0},
        "suites": [
            {"name": "dialogue", "dataset": "quickstart-dialogue",
             "split": {"val_fraction": 0.1, "test_fraction": 0.4},
             "attacks": ["generic-cucumber", "previous-utterance", "speaker-tag-teacher", "jumbled-words",
                         "adveval-contraction", "textfooler-neg"],
             "victims": [
                 {"name": "cross-encoder", "label": "tiny evaluator",
                  "train": {"model": {"checkpoint": str(tiny_bert), "lora_r": 4, "lr": 0.005, "max_length": 64,
                                      "embed_adv_weight": 0.5},
                            "data": {"batch_size": 8}, "epochs": 1, "round_epochs": 1,
                            "rounds": {"rounds": 1, "tolerance": 1.0},
                            "held_out": ["adveval-baselines"], "generalization": ["dialogue-rules"],
                            "ablations": ["no-embedding-adversary"]}},
                 "rougeL"]},
            {"name": "summary", "dataset": "quickstart-summary", "split": {"val_fraction": 0.0, "test_fraction": 0.5},
             "attacks": ["aspect-sentence-deletion", "dot-trigger"], "victims": ["rougeL"]},
        ],
    }


@pytest.fixture(scope="module")
def compared(tiny_bert, tmp_path_factory) -> tuple[Path, dict, Path]:
    out = tmp_path_factory.mktemp("compare")
    cfg_path = out / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(tiny_config(tiny_bert)))
    assert main(["compare", "--config", str(cfg_path), "--out-dir", str(out / "run")]) == 0
    return out / "run", json.loads((out / "run" / "report.json").read_text()), cfg_path


# -- units ---------------------------------------------------------------------------------
def row(attack: str, family: str, direction: str, success: dict, applicable: bool = True, **meta) -> dict:
    from robusteval.attacks.base import ResultRow

    return ResultRow(attack, family, "s", direction, "o", "x", "low", outcome="attacked" if applicable else "skipped",
                     success=success, meta=meta, victim_before=50.0, victim_after=60.0, model_calls=1).to_dict()


def test_asr_uses_the_primary_criterion_per_direction_and_skips_fitting_samples() -> None:
    rows = [row("a", "f", "R-", {"beats_reference": True, "expectation": False, "gold": None}),
            row("a", "f", "R-", {"beats_reference": False, "expectation": True, "gold": None}),
            row("a", "f", "R-", {"beats_reference": True, "expectation": True, "gold": None}, fitting_sample=True),
            row("b", "f", "R+", {"beats_reference": None, "invariance": True, "gold": None}),
            row("c", "f", "R-", {}, applicable=False)]
    table = asr_table(rows)
    # both R- rows share one context (sample "s"): a cluster bootstrap, not Wilson
    assert {k: table["f (R-)"]["primary"][k] for k in ("successes", "n", "asr")} == {"successes": 1, "n": 2, "asr": 0.5}
    assert table["f (R-)"]["criteria"]["expectation"]["successes"] == 1
    assert table["f (R-)"]["criteria"]["gold"] == {"successes": 0, "n": 0, "asr": None, "ci": None, "ci_method": None}
    assert table["f (R+)"]["primary"]["asr"] == 1.0
    assert (table["f (R-)"]["skipped"], table["f (R-)"]["fitting"]) == (1, 1)
    assert {k: overall(rows)[k] for k in ("successes", "n", "asr")} == {"successes": 2, "n": 3, "asr": 0.666667}


def test_roc_auc_and_endpoints() -> None:
    perfect = roc(np.array([0.0, 0.1, 0.2]), np.array([0.5, 0.9]))
    assert perfect["auc"] == 1.0 and perfect["points"][0] == [0.0, 0.0] and perfect["points"][-1] == [1.0, 1.0]
    assert roc(np.zeros(4), np.zeros(3))["auc"] == 0.5  # no separation: ties count half
    assert roc(np.array([0.9]), np.array([0.1]))["auc"] == 0.0
    assert roc(np.array([]), np.array([0.3]))["auc"] is None


def test_roc_area_is_the_trapezoid_under_its_points_and_carries_an_interval() -> None:
    """The AUC (Mann-Whitney, ties half) equals the trapezoid area under the curve's own points,
    with ties and without; its interval resamples the clean side's conversations and the
    attacked side's contexts apart."""
    rng = np.random.default_rng(5)
    # coarse scores (many ties), alike within a cluster: 10 documents' 4 references, 10 contexts' 3 rows
    neg = np.repeat(rng.integers(0, 6, size=10), 4) / 5.0
    pos = np.repeat(rng.integers(2, 8, size=10), 3) / 5.0
    got = roc(neg, pos, max_points=10_000, negative_clusters=[f"d{i // 4}" for i in range(40)],
              positive_clusters=[f"c{i // 3}" for i in range(30)], n_boot=300)
    xs, ys = np.array(got["points"]).T
    assert got["auc"] == pytest.approx(float(np.sum((xs[1:] - xs[:-1]) * (ys[1:] + ys[:-1]) / 2)), abs=1e-6)
    assert got["ci_method"] == "two-sample cluster-bootstrap" and got["ci"][0] < got["auc"] < got["ci"][1]
    assert (got["n_clean"], got["n_adversarial"]) == (40, 30)
    alone = roc(neg, pos, n_boot=300)  # every text its own cluster: too narrow an interval
    assert alone["ci_method"] == "two-sample bootstrap" and alone["auc"] == got["auc"]
    assert alone["ci"][1] - alone["ci"][0] < got["ci"][1] - got["ci"][0]
    assert roc(neg, pos, n_boot=0)["ci"] is None


def test_replay_returns_recorded_texts_without_the_old_victims_meta() -> None:
    s = Sample(id="s1", task="dialogue", context=("hi",), response="hello there", reference="hey")
    rec = {"attack": "jumbled-words", "family": "dialogue-rules", "direction": "R-", "sample_id": "s1",
           "outcome": "attacked", "adversarial": "there hello", "meta": {"guard": {}, "reference_score": 3.0, "aspect": "x"}}
    attack = ReplayAttack([rec])
    assert (attack.name, attack.family, attack.direction, attack.needs_victim) == \
        ("jumbled-words", "dialogue-rules", "R-", False)
    r = attack.run(s)
    assert r.adversarial == "there hello" and r.applicable and r.meta == {"aspect": "x"}
    other = attack.run(Sample(id="s2", task="dialogue", context=("hi",), response="yo"))
    assert not other.applicable and other.adversarial is None
    assert [a.name for a in replays([rec, {**rec, "attack": "b"}], only={"b"})] == ["b"]


def test_replayed_texts_get_the_same_verdicts_from_the_same_victim(tmp_path) -> None:
    from robusteval import attacks

    samples = [Sample(id=f"s{i}", task="dialogue", context=("how was the trip?",),
                      response=f"it was great, we saw {i} castles", reference="we loved it") for i in range(3)]
    victim = metrics.load("rougeL", against="context")
    direct = list(run_attacks(samples, [attacks.load("previous-utterance-prefix"), attacks.load("jumbled-words")],
                              victim, tmp_path / "a.jsonl", progress=False))
    again = list(run_attacks(samples, replays(direct), victim, tmp_path / "b.jsonl", progress=False))
    strip = [(r["key"], r["adversarial"], r["victim_after"], r["success"]) for r in direct]
    assert strip == [(r["key"], r["adversarial"], r["victim_after"], r["success"]) for r in again]


def test_reference_based_victims_are_compared_with_the_original_response() -> None:
    s = Sample(id="s", task="summarization", context=("doc",), response="orig", reference="ref")
    assert yardstick(s, metrics.load("rougeL")) == "orig"  # ROUGE vs the reference: the reference scores 100
    assert yardstick(s, metrics.load("rougeL", against="context")) == "ref"
    assert yardstick(Sample(id="t", task="dialogue", response="r"), metrics.load("rougeL", against="context")) == "r"


@pytest.mark.parametrize("patch, message", [
    ({"guard": {"detectors": ["nonalnum"]}}, "thresholds"),
    ({"suites": []}, "suites"),
    ({"bogus": 1}, "unknown key"),
    ({"guard": {"detectors": [], "thresholds": "x"}}, "guard.detectors"),
    ({"smoothing": {"perturbation": "gaussian"}}, "smoothing.perturbation"),
    ({"smoothing": {"n": 0}}, "n >= 1"),
    ({"smoothing": {"draws": 3}}, "unknown key"),
    ({"guard": {"detectors": ["nonalnum"], "thresholds": "shipped"}}, "needs fpr_sets"),
    ({"guard": {"detectors": ["nonalnum"], "thresholds": "t.json", "calibrate": {"clean": ["quickstart-references"]}}},
     "not both"),
])
def test_config_errors_name_the_problem(tiny_bert, patch, message) -> None:
    cfg = {**tiny_config(tiny_bert), **patch}
    with pytest.raises(RobustevalError, match=message):
        parse(cfg)


def test_config_rejects_split_keys_inside_train_data(tiny_bert, tmp_path) -> None:
    from robusteval.compare.learned import data_args

    cfg = parse(tiny_config(tiny_bert))
    suite = cfg.suites[0]
    train = suite.victims[0].train
    assert data_args(train, suite, cfg, None)["test_fraction"] == 0.4
    train.data["test_fraction"] = 0.3
    with pytest.raises(RobustevalError, match="one split"):
        data_args(train, suite, cfg, None)


@pytest.mark.parametrize("where, bad", [("attacks", ["nope"]), ("dataset", "no-such-set"), ("victims", ["nometric"])])
def test_unknown_names_fail_before_any_work(tiny_bert, tmp_path, capsys, where, bad) -> None:
    cfg = tiny_config(tiny_bert)
    cfg["suites"][1][where] = bad
    out = tmp_path / "run"
    assert main(["compare", "--config", str(_dump(cfg, tmp_path)), "--out-dir", str(out)]) == 2
    assert "unknown" in capsys.readouterr().err and not out.exists()


def test_a_victim_that_cannot_score_the_test_samples_fails_before_any_work(tiny_bert, tmp_path, capsys) -> None:
    """configs/compare/judges.yaml ran 51 minutes before its pairwise judge, compared with a
    reference DailyDialog-Zhao does not have, stopped the run; now it fails at once, naming the
    suite, the victim, the sample and the field, and the run folder is not claimed."""
    cfg = tiny_config(tiny_bert)
    cfg["suites"][1]["victims"] = ["rougeL", {"name": "rougeL", "label": "rouge vs fact", "options": {"against": "fact"}}]
    out = tmp_path / "run"
    assert main(["compare", "--config", str(_dump(cfg, tmp_path)), "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "suite 'summary': victim 'rouge vs fact' cannot score" in err and "field 'fact'" in err
    assert "sample 'quickstart-summary/" in err and not out.exists()


def test_a_checked_victim_is_built_once_and_used_by_the_run(tiny_bert, tmp_path, monkeypatch) -> None:
    """The check before any work builds each untrained victim; the run uses that build rather
    than loading the model a second time."""
    from robusteval import metrics

    cfg = tiny_config(tiny_bert)
    cfg["suites"] = cfg["suites"][1:]  # the summary suite: ROUGE-L alone
    cfg.pop("smoothing")
    real, calls = metrics.load, []
    monkeypatch.setattr(metrics, "load", lambda name, **kw: calls.append(name) or real(name, **kw))
    assert main(["compare", "--config", str(_dump(cfg, tmp_path)), "--out-dir", str(tmp_path / "run")]) == 0
    assert calls.count("rougeL") == 1


def test_only_the_first_suites_victims_are_kept_from_the_check(tiny_bert, tmp_path, monkeypatch) -> None:
    """Every suite's victims are checked before any work, but only the first suite's are kept
    for the run: a later suite's victim is released after its check -- before the next one is
    loaded -- and built again just before its suite, so the models of all suites are never held
    at once. Every suite is still checked before the folder is claimed (a bad victim in the last
    suite fails at once)."""
    import gc
    import weakref

    from robusteval import metrics
    from robusteval.compare.pipeline import SuiteData, check_victims
    from robusteval.config.compare import parse_file

    cfg = tiny_config(tiny_bert)
    again = {**cfg["suites"][1], "name": "summary-again",
             "victims": ["rougeL", {"name": "rougeL", "label": "second", "options": {"against": "reference"}}]}
    cfg["suites"] = [cfg["suites"][1], again]
    cfg.pop("smoothing")
    parsed = parse_file(_dump(cfg, tmp_path))
    real, made, alive_at_load = metrics.load, [], []

    def load(name, **kw):  # no gc.collect() here: the release must happen in check_victims
        alive_at_load.append([r() is not None for r in made])
        m = real(name, **kw)
        made.append(weakref.ref(m))
        return m

    monkeypatch.setattr(metrics, "load", load)
    built = check_victims(parsed, {s.name: SuiteData(s, parsed, None, training=False) for s in parsed.suites})
    gc.collect()
    assert list(built) == [("summary", "rougeL")] and len(made) == 3
    # when the later suite's second victim loads, its first is gone; the first suite's is kept
    assert alive_at_load == [[], [True], [True, False]]
    assert made[0]() is built[("summary", "rougeL")] and made[1]() is None and made[2]() is None
    del built
    made.clear()
    assert main(["compare", "--config", str(_dump(cfg, tmp_path)), "--out-dir", str(tmp_path / "run")]) == 0
    assert len(made) == 5  # three checked; the first kept for its suite, the later two built again for theirs

    cfg["suites"][1] = {**cfg["suites"][1], "victims": [{"name": "rougeL", "options": {"against": "fact"}}]}
    out = tmp_path / "bad"
    assert main(["compare", "--config", str(_dump(cfg, tmp_path)), "--out-dir", str(out)]) == 2 and not out.exists()


@pytest.mark.parametrize("content, message", [
    (None, "thresholds file not found"), ("{}", "no 'detectors' table"),
    ('{"detectors": {"nonalnum": {"threshold": 0.5, "signature": "other settings"}}}', "recalibrate"),
    (json.dumps({"detectors": {"nonalnum": {"threshold": 0.5, "signature": detectors.load("nonalnum").identity()}}}),
     "records no clean_split")])
def test_a_bad_thresholds_file_fails_before_the_run_folder_is_claimed(tiny_bert, tmp_path, capsys, content,
                                                                     message) -> None:
    """Else the fixed rerun would be refused: the folder "holds an earlier run"."""
    cfg = tiny_config(tiny_bert)
    thresholds = tmp_path / "t.json"
    if content is not None:
        thresholds.write_text(content)
    cfg["guard"] = {**cfg["guard"], "thresholds": str(thresholds)}
    cfg["guard"].pop("calibrate", None)
    out = tmp_path / "run"
    assert main(["compare", "--config", str(_dump(cfg, tmp_path)), "--out-dir", str(out)]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_false_positives_count_each_text_against_its_own_threshold() -> None:
    """Shipped defaults differ per task and language: the numerator is the texts whose
    suspicion reaches the threshold that applies to *them*, the denominator every text."""
    from robusteval.compare.guarding import false_positive_rates

    class Det:
        def __init__(self, name: str) -> None:
            self.name = name

    clean = {"set": {"a": (np.array([0.8, 0.8, 0.8, 0.1]), np.array([0.75, 1.0, 0.8, 0.2])),
                     "b": (np.array([0.0, 0.9, 0.0, 0.0]), np.array([0.5, 0.5, 0.5, 0.5]))}}
    fpr = false_positive_rates([Det("a"), Det("b")], clean)
    assert (fpr["a"]["set"]["flagged"], fpr["a"]["set"]["n"]) == (2, 4)
    assert (fpr["b"]["set"]["flagged"], fpr["b"]["set"]["n"]) == (1, 4)
    assert (fpr["combined"]["set"]["flagged"], fpr["combined"]["pooled"]["n"]) == (3, 4)
    assert fpr["a"]["set"]["ci_method"] == "wilson"  # no clusters given: every text its own


def test_false_positive_intervals_resample_documents_not_texts() -> None:
    """Several references of one document (replies of one context) are not independent: the
    interval resamples the held-out set's conversations, and pooled sets keep theirs apart."""
    from robusteval.compare.guarding import false_positive_rates
    from robusteval.stats import flag_rate

    class Det:
        name = "a"

    flags = np.array([True] * 6 + [False] * 54)
    docs = [f"doc {i // 6} — 文档" for i in range(60)]  # 10 documents of 6 references: one fully flagged
    clean = {"refs": {"a": (flags.astype(float), np.full(60, 0.5))},
             "more": {"a": (np.zeros(60), np.full(60, 0.5))}}
    fpr = false_positive_rates([Det()], clean, {"refs": docs, "more": docs})
    got = fpr["a"]["refs"]
    assert (got["flagged"], got["n"], got["ci_method"]) == (6, 60, "cluster-bootstrap")
    assert got["ci"] == flag_rate(flags, docs)["ci"] and got["ci"][1] > flag_rate(flags)["ci"][1]
    pooled = fpr["a"]["pooled"]
    assert (pooled["flagged"], pooled["n"]) == (6, 120)
    # the two sets' "doc 0" are two clusters: 20 in all
    assert pooled["ci"] == flag_rate(np.concatenate([flags, np.zeros(60, bool)]),
                                     [f"{s}/{d}" for s in ("refs", "more") for d in docs])["ci"]
    with pytest.raises(ValueError, match="refs: 59 cluster keys for 60"):
        false_positive_rates([Det()], clean, {"refs": docs[:59]})


def test_compare_with_the_shipped_thresholds_reports_what_the_default_guard_flags(tmp_path) -> None:
    """``guard.thresholds: shipped``: the guard a user gets with no thresholds file. Its false
    positives are counted with each clean text's group threshold (English dialogue ``generic``:
    1.0 shipped, 0.75 class default), and the report says where the thresholds came from."""
    from robusteval.detectors.clean import load_clean

    from robusteval import detectors
    from robusteval.compare.guarding import SHIPPED_LABEL

    replies = ["Yeah, I think so.", "okay .", "We could take the train at nine and be there by noon."]
    days = ["Saturday", "Sunday", "Monday", "Friday", "the weekend", "the holiday", "Tuesday", "Thursday", "Wednesday",
            "the first"]  # thirty conversations: clean text is halved by conversation
    rows = [{"id": f"c{i}", "context": [f"Shall we go to the coast on {days[i % 10]}?", f"Maybe, at {i} o'clock?"],
             "response": replies[i % 3]} for i in range(30)]
    clean_file = tmp_path / "clean.jsonl"
    clean_file.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = {"name": "shipped", "seed": 0, "budget": 6, "n_boot": 20,
           "guard": {"detectors": ["generic", "speaker_tag"], "thresholds": "shipped", "fpr_sets": [str(clean_file)]},
           "suites": [{"name": "dialogue", "dataset": "quickstart-dialogue",
                       "split": {"val_fraction": 0.0, "test_fraction": 0.3},
                       "attacks": ["speaker-tag-teacher", "generic-cucumber"], "victims": ["rougeL"]}]}
    out = tmp_path / "run"
    assert main(["compare", "--config", str(_dump(cfg, tmp_path)), "--out-dir", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    guard = report["guard"]
    assert guard["thresholds"] == {"generic": f"{SHIPPED_LABEL}, else 0.75", "speaker_tag": f"{SHIPPED_LABEL}, else 0.7"}
    assert "shipped defaults" in guard["thresholds_file"]
    heldout = load_clean(str(clean_file), "heldout", None)
    generic = detectors.resolve(["generic"])[0]
    susp = generic.detect(heldout)
    expected = int(np.sum(susp >= generic.thresholds(heldout)))
    assert expected < int(np.sum(susp >= generic.threshold))  # the class default would count more
    got = guard["false_positive_rate"]["generic"][str(clean_file)]
    assert (got["flagged"], got["n"]) == (expected, len(heldout))
    # the guarded victim used the same per-sample thresholds: the speaker tag is caught
    guarded = report["suites"]["dialogue"]["victims"]["rougeL"]["variants"]["guarded"]
    assert guarded["available"]
    assert "shipped" in (out / "report.md").read_text(encoding="utf-8")


def test_a_learned_victim_without_validation_contexts_is_refused_before_the_folder_is_claimed(
        tiny_bert, tmp_path, capsys) -> None:
    """As ``robusteval harden`` refuses it (one check, robusteval.training.data.check_splits): the
    rounds choose on val, so training without it would end in an empty choice. A suite with no
    learned victim needs test contexts only (the summary suite here has val_fraction 0)."""
    cfg = tiny_config(tiny_bert)
    cfg["suites"][0]["split"] = {"val_fraction": 0.0, "test_fraction": 0.4}
    out = tmp_path / "run"
    assert main(["compare", "--config", str(_dump(cfg, tmp_path)), "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "compare, suite dialogue: the split of quickstart-dialogue (20 contexts" in err
    assert "leaves val without a context" in err and not out.exists()
    cfg["suites"][0]["split"] = {"val_fraction": 0.1, "test_fraction": 0.0}
    cfg["suites"][0]["victims"] = ["rougeL"]
    assert main(["compare", "--config", str(_dump(cfg, tmp_path)), "--out-dir", str(out)]) == 2
    assert "leaves test without a context" in capsys.readouterr().err and not out.exists()


def test_rerendering_reads_a_learned_suite_without_validation_contexts(tiny_bert) -> None:
    """A run made before the split check existed (a learned victim, val_fraction 0) can still be
    re-rendered: filling in its validity needs the correlation sets, not a trainable split."""
    from robusteval.compare.config import parse
    from robusteval.compare.pipeline import SuiteData
    from robusteval.errors import RobustevalError

    raw = tiny_config(tiny_bert)
    raw["suites"][0]["split"] = {"val_fraction": 0.0, "test_fraction": 0.4}
    cfg = parse(raw)
    with pytest.raises(RobustevalError, match="leaves val without a context"):
        SuiteData(cfg.suites[0], cfg, None)
    data = SuiteData(cfg.suites[0], cfg, None, training=False)
    assert data.val == [] and data.test and data.train
    assert data.correlation and all(data.correlation.values())


def test_a_set_the_metric_cannot_score_is_reported_as_skipped(tmp_path) -> None:
    from robusteval.compare.pipeline import correlations
    from robusteval.compare.report_md import correlation_rows

    no_refs = [Sample(id=f"s{i}", task="dialogue", context=("hi",), response=f"reply {i}", human={"overall": float(i)})
               for i in range(4)]
    corr = correlations(metrics.load("rougeL"), {"no-references": no_refs}, tmp_path, False, 10, 0)
    assert "reference" in corr["no-references"]["_skipped"]
    victim = {"variants": {"plain": {"available": True, "correlation": corr}}}
    assert correlation_rows(victim)[1] == [["no-references", "skipped", "", corr["no-references"]["_skipped"]]]


def test_a_variant_that_correlated_fewer_pairs_shows_its_own_n() -> None:
    """A reject guard's refused responses are NaN and left out of its Spearman: its cell names
    the n it was computed on, not the plain variant's."""
    from robusteval.compare.report_md import correlation_rows
    from robusteval.metaeval import correlate

    human = np.arange(60, dtype=float)
    guarded_scores = human.copy()
    guarded_scores[:19] = np.nan
    plain, guarded = correlate(human[::-1], human, n_boot=0), correlate(guarded_scores, human, n_boot=0)
    assert (plain["n"], guarded["n"], guarded["dropped_nonfinite"]) == (60, 41, 19)
    victim = {"variants": {"plain": {"available": True, "correlation": {"set": {"overall": plain}}},
                           "guarded": {"available": True, "correlation": {"set": {"overall": guarded}}}}}
    head, rows = correlation_rows(victim)
    assert head == ["set", "aspect", "n (plain)", "plain", "guarded"]
    assert rows == [["set", "overall", "60", "-1.000", "1.000 (n 41)"]]


def test_the_ablation_table_keeps_r_minus_and_r_plus_apart() -> None:
    from robusteval.compare.report_md import ablation_rows
    from robusteval.stats import proportion

    r_minus, r_plus = proportion([True, False, False, False]), proportion([True, True])
    ab = {"rows": ["base"], "attack_families": ["f (R-)"], "primary": {"base": {"f (R-)": r_minus}},
          "by_direction": {"base": {"R-": r_minus, "R+": r_plus}}, "test_spearman": {"base": 0.3}}
    head, (row,) = ablation_rows(ab)
    assert head[:3] == ["model", "R- ASR %", "R+ invariance failures %"]
    assert row[1].startswith("25.0 [") and row[2].startswith("100.0 [") and row[3] == row[1]
    old = {k: v for k, v in ab.items() if k != "by_direction"}  # a report made before the split
    assert ablation_rows(old)[1][0][1:3] == ["n/a", "n/a"]


def test_the_suite_heading_counts_responses_and_conversations_apart() -> None:
    from robusteval.compare.report_md import attacked_label

    assert attacked_label({"n_attacked": 17, "n_attacked_conversations": 17}) == "17 attacked test contexts"
    assert attacked_label({"n_attacked": 40, "n_attacked_conversations": 17}) == \
        "40 attacked test responses from 17 conversations"  # select: all
    assert attacked_label({"n_attacked": 17}) == "17 attacked test contexts"  # a report made before


# -- end to end ----------------------------------------------------------------------------
def test_report_has_every_variant_family_and_section(compared) -> None:
    out, report, _ = compared
    assert report["schema"] == "robusteval.compare/2"
    assert report["split"] == "conversation/file-name" and "whole conversations together" in (out / "report.md").read_text()
    assert {p.name for p in out.iterdir()} >= {"report.json", "report.md", "report.html", "guard"}
    dlg = report["suites"]["dialogue"]
    learned, rouge = dlg["victims"]["tiny evaluator"], dlg["victims"]["rougeL"]
    assert all(learned["variants"][v]["available"] for v in ("plain", "guarded", "trained", "guarded+trained"))
    assert not rouge["variants"]["trained"]["available"] and "learned" in rouge["variants"]["trained"]["reason"]
    fams = set(learned["variants"]["plain"]["asr"])
    assert fams == {"dialogue-rules (R-)", "adveval-baselines (R+)", "word-search (R-)"}
    # the guard floors the speaker-tag and copy attacks: their ASR cannot go up behind it
    plain, guarded = learned["variants"]["plain"]["asr"], learned["variants"]["guarded"]["asr"]
    assert guarded["dialogue-rules (R-)"]["primary"]["asr"] <= plain["dialogue-rules (R-)"]["primary"]["asr"]
    # ... and it is the guard doing it: every speaker-tagged reply is flagged by speaker_tag and floored to 0
    tagged = [r for r in read_jsonl(out / "dialogue" / "tiny-evaluator" / "guarded" / "transfer" / "results.jsonl")
              if r["attack"] == "speaker-tag-teacher" and r["outcome"] == "attacked"]
    assert tagged and all("speaker_tag" in r["meta"]["guard"]["adversarial"]["flagged"] and r["victim_after"] == 0.0
                          for r in tagged)
    # adaptive rows: the search attack and the R- attacks rerun guard-aware; R+ rewrites only transfer
    ta = learned["variants"]["guarded"]["transfer_vs_adaptive"]
    assert set(ta) == set(dlg["adaptive"]) and "textfooler-neg" in ta and ta["textfooler-neg"]["adaptive"]["n"] > 0
    assert "speaker-tag-teacher" in ta and not any(a.startswith("adveval-") for a in ta)
    aware = [r for r in read_jsonl(out / "dialogue" / "tiny-evaluator" / "guarded" / "adaptive" / "results.jsonl")
             if r["attack"] == "speaker-tag-teacher" and r["outcome"] == "attacked"]
    # the tag was flagged, so the guard-aware rerun tried disguises of it
    assert aware and all(r["meta"]["evasion"]["flagged_before"] and r["meta"]["evasion"]["variants"] > 0
                         for r in aware)
    gen = learned["generalization"]
    assert list(gen["asr"]) == ["none", "trained on dialogue-rules", "all"]
    assert gen["asr"]["none"] == {k: v["primary"]["asr"] for k, v in plain.items()}
    training = learned["training"]
    assert training["held_out"] == ["adveval-baselines"] and "textfooler-neg" in training["train_attacks"]
    assert not Path(training["trained"]["export"]).is_absolute()  # paths relative to the out-dir
    corr = learned["variants"]["plain"]["correlation"]["quickstart-dialogue (test split)"]["overall"]
    assert corr["n"] == 3 * dlg["n_attacked"] and corr["spearman"]["r"] is not None
    flagged = learned["variants"]["guarded"]["correlation"]["quickstart-dialogue (test split)"]["_flagged"]
    assert flagged["n"] == corr["n"] and 0 <= flagged["flagged"] <= flagged["n"]
    g = report["guard"]
    assert set(g["false_positive_rate"]) == {*FAST_DETECTORS, "combined"}
    assert set(g["roc"]) == {"dialogue", "summary"}
    sc = g["roc"]["dialogue"]["speaker_tag"]
    assert sc["n_adversarial"] > 0 and sc["auc"] > 0.5  # speaker tags are caught
    dist = learned["variants"]["plain"]["scores"]
    assert len(dist["clean"]) == dlg["n_attacked"] and len(dist["adversarial"]) > 0
    assert dlg["n_attacked_conversations"] == dlg["n_attacked"]  # best-per-context: one response each
    assert report["provenance"]["config"]["name"] == "tiny" and report["provenance"]["packages"]["torch"]
    ab = learned["ablation"]
    assert ab["rows"] == ["base", "hardened", "no-embedding-adversary"]
    assert ab["primary"]["base"] == {k: v["primary"] for k, v in plain.items()}
    assert ab["by_direction"]["hardened"] == learned["variants"]["trained"]["by_direction"]
    assert ab["by_direction"]["base"] == learned["variants"]["plain"]["by_direction"]
    assert [r["round"] for r in training["trained"]["rounds"]] == [0, 1]
    # the headline's R-/R+ split adds up to the overall ASR
    d = learned["variants"]["plain"]["by_direction"]
    assert d["R-"]["n"] + d["R+"]["n"] == learned["variants"]["plain"]["overall"]["n"]
    assert d["R-"]["successes"] + d["R+"]["successes"] == learned["variants"]["plain"]["overall"]["successes"]
    assert d["R+"]["n"] == plain["adveval-baselines (R+)"]["primary"]["n"]
    md = (out / "report.md").read_text()
    assert "## Headline" in md and "generalization" in md and "adaptive vs transfer" in md
    assert "R+ invariance failures" in md and "ablation" in md
    # every round of every hardened model is in the gate table, with the gate's decision
    n_rounds = sum(len(m["rounds"]) for m in [training["trained"], *training["by_family"].values(),
                                              *training["ablations"].values()])
    assert len(gate_rows(training)) == n_rounds
    assert "adversarial rounds and the validation gate" in md
    page = (out / "report.html").read_text()
    assert "Ablation: the hardened model" in page and "R+ invariance failures" in page
    assert "validation gate" in page
    # smoothing: both smoothed variants of the learned victim, the plain one of ROUGE-L
    assert learned["variants"]["smoothed"]["available"] and learned["variants"]["smoothed+trained"]["available"]
    assert rouge["variants"]["smoothed"]["available"] and not rouge["variants"]["smoothed+trained"]["available"]
    cert = learned["variants"]["smoothed"]["certified"]
    assert set(cert["radius"]) == {"1", "2"} and cert["covers"] == "any substitution of up to k units"
    assert all(f["n"] == dlg["n_attacked"] for f in cert["radius"].values())
    assert cert["radius"]["2"]["certified"] <= cert["radius"]["1"]["certified"]
    smooth_ta = learned["variants"]["smoothed"]["transfer_vs_adaptive"]
    assert list(smooth_ta) == ["textfooler-neg"]  # only search attacks are rerun against the smoothed metric
    assert "certified smoothed scores" in md and "smoothed + trained" in md and "Certified smoothed" in page
    # both defenses at once: the guard in front of the smoothed metric, attacked guard-aware
    both = learned["variants"]["guarded+smoothed"]
    assert both["available"] and learned["variants"]["guarded+smoothed+trained"]["available"]
    assert rouge["variants"]["guarded+smoothed"]["available"]
    assert not rouge["variants"]["guarded+smoothed+trained"]["available"]
    assert set(both["transfer_vs_adaptive"]) == set(dlg["adaptive"]) and "certified" not in both
    tagged = [r for r in read_jsonl(out / "dialogue" / "tiny-evaluator" / "guarded_smoothed" / "transfer" /
                                    "results.jsonl") if r["attack"] == "speaker-tag-teacher" and r["outcome"] == "attacked"]
    assert tagged and all(r["victim_after"] == 0.0 for r in tagged)  # the floor policy still applies
    assert "guarded + smoothed" in md


def test_the_report_tolerance_renders_verdicts_without_changing_the_run(compared, tmp_path, capsys) -> None:
    """``tolerance`` decides the page's verdicts and is recorded in report.json; it is not part
    of the run's fingerprint, so a finished run re-renders (--report-only) or resumes with another."""
    run, report, cfg_path = compared
    assert report["provenance"]["tolerance"] == {"spearman_drop": 0.02, "flagged": 0.05, "invariance_rise": 0.05}
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    assert main(["compare", "--out-dir", str(copy), "--report-only", "--tolerance.spearman_drop", "0.5"]) == 0
    again = json.loads((copy / "report.json").read_text())
    assert again["provenance"].pop("tolerance")["spearman_drop"] == 0.5
    assert again == {**report, "provenance": {k: v for k, v in report["provenance"].items() if k != "tolerance"}}
    assert "mean Spearman falls by at most 0.5" in (copy / "report.md").read_text()
    # re-rendered without a tolerance (a screenshot, a code update): the recorded one stays
    assert main(["compare", "--out-dir", str(copy), "--report-only"]) == 0
    assert json.loads((copy / "report.json").read_text())["provenance"]["tolerance"]["spearman_drop"] == 0.5
    assert "mean Spearman falls by at most 0.5" in (copy / "report.md").read_text()
    assert main(["compare", "--config", str(cfg_path), "--out-dir", str(copy), "--resume",
                 "--tolerance.flagged", "0.01"]) == 0
    assert json.loads((copy / "report.json").read_text())["provenance"]["tolerance"]["flagged"] == 0.01
    capsys.readouterr()
    assert main(["compare", "--out-dir", str(copy), "--report-only", "--tolerance.flagged", "5"]) == 2
    err = capsys.readouterr().err
    assert "tolerance" in err and "fractions in [0, 1]" in err


def test_gate_rows_show_each_round_and_which_was_kept() -> None:
    detail = {"asr": 0.25, "ci": [0.1, 0.5], "n": 8, "successes": 2}
    rounds = [{"round": 0, "lr": None, "val_spearman": 0.3, "val_sets": {"a": 0.2, "b": 0.4}, "val_asr": 0.25,
               "val_asr_detail": detail, "objective": 0.05, "valid": True, "kept": True, "added": 0},
              {"round": 1, "lr": 2.5e-4, "val_spearman": 0.2, "val_sets": {"a": 0.25, "b": 0.15}, "val_asr": 0.0,
               "val_asr_detail": {"asr": 0.0, "ci": [0.0, 0.3], "n": 8, "successes": 0},
               "objective": 0.2, "valid": False, "kept": False, "added": 7}]
    rows = gate_rows({"trained": {"rounds": rounds}, "ablations": {"offline": {"rounds": rounds[:1]}}})
    assert [r[0] for r in rows] == ["hardened", "hardened", "ablation offline"]
    assert rows[0][1:6] == ["0", "base", "0", "0.300", "–"] and rows[0][6] == "25.0 [10.0, 50.0]"
    assert rows[1][5] == "b (-0.250)"  # the set that fell most, not the one that rose
    # with the round's kept predictions, the paired interval of that change
    rounds[1]["val_set_changes"] = {"b": {"change": -0.25, "ci": [-0.41, -0.08]}, "a": {"change": 0.05, "ci": None}}
    assert gate_rows({"trained": {"rounds": rounds}})[1][5] == "b (-0.250 [-0.410, -0.080])"
    assert rows[0][-2:] == ["yes", "**yes**"] and rows[1][-2:] == ["**no**", ""]
    assert rows[1][2] == "0.00025" and rows[1][3] == "7"


def test_resume_reuses_everything_and_gives_the_same_report(compared) -> None:
    out, report, cfg_path = compared
    round_file = out / "dialogue" / "tiny-evaluator" / "training" / "trained" / "round_1" / "model" / "fit.json"
    before = round_file.stat().st_mtime_ns
    assert main(["compare", "--config", str(cfg_path), "--out-dir", str(out), "--resume"]) == 0
    again = json.loads((out / "report.json").read_text())
    assert round_file.stat().st_mtime_ns == before  # nothing retrained
    report["provenance"].pop("created"), again["provenance"].pop("created")
    assert again == report
    # without --resume the finished run is not overwritten
    assert main(["compare", "--config", str(cfg_path), "--out-dir", str(out)]) == 2


def test_a_moved_run_folder_resumes_without_retraining(compared, tmp_path) -> None:
    """Nothing in a run folder records its own place: moved (the old place gone), it resumes,
    its trained models are read where they are now and named by their weights."""
    out, report, cfg_path = compared
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    hidden = out.with_name(out.name + ".hidden")
    out.rename(hidden)
    try:
        fit_json = moved / "dialogue" / "tiny-evaluator" / "training" / "trained" / "round_1" / "model" / "fit.json"
        before = fit_json.stat().st_mtime_ns
        assert main(["compare", "--config", str(cfg_path), "--out-dir", str(moved), "--resume"]) == 0
        assert fit_json.stat().st_mtime_ns == before  # nothing retrained
        again = json.loads((moved / "report.json").read_text())
        report = {**report, "provenance": {k: v for k, v in report["provenance"].items() if k != "created"}}
        again["provenance"].pop("created")
        assert again == report
    finally:
        hidden.rename(out)


def test_resume_refuses_another_guard_policy(compared, tmp_path, capsys) -> None:
    """Observation 1: a `policy: flag` resume reported the old `floor` ASR."""
    out, _, cfg_path = compared
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["guard"]["policy"] = "flag"
    capsys.readouterr()
    assert main(["compare", "--config", str(_dump(cfg, tmp_path)), "--out-dir", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "different run" in err and "config.guard.policy: 'floor' -> 'flag'" in err
    assert json.loads((out / "report.json").read_text())["guard"]["policy"] == "floor"  # untouched


def _without_timestamps(report: dict) -> dict:
    report = json.loads(json.dumps(report))
    report["provenance"].pop("created")
    return report


def test_same_config_and_seed_give_identical_reports_across_processes(tiny_bert, tmp_path) -> None:
    """Two separate processes with different string-hash seeds: set iteration order must not
    leak into attacks, training or the report."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(tiny_bert)))
    reports = []
    for k, hashseed in enumerate(("1", "2")):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        out = tmp_path / f"run{k}"
        done = subprocess.run([sys.executable, "-m", "robusteval.cli.main", "compare", "--config", str(cfg),
                               "--out-dir", str(out)], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        reports.append(json.loads((out / "report.json").read_text()))
    a, b = (_without_timestamps(r) for r in reports)
    assert a == b
    assert reports[0]["provenance"]["created"]  # the only field allowed to differ


def _chromium() -> str:
    import shutil

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("Debian chromium is not installed (scripts/setup.sh installs it when run as root)")
    return found


def test_report_renders_in_headless_chromium(compared, tmp_path) -> None:
    """Chromium parses the page (DOM dump) and paints the plots (screenshot pixels)."""
    from matplotlib.image import imread

    from robusteval.compare.plots import COLORS

    out, report, _ = compared
    browser = _chromium()
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    url = (out / "report.html").resolve().as_uri()
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    learned_victims = 1
    victims = sum(len(s["victims"]) for s in report["suites"].values())
    for kind, n in (("asr", victims), ("distributions", victims), ("correlation", victims),
                    ("generalization", learned_victims), ("roc", len(report["suites"])),
                    ("tradeoff", len(report["suites"]))):
        assert dom.count(f'data-plot="{kind}"') == n, kind
    assert dom.count("<svg") >= 2 * victims + victims + learned_victims + 2 * len(report["suites"])
    assert dom.count('<section class="card') == victims and '<details class="config">' in dom
    for cls in ("card-table", "asr r-minus", "asr r-plus", "adaptive", "correlation", "flagged", "fpr", "provenance",
                "packages"):
        assert f'<table class="{cls}"' in dom, cls
    # the pipeline's validity intervals reach the cards: a paired change for every defended variant
    guarded = report["suites"]["dialogue"]["victims"]["tiny evaluator"]["variants"]["guarded"]
    assert guarded["validity"]["change_vs_plain"]["ci_method"] == "paired context-bootstrap"
    flagged = guarded["correlation"]["quickstart-dialogue (test split)"]["_flagged"]
    assert flagged["ci"] is not None and flagged["rate"] == round(flagged["flagged"] / flagged["n"], 6)
    assert "<script" not in dom and "<link" not in dom and 'src="http' not in dom  # self-contained
    # R+ invariance failures get their own chart, never bars beside R- successes
    with_plus = sum(plots.has_direction(v, "R+") for s in report["suites"].values() for v in s["victims"].values())
    assert dom.count('data-plot="asr-plus"') == with_plus
    shot = tmp_path / "report.png"
    # tall enough to reach the first victim's bars below the verdict cards and trade-off plots
    subprocess.run([*flags, "--window-size=1200,6000", f"--screenshot={shot}", url], capture_output=True,
                   timeout=120)
    pixels = (imread(shot)[..., :3] * 255).round().astype(int)
    assert pixels.shape[:2] == (6000, 1200)

    def painted(hex_color: str) -> int:
        rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)])
        return int((np.abs(pixels - rgb).sum(axis=-1) <= 6).sum())

    for variant, color in COLORS.items():  # every variant's bars are on screen
        assert painted(color) > 200, variant


def test_rerendering_an_old_run_restores_the_per_context_flags_from_its_logs(compared, tmp_path, capsys) -> None:
    """A run written before ``_flagged.contexts`` (or the per-set Spearman changes) existed gets
    them from its score logs, so its pooled flag interval is clustered by context like a new
    run's."""
    from robusteval.compare.render import render_report
    from robusteval.compare.story import flagged_pooled

    out, _, _ = compared
    old = tmp_path / "run"
    shutil.copytree(out, old)
    report = json.loads((old / "report.json").read_text())  # as the run folder holds it now
    stripped = json.loads((old / "report.json").read_text())
    guarded = stripped["suites"]["dialogue"]["victims"]["tiny evaluator"]["variants"]["guarded"]
    for per in guarded["correlation"].values():
        per["_flagged"].pop("contexts")
    guarded["validity"]["change_vs_plain"].pop("per_set")  # and a report from before per-set changes
    assert flagged_pooled(guarded["correlation"])["ci_method"] == "wilson"
    (old / "report.json").write_text(json.dumps(stripped))
    again = render_report(old)
    assert "render_report:" not in capsys.readouterr().err
    assert again == report  # every context count back, nothing else changed
    # a run of another split: today's split would rebuild other test contexts, so nothing is
    # added; "conversation" (before 2026-11-28) split this registered set as today's code does
    for scheme, rebuilt in (("context", False), (None, False), ("conversation", True)):
        (old / "report.json").write_text(json.dumps({**stripped, "split": scheme}))
        again = render_report(old)
        err = capsys.readouterr().err
        assert ("cannot be rebuilt" in err) is not rebuilt, scheme
        entry = again["suites"]["dialogue"]["victims"]["tiny evaluator"]["variants"]["guarded"]
        assert ("per_set" in entry["validity"]["change_vs_plain"]) is rebuilt, scheme
    # the score logs deleted since: the recorded validity stays as it was, never blanked
    (old / "report.json").write_text(json.dumps(stripped))
    for log in old.rglob("scores/*.jsonl"):
        log.unlink()
    kept = render_report(old)["suites"]["dialogue"]["victims"]["tiny evaluator"]["variants"]
    for name, entry in stripped["suites"]["dialogue"]["victims"]["tiny evaluator"]["variants"].items():
        assert kept[name].get("validity") == entry.get("validity"), name


def test_rerendering_restores_the_paired_tests_and_score_changes_exactly_from_the_logs(compared, tmp_path,
                                                                                      capsys) -> None:
    """Each variant records the digest of the rows behind its figures, which its attack logs
    reproduce; a report stripped of the paired tests and score changes (as a run made before
    they existed) gets them back from those logs, identical to what the run wrote."""
    from robusteval.compare.pipeline import rows_digest
    from robusteval.compare.render import logged_rows, render_report
    from robusteval.results import slug

    out, _, _ = compared
    old = tmp_path / "run"
    shutil.copytree(out, old)
    report = json.loads((old / "report.json").read_text())
    stripped = json.loads((old / "report.json").read_text())
    n = 0
    for s_name, suite in stripped["suites"].items():
        for v_name, victim in suite["victims"].items():
            for name, entry in victim["variants"].items():
                if not entry.get("available"):
                    continue
                rows = logged_rows(old / slug(s_name) / slug(v_name), name)
                assert rows is not None and rows_digest(rows) == entry["rows_sha256"], (v_name, name)
                entry.pop("paired_vs_plain", None)
                for a in entry["asr"].values():
                    a.pop("score_change")
                n += 1
    assert n >= 6
    (old / "report.json").write_text(json.dumps(stripped))
    again = render_report(old)
    assert "render_report:" not in capsys.readouterr().err
    assert again == report


@pytest.mark.parametrize("name", sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "configs" / "compare")
                                         .glob("*.yaml")))
def test_every_shipped_compare_config_parses_and_builds_its_attacks_and_victims(name) -> None:
    """Each shipped config is valid, and every attack (with its options) and every victim that
    needs no training can be built from it: a renamed attack or metric option fails here, not
    an hour into a run."""
    from robusteval import attacks, metrics
    from robusteval.config.compare import parse_file

    cfg = parse_file(Path(__file__).resolve().parents[1] / "configs" / "compare" / f"{name}.yaml")
    for suite in cfg.suites:
        chosen = attacks.select(suite.attacks, cfg.seed, suite.attack_options)
        assert chosen and all(a.name for a in chosen)
        for opts_of in suite.attack_options:
            assert opts_of in {a.name for a in chosen}, f"{name}: options for an attack the suite does not run"
        for victim in suite.victims:
            made_by_a_run = str(victim.options.get("checkpoint", "")).startswith("runs/")
            if made_by_a_run:  # the export of another documented run (its config says which): known name only
                assert victim.name in metrics.names(), f"{name}: unknown victim {victim.name!r}"
            elif victim.train is None:
                assert callable(metrics.load(victim.name, **victim.options).score)


@pytest.mark.parametrize("name", sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "configs" / "compare")
                                         .glob("*.yaml")))
def test_every_shipped_compare_config_can_score_its_real_test_samples(name, data_dir) -> None:
    """What a run checks before it claims its folder (``pipeline.check_victims``), on the real
    data: every victim that needs no training can score every test sample of its suite (a
    pairwise judge on a set without references failed this an hour into judges.yaml). Victims
    whose checkpoint another documented run exports (``runs/...``) are left out: not here."""
    import dataclasses

    from robusteval.compare.pipeline import SuiteData, check_victims
    from robusteval.config.compare import parse_file

    cfg = parse_file(Path(__file__).resolve().parents[1] / "configs" / "compare" / f"{name}.yaml")
    suites = [dataclasses.replace(s, victims=[v for v in s.victims
                                              if not str(v.options.get("checkpoint", "")).startswith("runs/")])
              for s in cfg.suites]
    cfg = dataclasses.replace(cfg, suites=suites)
    built = check_victims(cfg, {s.name: SuiteData(s, cfg, str(data_dir), training=False) for s in suites})
    assert set(built) == {(suites[0].name, v.label) for v in suites[0].victims if v.train is None}


def test_parse_file_reads_and_validates_like_the_command_line(tmp_path) -> None:
    from robusteval.config.compare import parse_file
    from robusteval.config.parsing import ConfigError

    good = tmp_path / "good.yaml"
    good.write_text("suites:\n  - {name: s, dataset: quickstart-dialogue, attacks: [generic-hello],"
                    " victims: [{name: rougeL}]}\nguard: {detectors: [nonalnum], thresholds: t.json}\n")
    cfg = parse_file(good)
    assert cfg.suites[0].victims[0].name == "rougeL" and cfg.raw["suites"][0]["dataset"] == "quickstart-dialogue"
    # the command's own settings are welcome in the file and stay out of the comparison's raw
    full = tmp_path / "full.yaml"
    full.write_text(good.read_text() + "tolerance: {spearman_drop: 0.01}\nworkers: 3\nout_dir: runs/x\n")
    assert parse_file(full).raw == cfg.raw
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text() + "seeed: 3\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*seeed"):
        parse_file(bad)
    with pytest.raises(ConfigError, match=r"missing\.yaml: file not found"):
        parse_file(tmp_path / "missing.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dialogue", "summarization"])
def test_shipped_real_data_configs_run_on_a_few_contexts(name, data_dir, tmp_path) -> None:
    """The real-data configs, cut down: their non-learned victims, the fast detectors, three
    test contexts; every correlation set is scored and every attack family reported."""
    root = Path(__file__).resolve().parents[1]
    cfg = yaml.safe_load((root / "configs" / "compare" / f"{name}.yaml").read_text())
    cfg.update(budget=10, n_boot=20)
    cfg["guard"]["detectors"] = FAST_DETECTORS
    for suite in cfg["suites"]:
        suite["limit"] = 3
        suite["victims"] = [v for v in suite["victims"] if "train" not in v]
    report = main(["compare", "--config", str(_dump(cfg, tmp_path)), "--out-dir", str(tmp_path / "run"),
                   "--data-dir", str(data_dir)])
    assert report == 0
    result = json.loads((tmp_path / "run" / "report.json").read_text())
    suite = next(iter(result["suites"].values()))
    assert suite["n_attacked"] == 3
    for victim in suite["victims"].values():
        corr = victim["variants"]["plain"]["correlation"]
        assert set(corr) == set(suite["correlation_sets"]) and all("_skipped" not in c for c in corr.values())
        assert victim["variants"]["guarded"]["asr"]


def _dump(cfg: dict, folder: Path) -> Path:
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_report_only_re_splits_only_the_sets_read_at_their_test_split() -> None:
    """A run recorded as split by "conversation" (2026-11-26 to 11-28) on registered sets is
    re-split alike today; a set correlated whole is read whole, whatever its name; a path read
    at its test split was split by the path as written then, so it is refused."""
    from types import SimpleNamespace

    from robusteval.compare.render import refuse_other_split
    from robusteval.errors import RobustevalError

    old = {"split": "conversation"}
    whole = SimpleNamespace(dataset="dailydialog-zhao", correlation=["data/other.jsonl", "usr-topicalchat"])
    refuse_other_split(old, [whole])
    tested = SimpleNamespace(dataset="dailydialog-zhao", correlation=[{"dataset": "data/other.jsonl", "split": "test"}])
    with pytest.raises(RobustevalError, match="split its data by 'conversation'"):
        refuse_other_split(old, [tested])
    with pytest.raises(RobustevalError, match="by a scheme it did not record, this code"):
        refuse_other_split({}, [whole])
