from __future__ import annotations

import json

import numpy as np
import pytest

from robusteval import Sample, data
from robusteval.metrics.bertscore import BERTScore
from robusteval.paths import minilm_dir

CANDS = [
    "the cat sat on the mat", "a dog ate my homework yesterday", ".", "I love reading books.",
    "How are you today?", "Paris is the capital of France.", "the weather is sunny and warm",
    "no", "He said he would come back tomorrow, but he never did.", "",
]
REFS = [
    "the cat is on the mat", "my homework was eaten by the dog", "A short reference sentence.",
    "Reading books is what I love.", "How are you doing?", "France's capital city is Paris.",
    "It is warm and sunny outside.", "yes", "He promised to return the next day and did not.",
    "An empty candidate scores zero.",
]


@pytest.fixture(scope="module")
def scorer() -> BERTScore:
    return BERTScore()


@pytest.fixture(scope="module")
def reference_scorer():
    from bert_score import BERTScorer

    return BERTScorer(model_type=str(minilm_dir()), num_layers=6)


def test_f1_equals_bert_score_package(scorer, reference_scorer) -> None:
    ours = scorer.prf(CANDS, [[r] for r in REFS])
    p, r, f = reference_scorer.score(CANDS, REFS)
    assert np.abs(ours[:, 2] - f.numpy()).max() < 1e-6
    assert np.abs(ours[:, 0] - p.numpy()).max() < 1e-6
    assert np.abs(ours[:, 1] - r.numpy()).max() < 1e-6


def test_multi_reference_matches_bert_score_grouping(scorer, reference_scorer) -> None:
    groups = [[REFS[i], REFS[(i + 3) % len(REFS)]] for i in range(len(CANDS))]
    ours = scorer.prf(CANDS, groups)
    _, _, f = reference_scorer.score(CANDS, groups)
    assert np.abs(ours[:, 2] - f.numpy()).max() < 1e-6


@pytest.mark.slow
def test_f1_equals_bert_score_on_summeval(data_dir, scorer, reference_scorer) -> None:
    s = data.load("summeval", data_dir, limit=300)
    ours = scorer.prf([x.response for x in s], [[x.reference] for x in s])
    _, _, f = reference_scorer.score([x.response for x in s], [x.reference for x in s])
    assert np.abs(ours[:, 2] - f.numpy()).max() < 1e-6


def test_reference_is_embedded_once_across_rounds() -> None:
    m = BERTScore()
    ref = "The quick brown fox jumps over the lazy dog near the river bank."
    rounds = [[f"candidate {k} number {i}" for i in range(50)] for k in range(3)]
    for k, cands in enumerate(rounds):
        m.prf(cands, [[ref]] * 50)
        assert m.cache.misses == 1 + 50 * (k + 1)  # the reference only the first time
    calls = m.model_calls
    m.prf(rounds[0], [[ref]] * 50)  # everything cached now
    assert m.model_calls == calls


def test_metric_score_kinds_and_scale() -> None:
    s = [Sample(id=str(i), task="summarization", response=c, context=("doc",), reference=r)
         for i, (c, r) in enumerate(zip(CANDS[:5], REFS[:5], strict=True))]
    f = BERTScore(kind="F").score(s)
    p = BERTScore(kind="P").score(s)
    assert np.all((f > 0) & (f <= 100)) and not np.allclose(f, p)
    assert np.array_equal(f, BERTScore(kind="F").score(s))


def test_single_dot_candidate_is_scored(scorer) -> None:
    # the Mu & Lim backdoor: "." against real references; just check it is a finite score
    out = scorer.prf(["."], [["The match ended in a 0-0 draw on Sunday."]])
    assert np.isfinite(out).all()


def test_huge_input_is_truncated_not_crashed(scorer) -> None:
    huge = "word " * 20_000
    s = Sample(id="h", task="summarization", response=huge, context=("d",), reference="a word")
    v = BERTScore().score([s])[0]
    assert np.isfinite(v) and 0 <= v <= 100


def test_rescale_baseline_is_computed_once_and_saved(tmp_path, monkeypatch) -> None:
    import robusteval.metrics.bertscore as bs

    monkeypatch.setattr(bs, "cache_dir", lambda: tmp_path)
    m = BERTScore(rescale=True)
    files = list((tmp_path / "bertscore_baselines").glob("*.json"))
    assert len(files) == 1
    saved = json.loads(files[0].read_text())
    assert saved["pairs"] == 1000 and 0 < saved["F"] < 1
    raw = BERTScore().prf(["the cat sat"], [["the cat is"]])[0]
    resc = m.prf(["the cat sat"], [["the cat is"]])[0]
    b = np.array([saved["P"], saved["R"], saved["F"]])
    assert np.allclose(resc, (raw - b) / (1 - b))
    assert "rescaled" in m.reproducibility()
