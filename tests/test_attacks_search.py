from __future__ import annotations

import numpy as np
import pytest

from robusteval import Sample, attacks
from robusteval.attacks.search import ScoreGoal, WordConstraints
from robusteval.attacks.victim import CachedVictim
from robusteval.metrics.base import Metric

GOOD = Sample(id="g", task="dialogue", response="the movie was really good and the actors were great",
              context=("did you like the film ?",))


class WordListMetric(Metric):
    """Test victim: 10 points per word from a fixed 'liked' list, capped at 100."""

    name = "liked-words"
    liked = frozenset({"good", "great", "really", "movie", "actors"})

    def _score(self, samples):
        return np.array([min(100.0, 10.0 * sum(w in self.liked for w in s.response.split())) for s in samples])


def test_goal_and_constraints() -> None:
    g = ScoreGoal(maximize=False, delta=20)
    assert g.reached(80, 55) and not g.reached(80, 65) and g.gain(80, 70) == 10
    assert ScoreGoal(maximize=True, threshold=50).reached(10, 50)
    assert WordConstraints().modifiable(["the", "movie", "was", "x", "great", "!"]) == [1, 4]


def test_textfooler_pos_lowers_score_with_synonyms_within_budget() -> None:
    v = CachedVictim(WordListMetric())
    a = attacks.load("textfooler-pos", goal="score-move", delta=20, trace=True)
    r = a.run(GOOD, v, budget=300)
    assert r.applicable and r.direction == "R+"
    assert r.meta["start_score"] == 50.0 and r.victim_after <= 30.0 and r.meta["goal_reached"]
    changed = [(x, y) for x, y in zip(GOOD.response.split(), r.adversarial.split(), strict=True) if x != y]
    assert 1 <= len(changed) <= 3 and all(x in WordListMetric.liked for x, _ in changed)
    assert v.model_calls <= 300 and r.trace


def test_budget_counts_real_queries_only() -> None:
    v = CachedVictim(WordListMetric())
    a = attacks.load("textfooler-pos", goal="score-move", delta=100)  # unreachable: runs until the budget
    a.run(GOOD, v, budget=12)
    assert v.model_calls <= 12
    calls = v.model_calls
    a.run(GOOD, v, budget=12)  # replays the first 12 queries from the cache, then 12 new ones
    assert v.cache_hits >= 12 and v.model_calls - calls <= 12


def test_textfooler_neg_starts_from_another_response_and_raises_score() -> None:
    bad = Sample(id="b", task="dialogue", response="the weather is nice today and the food is tasty",
                 context=("hi",))
    pool = [bad, GOOD.with_response("the film is good")]  # the only other response to start from
    a = attacks.load("textfooler-neg", goal="score-move", delta=10, seed=1)
    a.prepare(pool)
    r = a.run(bad, CachedVictim(WordListMetric()))
    assert r.original == bad.response and r.meta["start_text"] == "the film is good" and r.direction == "R-"
    # "film" -> its WordNet synonym "movie", a liked word: 10 -> 20
    # the start text's score is kept apart: victim_before is the clean original's (set by the runner)
    assert r.applicable and r.meta["start_score"] == 10.0 and r.victim_after == 20.0 and r.victim_before is None
    assert r.adversarial == "the movie is good"


@pytest.fixture(scope="module")
def tiny_mlm(tiny_bert, tmp_path_factory):
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny_mlm")
    tok = BertTokenizerFast.from_pretrained(tiny_bert)
    tok.save_pretrained(folder)
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=64)).save_pretrained(folder)
    return folder


def test_bert_attack_candidates_from_masked_lm(tiny_mlm) -> None:
    from robusteval.paths import ensure_nltk_data_path

    ensure_nltk_data_path()
    from textattack.shared import AttackedText

    from robusteval.attacks.search import MaskedLMCandidates

    cands = MaskedLMCandidates(str(tiny_mlm), k=5)(AttackedText(GOOD.response), 1)
    assert 1 <= len(cands) <= 5
    assert all(c.words[0] == "the" and c.words[1] != "movie" and c.words[2:] == GOOD.response.split()[2:]
               for c in cands)
    r = attacks.load("bert-attack-pos", mlm=str(tiny_mlm), k=5, goal="score-move").run(GOOD, CachedVictim(WordListMetric()))
    # any replacement of a liked word by another vocabulary word lowers the score
    assert r.direction == "R+" and r.applicable and r.victim_after < r.meta["start_score"]


def test_textfooler_with_a_counter_fitted_embedding_file(tmp_path) -> None:
    # a tiny embedding: "good" and "decent" are close, "great" and "grand" are close
    vecs = {"good": [1.0, 0.1, 0.0], "decent": [0.95, 0.2, 0.0], "great": [0.0, 1.0, 0.1],
            "grand": [0.1, 0.97, 0.1], "movie": [0.0, 0.0, 1.0], "film": [0.1, 0.0, 0.98],
            "banana": [-1.0, 0.0, 0.0]}
    path = tmp_path / "vectors.txt"
    path.write_text("7 3\n" + "".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vecs.items()))
    from textattack.shared import AttackedText

    from robusteval.attacks.search import EmbeddingCandidates

    cands = EmbeddingCandidates(str(path), max_candidates=5)(AttackedText("a good movie"), 1)
    assert [c.words[1] for c in cands] == ["decent"]  # banana is far: cosine < 0.5
    r = attacks.load("textfooler-pos", embedding=str(path), goal="score-move", delta=10).run(GOOD, CachedVictim(WordListMetric()))
    assert r.applicable and r.victim_after < r.meta["start_score"]
    assert r.meta["candidates"].startswith("embedding:")


class ConstantGold(Metric):
    name = "gold"

    def _score(self, samples):
        return np.full(len(samples), 80.0)


def test_gold_gap_goal() -> None:
    from robusteval.attacks.search import GapGoal

    # AdvEval Eq. 3 is strict: a gap of exactly 40 is not enough
    assert GapGoal(maximize=False, gap=40).reached(gold=80, victim=39.9)
    assert not GapGoal(maximize=False, gap=40).reached(gold=80, victim=40)
    r = attacks.load("textfooler-pos", gold=ConstantGold(), gap=40).run(GOOD, CachedVictim(WordListMetric()))
    # victim starts at 50: the gap 80 - victim > 40 needs the score below 40: one swap (50 -> 40) is not enough
    assert r.meta["goal"] == "gold-gap" and r.meta["start_gold"] == 80.0
    assert r.meta["goal_reached"] == (r.gold_after - r.victim_after > 40)
    assert r.meta["goal_reached"] and r.meta["changes"] == 2


def test_chunked_neighbours_match_a_full_sort(tmp_path) -> None:
    from robusteval.attacks.search import load_embedding

    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(2500, 8)).astype(np.float32)  # > 2 chunks of 1,024 rows
    path = tmp_path / "v.txt"
    path.write_text("".join(f"w{i} {' '.join(f'{x:.6f}' for x in v)}\n" for i, v in enumerate(vecs)))
    emb = load_embedding(str(path))
    unit = np.loadtxt(path, usecols=range(1, 9), dtype=np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    for row in (0, 1500, 2499):
        full = np.argsort(-(unit @ unit[row]))[:11]
        assert [emb.index2word(i) for i in emb.nearest_neighbours(row, 10)] == [f"w{i}" for i in full[1:]]


class TenTimesLiked(WordListMetric):
    """Like WordListMetric, 15 points per liked word: the good response starts at 75."""

    name = "liked-words-15"

    def _score(self, samples):
        return np.array([min(100.0, 15.0 * sum(w in self.liked for w in s.response.split())) for s in samples])


def test_target_label_goal_is_the_default() -> None:
    """Chen et al. 2024, §4: TextFooler and BERT-Attack are adapted "for targeted attack with
    target label 0 to generate R+ and target label 1 to generate R-": by default the search
    stops once the victim's score crosses 50, the middle of the 0-100 scale."""
    r = attacks.load("textfooler-pos", min_sim=None).run(GOOD, CachedVictim(TenTimesLiked()))
    assert r.meta["goal"] == "target-label" and r.meta["start_score"] == 75.0
    assert r.meta["goal_reached"] and r.victim_after <= 50.0 < r.victim_after + 15.0  # stopped at the crossing
    with pytest.raises(ValueError, match="score-move"):
        attacks.load("textfooler-pos", delta=10)
    with pytest.raises(ValueError, match="target-label"):
        attacks.load("textfooler-pos", goal="score-move", threshold=40)


def test_textfooler_constraints_same_pos_and_sentence_similarity() -> None:
    """Jin et al. 2020, §2.2: a substitute must keep the word's part of speech and the
    sentence's meaning (USE similarity over a window of 15 words; MiniLM stands in for USE)."""
    from robusteval.attacks.constraints import SamePOS, SentenceSimilarity

    words = ["the", "movie", "was", "really", "good", "and", "the", "actors", "were", "great"]
    swap = [*words[:4], "commodity", *words[5:]]  # "good" (adjective) -> a noun sense of "good"
    fine = [*words[:4], "decent", *words[5:]]
    assert SamePOS()(words, [swap, fine], 4) == [False, True]
    sim = SentenceSimilarity()
    near, far = sim.similarities(words, [fine, ["purple", "seven", "gravel", "under", "quietly", *words[5:]]], 4)
    assert near > far and sim(words, [fine], 4) == [True]
    assert SentenceSimilarity(min_sim=0.999)(words, [fine], 4) == [False]
    # TextAttack's threshold is on the angular scale: angular >= 0.8408 means cosine >= cos(0.5)
    import math

    cos_fine = float(sim.similarities(words, [fine], 4)[0])
    assert sim(words, [fine], 4) == [cos_fine >= math.cos(0.5)]
    a = attacks.load("textfooler-pos", goal="score-move", delta=20)
    r = a.run(GOOD, CachedVictim(WordListMetric()))
    assert r.meta["constrained_out"] > 0  # WordNet offers off-POS / off-meaning swaps; they were dropped
    unconstrained = attacks.load("textfooler-pos", goal="score-move", delta=20, same_pos=False, min_sim=None)
    assert unconstrained.run(GOOD, CachedVictim(WordListMetric())).meta["constrained_out"] == 0
