"""The judge section of a comparison: pairwise flip rates and universal-phrase transfer
(robusteval.compare.judges) and their report tables."""

from __future__ import annotations

import numpy as np
from toy import ScriptedLLM

from robusteval.attacks import load
from robusteval.attacks.runner import run_attacks
from robusteval.compare.judges import fitted_phrase, flip_checks, phrase_transfer
from robusteval.compare.report_html import render
from robusteval.compare.report_md import flip_rows, markdown, transfer_rows
from robusteval.metrics.base import Metric
from robusteval.metrics.pairwise import PairwiseJudge
from robusteval.text import words
from robusteval.types import Sample

SAMPLES = [Sample(id=f"s{i}", task="dialogue", context=(f"Question {i}?",), response=f"Answer number {i}.",
                  reference=f"A gold answer {i}.") for i in range(6)]


class Likes(Metric):
    """10 points, plus 50 for each word in ``liked``."""

    name = "likes"

    def __init__(self, liked: set[str]) -> None:
        super().__init__()
        self.liked = liked

    def _score(self, samples):
        return np.array([min(100.0, 10.0 + 50.0 * sum(w in self.liked for w in words(s.response)))
                         for s in samples])


def test_flip_checks_only_for_pairwise_judges() -> None:
    first = PairwiseJudge(backend=ScriptedLLM(answer=lambda p: "A"))  # always the first answer
    rec = flip_checks(first, SAMPLES[:4], {})
    assert (rec["position"]["flips"], rec["position"]["n"]) == (4, 4)
    assert rec["rubric"]["template"] == "pairwise-reworded" and rec["rubric"]["n"] == 4
    assert "rubric" not in flip_checks(first, SAMPLES[:4], {"rubric_template": None})
    assert flip_checks(Likes(set()), SAMPLES, {}) is None


def test_phrase_transfer_counts_the_targets_rows(tmp_path) -> None:
    surrogate, target, deaf = Likes({"number", "gold"}), Likes({"number", "gold"}), Likes({"gold"})
    dirs = {name: tmp_path / name for name in ("surrogate", "target", "deaf")}
    attack = load("judge-universal-phrase", length=1, vocab=["zebra", "number"])
    run_attacks(SAMPLES, [attack], surrogate, dirs["surrogate"] / "plain" / "attacks" / "results.jsonl",
                progress=False, fit_size=2)
    assert fitted_phrase(dirs["surrogate"]) == ("number", ["s0", "s1"]) and fitted_phrase(dirs["target"]) is None
    got = phrase_transfer(SAMPLES, {"surrogate": surrogate, "target": target, "deaf": deaf}, dirs,
                          tmp_path / "transfer", resume=False, budget=10, dataset="toy", criteria=None, seed=0)
    assert set(got) == {"surrogate"} and set(got["surrogate"]) == {"target", "deaf"}
    # 6 samples, the 2 fitting ones left out: another response + "number" scores 100 on the
    # target (its reference, "A gold answer", 60) and 10 on the deaf one (reference 60)
    on_target, on_deaf = got["surrogate"]["target"]["asr"], got["surrogate"]["deaf"]["asr"]
    assert (on_target["successes"], on_target["n"]) == (4, 4)
    assert (on_deaf["successes"], on_deaf["n"]) == (0, 4)
    suite = {"victims": {"j": {"judge_flips": {"position": {"flips": 3, "n": 4, "rate": 0.75, "ci": [0.3, 0.95]}}}},
             "phrase_transfer": got}
    assert flip_rows(suite) == [["j", "answers swapped", "3/4", flip_rows(suite)[0][3]]]
    assert [r[:3] for r in transfer_rows(suite)] == [["surrogate", "target", "`number`"],
                                                      ["surrogate", "deaf", "`number`"]]
    assert transfer_rows(suite)[0][3].endswith("(4/4)") and transfer_rows(suite)[1][3].endswith("(0/4)")


def test_report_shows_the_judge_tables() -> None:
    suite = {"dataset": "toy", "n_attacked": 4, "victims": {},
             "phrase_transfer": {"a": {"b": {"phrase": "wow", "asr": {"successes": 1, "n": 4, "rate": 0.25,
                                                                       "asr": 0.25, "ci": [0.05, 0.7]}}}}}
    report = {"name": "t", "seed": 0, "suites": {"s": suite},
              "guard": {"detectors": [], "policy": "floor", "thresholds_file": "t.json",
                        "false_positive_rate": {}, "roc": {}}}
    assert "universal-phrase transfer" in markdown(report) and "`wow`" in markdown(report)
    assert "universal-phrase transfer" in render(report)
