"""The pieces behind BENCHMARKS.md "Beside the papers": the reference selection and the
self-reference of AdvEval's and Hu et al.'s reference-based settings, and the paired mean drop
of Hu et al. Table 21."""

from __future__ import annotations

import pytest

from robusteval import Sample, metrics
from robusteval.asr import mean_drop, summarize
from robusteval.attacks.base import ResultRow
from robusteval.data.select import select, with_reference
from robusteval.stats import mean_ci

CTX_A, CTX_B = ("article one",), ("article two",)


def summaries() -> list[Sample]:
    return [Sample(id="a/m1", task="summarization", response="system one", context=CTX_A, reference="ref one",
                   references=("other ref",), human={"relevance": 3.0}, meta={"system_id": "M1"}),
            Sample(id="a/m2", task="summarization", response="system two", context=CTX_A, reference="ref one",
                   human={"relevance": 4.0}, meta={"system_id": "M2"}),
            Sample(id="b/m1", task="summarization", response="system three", context=CTX_B, reference="ref two",
                   human={"relevance": 2.0}, meta={"system_id": "M1"})]


def test_reference_selection_perturbs_the_references() -> None:
    """Hu et al. App. D.1: "the original texts for perturbations, namely the references"."""
    picked = select(summaries(), "reference")
    assert [(s.id, s.response, s.context) for s in picked] == [("a/m1#reference", "ref one", CTX_A),
                                                               ("b/m1#reference", "ref two", CTX_B)]
    assert all(s.human == {} and s.meta["system_id"] == "reference" for s in picked)  # nobody rated them
    with pytest.raises(ValueError, match="has none"):
        select([Sample(id="x", task="dialogue", response="hi", meta={"dataset": "dailydialog-zhao"})], "reference")


def test_self_reference_scores_a_perturbation_against_its_original() -> None:
    """AdvEval Tables 2/4 and Hu Table 21: the perturbed text against the text it came from."""
    picked = with_reference(select(summaries(), "best-per-context", "relevance"), "self")
    assert [(s.response, s.reference, s.references) for s in picked] == [("system two", "system two", ()),
                                                                         ("system three", "system three", ())]
    assert with_reference(summaries(), None) == summaries() == with_reference(summaries(), "dataset")
    bleu = metrics.load("bleu")
    clean, = picked[:1]
    assert bleu.score([clean])[0] == pytest.approx(100.0)
    assert bleu.score([clean.with_response("system")])[0] < 100.0
    with pytest.raises(ValueError, match="reference must be one of"):
        with_reference(summaries(), "first")


def _row(sample: str, before: float, after: float | None, outcome: str = "attacked", **meta) -> dict:
    r = ResultRow("aspect-negation-rule", "aspect", sample, "R-", "o", "x" if after is not None else None, "low",
                  outcome=outcome, victim_before=before, victim_after=after, context_id=sample, meta=dict(meta),
                  success={"beats_reference": False})
    return r.to_dict()


def test_mean_drop_is_paired_over_scored_attacked_rows() -> None:
    rows = [_row("s0", 100.0, 60.0), _row("s1", 80.0, 70.0), _row("s2", 90.0, 95.0),
            _row("s3", 100.0, None),  # ran, produced nothing: no pair to average
            _row("s4", 100.0, 0.0, outcome="skipped"),  # not applicable: not attacked
            _row("s5", 100.0, 0.0, fitting_sample=True)]  # fitting rows stay out of every figure
    d = mean_drop(rows)
    assert d["n"] == 3 and d["mean"] == pytest.approx((40 + 10 - 5) / 3)
    lo, hi = d["ci"]
    assert lo <= d["mean"] <= hi and lo >= -5 and hi <= 40
    assert summarize(rows)["aspect-negation-rule"]["mean_drop"] == d


def test_score_change_is_the_paired_mean_of_after_minus_before_in_every_asr_table() -> None:
    """Does gaming pay: the same rows as the mean drop, the sign turned, and every ASR table
    entry carries it (numerator: the after - before sum; denominator: scored counted rows)."""
    from robusteval.asr import asr_table, score_change

    rows = [_row("s0", 100.0, 60.0), _row("s1", 80.0, 70.0), _row("s2", 90.0, 95.0),
            _row("s3", 100.0, None), _row("s4", 100.0, 0.0, outcome="skipped"),
            _row("s5", 100.0, 0.0, fitting_sample=True), _row("s6", 50.0, None, outcome="rejected")]
    c = score_change(rows)
    assert c["n"] == 3 and c["mean"] == pytest.approx((-40 - 10 + 5) / 3)
    d = mean_drop(rows)
    assert (c["mean"], c["n"]) == (-d["mean"], d["n"]) and c["ci"] == [-d["ci"][1], -d["ci"][0]]
    (entry,) = asr_table(rows).values()
    assert entry["score_change"] == c and entry["attacked"] == 5  # s0-s3 and the refused s6
    # a single scored row: its change, no interval
    one = score_change([_row("s0", 40.0, 70.0)])
    assert (one["mean"], one["n"], one["ci"]) == (30.0, 1, None)
    # the mean drop is the same figure negated: no second bootstrap, no -0.0, empty stays empty
    assert mean_drop([_row("s0", 40.0, 70.0)])["mean"] == -30.0
    flat = mean_drop([_row("s0", 40.0, 40.0), _row("s1", 50.0, 50.0)])
    assert flat["mean"] == 0.0 and str(flat["mean"]) == "0.0" and [str(x) for x in flat["ci"]] == ["0.0", "0.0"]
    assert mean_drop([]) == score_change([]) == {"mean": None, "n": 0, "ci": None, "ci_method": None}
    # a non-finite score (no path writes one today) is counted apart, not averaged, not a crash
    odd = score_change([*rows, _row("s7", 50.0, float("nan"))])
    assert (odd["mean"], odd["n"], odd["nonfinite"]) == (c["mean"], 3, 1) and "nonfinite" not in c


def test_mean_ci_edges() -> None:
    assert mean_ci([]) == {"mean": None, "n": 0, "ci": None, "ci_method": None}
    assert mean_ci([3.0])["ci"] is None
    same = mean_ci([1.0, 3.0, 1.0, 3.0], clusters=["a", "a", "b", "b"])
    assert same["mean"] == 2.0 and same["ci"] == [2.0, 2.0] and same["ci_method"] == "cluster-bootstrap"
    spread = mean_ci([0.0, 10.0, 20.0, 30.0])
    assert spread["ci_method"] == "bootstrap" and spread["ci"][0] < 15.0 < spread["ci"][1]
    with pytest.raises(ValueError, match="finite"):
        mean_ci([1.0, float("nan")])


def test_first_reference_scores_against_the_main_reference_only() -> None:
    """Mu & Lim (Table 2) score CNN/DM summaries against the single highlight; SummEval's other
    references must not lift the score (the default, ``reference``, keeps the best of all)."""
    s = Sample(id="d", task="summarization", response="police arrest a man in paris", context=("doc",),
               reference="storm hits london", references=("police arrest a man in paris",))
    assert metrics.load("rouge1").score([s])[0] == pytest.approx(100.0)
    assert metrics.load("rouge1", against="first_reference").score([s])[0] == pytest.approx(0.0)
    assert "against=first_reference" in metrics.load("rouge1", against="first_reference").signature()


def test_broken_sentence_oracle_bag_from_the_main_reference() -> None:
    """Algorithm 1's bag from the reference the summary is scored against (``first``) or from
    every reference (``all``, the default)."""
    from robusteval import attacks

    doc = "the storm hit london on monday while paris police arrested twelve men"
    s = Sample(id="d", task="summarization", response="x", context=(doc,),
               reference="storm hit london monday", references=("paris police arrested twelve men",))
    first = attacks.load("broken-sentence", oracle_references="first").run(s).adversarial
    both = attacks.load("broken-sentence").run(s).adversarial
    assert first is not None and "storm hit london" in first and "paris" not in first
    assert both is not None and "storm hit london" in both and "arrested" in both
    with pytest.raises(ValueError, match="oracle_references"):
        attacks.load("broken-sentence", oracle_references="best")


def _script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "beside_papers.py"
    spec = importlib.util.spec_from_file_location("beside_papers", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_beside_papers_converts_units_and_averages_as_it_says(tmp_path) -> None:
    """Hu Table 21 cells: our 0-100 mean drop / 25 (the paper's 1-5 scale); Liu Table 6's
    Average: the mean of the four aspects' coefficients. A missing run is said, not zero."""
    import json

    bp = _script()
    assert "not run yet" in bp.hu(tmp_path) and "not run yet" in bp.liu(tmp_path)
    for label in bp.HU_VICTIMS:
        folder = tmp_path / "hu-t21" / bp._slug(label)
        folder.mkdir(parents=True)
        drop = {"mean": 50.0, "n": 40, "ci": [25.0, 75.0], "ci_method": "bootstrap"}
        (folder / "summary.json").write_text(json.dumps({"attacks": {"aspect-negation-rule": {"mean_drop": drop}}}))
    line = next(x for x in bp.hu(tmp_path).splitlines() if x.startswith("| negation-rule"))
    assert line.startswith("| negation-rule | 40 | 0.37 | 2.00 [1.00, 3.00] | 0.07 | 2.00 [1.00, 3.00]")
    aspects = bp.LIU_ASPECTS["usr-topicalchat"]
    cells = {a: {"pearson": {"r": 0.1 * (i + 1)}, "spearman": {"r": 0.2 * (i + 1)}} for i, a in enumerate(aspects)}
    (tmp_path / "liu-t6").mkdir()
    (tmp_path / "liu-t6" / "metaeval.json").write_text(json.dumps({"results": {"usr-topicalchat": {"BLEU-1": cells}}}))
    row = next(x for x in bp.liu(tmp_path).splitlines() if x.startswith("| BLEU-1"))
    assert row.endswith("| 0.250 / 0.500 (0.239 / 0.238) |")  # (0.1+0.2+0.3+0.4)/4, (0.2+...+0.8)/4


def test_usr_personachat_ground_truth_is_selectable() -> None:
    """The original USR PersonaChat file marks its ground truth "Original Ground Truth": one per
    context (AdvEval Table 2's PersonaChat column perturbs it)."""
    import os

    if not os.environ.get("ROBUSTEVAL_DATA"):
        pytest.skip("ROBUSTEVAL_DATA is not set to the human-judgment data folder (CI sets it to ../shared/data)")
    from robusteval import data

    samples = data.load("usr-personachat")
    picked = select(samples, "ground-truth")
    assert len(picked) == len({s.context for s in samples}) == 60
    assert {s.meta["system_id"] for s in picked} == {"Original Ground Truth"}


def test_first_reference_victims_beat_the_original_not_the_reference() -> None:
    """Beats-reference with a victim that compares with the (first) reference: scoring the
    reference against itself would be an unwinnable 100, so the yardstick is the original."""
    from robusteval.attacks.runner import yardstick

    s = Sample(id="d", task="summarization", response="the summary", context=("doc",), reference="the ref")
    for against in ("reference", "first_reference"):
        assert yardstick(s, metrics.load("rouge1", against=against)) == "the summary"
    assert yardstick(s, metrics.load("rouge1", against="context")) == "the ref"
