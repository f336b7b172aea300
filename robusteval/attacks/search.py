"""Score-valued word-substitution search attacks, TextAttack-style: goal + constraints +
transformation + search, with goals on a real-valued score instead of a class label.

* ``textfooler-pos`` / ``textfooler-neg``: TextFooler (Jin et al. 2020, AAAI) adapted to
  evaluators as in AdvEval's baselines (Chen et al. 2024, Tables 2-4): word importance by
  deletion, candidates from WordNet (textattack's ``WordSwapWordNet``), greedy substitution.
* ``bert-attack-pos`` / ``bert-attack-neg``: BERT-Attack (Li et al. 2020, EMNLP): the same
  search, candidates from a masked LM's top-k predictions at the masked word (any HF masked
  LM via ``mlm=``; none ships on PyPI, so users pass theirs; the tests use a tiny one).

``-pos`` = R+: start from the good response and push the victim's score *down* while the
meaning is kept (synonyms only). ``-neg`` = R-: start from a bad response (another sample's
response, seeded, as AdvEval's baselines do) and push the victim's score *up*. The budget is
the number of texts the victim really scores (cache hits are free), 300 by default.

Goals: ``target-label`` (default; AdvEval §4 runs TextFooler and BERT-Attack "for targeted
attack with target label 0 to generate R+ and target label 1 to generate R-": the victim's
score crossing ``threshold``, 50 on the 0-100 scale), ``score-move`` (a drop / rise of at
least ``delta``), or, with ``gold=`` a gold evaluator (any Metric), AdvEval's gold-vs-victim
gap of ``gap`` points. TextFooler also applies its POS and sentence-similarity constraints.
Candidates: WordNet, or ``embedding=`` a counter-fitted word-vector file (TextFooler's
choice), or a masked LM (BERT-Attack).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from robusteval.attacks.base import ENGLISH, Attack, AttackResult, OtherResponses
from robusteval.attacks.constraints import USE_THRESHOLD, SamePOS, SentenceSimilarity
from robusteval.attacks.registry import register_attack
from robusteval.types import Sample

GOALS = ("target-label", "score-move")
LABEL_THRESHOLD = 50.0  # the target label's boundary on the 0-100 scale


@dataclass(frozen=True)
class ScoreGoal:
    """Reach the goal when the score moved by ``delta`` in the wanted direction, or crossed
    ``threshold`` when one is given."""

    maximize: bool
    delta: float = 20.0
    threshold: float | None = None

    def gain(self, before: float, now: float) -> float:
        return now - before if self.maximize else before - now

    def reached(self, before: float, now: float) -> bool:
        if self.threshold is not None:
            return now >= self.threshold if self.maximize else now <= self.threshold
        return self.gain(before, now) >= self.delta


@dataclass(frozen=True)
class GapGoal:
    """AdvEval's gold-vs-victim gap (Chen et al. 2024, Eq. 3): reached when the victim sits
    *more than* ``gap`` points below (R+) or above (R-) a gold evaluator's score of the same
    text -- strict, like the success criterion the runner reports."""

    maximize: bool
    gap: float = 40.0

    def reached(self, gold: float, victim: float) -> bool:
        return (victim - gold if self.maximize else gold - victim) > self.gap


@dataclass(frozen=True)
class WordConstraints:
    """Which words may change: not stop words, not shorter than ``min_length`` (so contraction
    fragments such as the "m" of "i 'm" stay intact), each at most once, and at most
    ceil(``max_ratio`` x words) in total."""

    max_ratio: float = 0.3
    min_length: int = 2

    def modifiable(self, words: Sequence[str]) -> list[int]:
        from spacy.lang.en.stop_words import STOP_WORDS

        return [i for i, w in enumerate(words)
                if len(w) >= self.min_length and w.lower() not in STOP_WORDS and any(c.isalpha() for c in w)]


class WordNetCandidates:
    """Synonym candidates from textattack's ``WordSwapWordNet`` transformation."""

    def __init__(self, max_candidates: int = 30) -> None:
        from robusteval.paths import ensure_nltk_data_path, no_nltk_downloads

        ensure_nltk_data_path()
        from textattack.transformations import WordSwapWordNet

        with no_nltk_downloads():
            self.transformation = WordSwapWordNet()
        self.max_candidates = max_candidates
        self.name = "textattack.WordSwapWordNet"

    def __call__(self, text: Any, index: int) -> list[Any]:
        # textattack collects WordNet synonyms in a set, whose order changes with the process's
        # string-hash seed: sort, so the same seed gives the same attack in every process
        out = sorted(self.transformation(text, indices_to_modify={index}), key=lambda t: t.text)
        return out[: self.max_candidates]


def load_embedding(path: str, max_words: int | None = None) -> Any:
    """A word-vector text file (``word v1 v2 ...`` per line, e.g. the counter-fitted
    vectors of Mrkšić et al. 2016 that TextFooler uses) as a TextAttack ``WordEmbedding``
    with its nearest-neighbour matrix precomputed (cosine; TextAttack would otherwise
    download its own)."""
    from textattack.shared import WordEmbedding

    words, rows = [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            parts = line.rstrip().split(" ")
            if len(parts) < 3:
                continue  # a word2vec header or an empty line
            words.append(parts[0])
            rows.append([float(x) for x in parts[1:]])
            if max_words and len(words) >= max_words:
                break
    if not words:
        raise ValueError(f"{path}: no word vectors found")
    matrix = np.asarray(rows, dtype=np.float32)
    unit = matrix / np.clip(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12, None)
    k = min(101, len(words))  # self first, then the 100 nearest
    nn = np.zeros((len(words), k), dtype=np.int64)
    for start in range(0, len(words), 1024):  # row chunks: never the full N x N matrix in memory
        sims = unit[start:start + 1024] @ unit.T
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1)
        nn[start:start + len(sims)] = np.take_along_axis(top, order, axis=1)
    return WordEmbedding(matrix, {w: i for i, w in enumerate(words)}, dict(enumerate(words)), nn)


class EmbeddingCandidates:
    """Nearest neighbours in a counter-fitted embedding (TextAttack's ``WordSwapEmbedding``),
    kept only above TextFooler's cosine threshold (0.5)."""

    def __init__(self, path: str, max_candidates: int = 50, min_cos_sim: float = 0.5) -> None:
        from robusteval.paths import ensure_nltk_data_path

        ensure_nltk_data_path()
        from textattack.transformations import WordSwapEmbedding

        self.embedding = load_embedding(path)
        self.transformation = WordSwapEmbedding(max_candidates=max_candidates, embedding=self.embedding)
        self.min_cos_sim = min_cos_sim
        self.name = f"embedding:{path}"

    def __call__(self, text: Any, index: int) -> list[Any]:
        word = text.words[index].lower()
        out = []
        for cand in self.transformation(text, indices_to_modify={index}):
            new = cand.words[index].lower()
            try:
                sim = self.embedding.get_cos_sim(word, new)
            except KeyError:
                continue
            if sim >= self.min_cos_sim:
                out.append(cand)
        return out


class MaskedLMCandidates:
    """Top-k whole-word predictions of a masked LM at the masked word (BERT-Attack)."""

    def __init__(self, mlm: str, k: int = 30) -> None:
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(mlm)
        self.model = AutoModelForMaskedLM.from_pretrained(mlm).eval()
        self.k = k
        self.name = f"mlm:{mlm}"

    def __call__(self, text: Any, index: int) -> list[Any]:
        import torch

        words = list(text.words)
        original = words[index]
        masked = text.replace_word_at_index(index, self.tokenizer.mask_token)
        enc = self.tokenizer(masked.text, return_tensors="pt", truncation=True, max_length=256)
        pos = (enc["input_ids"][0] == self.tokenizer.mask_token_id).nonzero()
        if len(pos) == 0:
            return []
        with torch.no_grad():
            logits = self.model(**enc).logits[0, int(pos[0])]
        out = []
        for tok_id in torch.topk(logits, min(self.k * 3, logits.shape[-1])).indices.tolist():
            tok = self.tokenizer.convert_ids_to_tokens(tok_id)
            special = tok in self.tokenizer.all_special_tokens
            if special or tok.startswith("##") or not tok.isalpha() or tok.lower() == original.lower():
                continue
            out.append(text.replace_word_at_index(index, tok))
            if len(out) >= self.k:
                break
        return out


class _WordSearch(OtherResponses, Attack):
    family: ClassVar[str] = "word-search"
    needs_victim: ClassVar[bool] = True
    # WordNet, counter-fitted English vectors, an English masked LM, English POS tags
    languages: ClassVar[tuple[str, ...]] = ENGLISH

    def __init__(self, budget: int = 300, delta: float | None = None, threshold: float | None = None,
                 max_ratio: float = 0.3, seed: int = 0, trace: bool = False, gold: Any = None,
                 gap: float = 40.0, goal: str = "target-label") -> None:
        super().__init__(seed=seed)
        if goal not in GOALS:
            raise ValueError(f"goal must be one of {GOALS}, got {goal!r}")
        if goal == "score-move" and threshold is not None:
            raise ValueError("threshold is the target-label goal's setting; the score-move goal uses delta")
        if goal == "target-label" and delta is not None:
            raise ValueError("delta is the score-move goal's setting: pass goal='score-move' with it "
                             "(the default goal, target-label, uses threshold)")
        delta = 20.0 if delta is None else delta
        self.goal_name = goal
        # AdvEval's adaptation (Chen et al. 2024, §4): a targeted attack with target label 0 for
        # R+ and 1 for R-, i.e. the victim's score crossing the middle of the 0-100 scale
        target = (LABEL_THRESHOLD if threshold is None else threshold) if goal == "target-label" else None
        self.goal = ScoreGoal(maximize=self.direction == "R-", delta=delta, threshold=target)
        # with a gold evaluator (a Metric), the goal is the gold-vs-victim gap instead
        self.gap_goal = GapGoal(maximize=self.direction == "R-", gap=gap) if gold is not None else None
        self.gold = gold
        self.constraints = WordConstraints(max_ratio=max_ratio)
        self.default_budget = budget
        self.keep_trace = trace
        self.pool: list[str] = []
        self._candidates: Any = None
        self.constrained_out = 0
        # a guard-aware wrapper (robusteval.attacks.evasion.Evasive) sets this: (sample, texts) ->
        # points subtracted from each candidate's score when candidates are ranked
        self.penalty: Any = None

    def candidates(self) -> Any:
        raise NotImplementedError

    def constrain(self, text: Any, candidates: list[Any], index: int) -> list[Any]:
        """The candidates the attack's constraints keep (none by default)."""
        return candidates

    def _penalties(self, sample: Sample, texts: list[str]) -> np.ndarray:
        return np.zeros(len(texts)) if self.penalty is None else np.asarray(self.penalty(sample, texts), dtype=float)

    def prepare(self, samples: Sequence[Sample]) -> None:
        """The R- starting pool: the responses in a language the search supports (a mixed-language
        data set would otherwise hand an English search a Chinese start)."""
        super().prepare([s for s in samples if self.unsupported(s) is None])

    def start_text(self, sample: Sample, rng: random.Random) -> str | None:
        """R+ starts from the response itself, R- from another sample's response."""
        return sample.response if self.direction == "R+" else self.other_response(sample, rng)

    def run(self, sample: Sample, victim: Any = None, budget: int | None = None) -> AttackResult:
        from robusteval.paths import ensure_nltk_data_path

        ensure_nltk_data_path()  # textattack reads NLTK stop words when first imported
        from textattack.shared import AttackedText

        if victim is None:
            raise ValueError(f"{self.name} needs a victim")
        why = self.unsupported(sample)
        if why is not None:
            return self.skipped(sample, why)
        t0 = time.perf_counter()
        budget = budget or self.default_budget
        rng = self.rng(sample)
        start = self.start_text(sample, rng)
        result = self.row(sample, meta={"start_text": start})
        if not start:
            return result.skip("no starting text (empty pool)")
        calls0 = victim.model_calls
        self.constrained_out = 0
        text = AttackedText(start)
        before = victim.score_one(sample, text.text)
        best, best_score = text, before
        best_penalty = self._penalties(sample, [start])[0]

        def gold_of(t: str) -> float:
            return float(self.gold.score([sample.with_response(t)])[0])

        gold_before = gold_now = gold_of(start) if self.gold is not None else None

        def reached() -> bool:
            if self.gap_goal is not None and gold_now is not None:
                return self.gap_goal.reached(gold_now, best_score)
            return self.goal.reached(before, best_score)

        trace: list[dict[str, Any]] = []
        words = list(text.words)
        allowed = self.constraints.modifiable(words)
        if not allowed:
            result.skip("no word the constraints allow to change")
            result.wall_time = time.perf_counter() - t0
            return result
        max_changes = max(1, math.ceil(self.constraints.max_ratio * len(words)))
        # word importance by deletion (one query per modifiable word)
        deleted = [text.delete_word_at_index(i).text for i in allowed]
        importance = victim.score(sample, deleted) if deleted else []
        order = sorted(range(len(allowed)), key=lambda j: -self.goal.gain(before, float(importance[j])))
        changes = 0
        for j in order:
            if victim.model_calls - calls0 >= budget or reached() or changes >= max_changes:
                break
            idx = allowed[j]
            cands = self.constrain(best, self.candidates()(best, idx), idx)
            if not cands:
                continue
            room = budget - (victim.model_calls - calls0)
            cands = cands[: max(room, 0)]
            if not cands:
                break
            scores = victim.score(sample, [c.text for c in cands])
            # a candidate's value: its gain over the current best, less the penalty it adds
            pen = self._penalties(sample, [c.text for c in cands])
            value = [self.goal.gain(best_score, float(scores[i])) - (pen[i] - best_penalty) for i in range(len(cands))]
            k = max(range(len(cands)), key=lambda i: value[i])
            if value[k] > 0:
                best, best_score, best_penalty = cands[k], float(scores[k]), float(pen[k])
                changes += 1
                if self.gold is not None:
                    gold_now = gold_of(best.text)
                if self.keep_trace:
                    trace.append({"index": idx, "text": best.text, "score": best_score})
        # attacked, fooled or not: the best candidate (the start text itself when no substitution
        # helped) and its score are the result. victim_before / gold_before stay unset: the
        # runner fills in the *clean original's* scores (for R- the start text is another
        # context's response, whose score goes to meta["start_score"]).
        result.adversarial, result.victim_after = best.text, best_score
        exhausted = not reached()
        result.note = "search ended without reaching its goal" if exhausted else ""
        if self.gold is not None:
            result.gold_after = gold_now
        result.meta.update({"goal_reached": not exhausted, "exhausted": exhausted, "changes": changes,
                            "start_score": before, "start_gold": gold_before,
                            "goal": "gold-gap" if self.gap_goal is not None else self.goal_name,
                            "constrained_out": self.constrained_out,
                            "candidates": self.candidates().name,
                            "start": "original" if self.direction == "R+" else "other-response"})
        result.trace = trace if self.keep_trace else None
        result.wall_time = time.perf_counter() - t0
        return result


class _TextFooler(_WordSearch):
    """TextFooler (Jin et al. 2020, §2.2): deletion word importance, synonym candidates, and
    its two constraints -- the same part of speech and a sentence-similarity floor over a
    15-word window (:mod:`robusteval.attacks.constraints`; MiniLM in place of USE) -- with
    AdvEval's target-label goal by default (``goal="score-move"``: a move of ``delta``)."""

    source: ClassVar[str] = ("Jin et al. 2020 (TextFooler), §2.2; as a baseline in Chen et al. 2024 (AdvEval), "
                             "§4 and Tables 2-4")

    def __init__(self, max_candidates: int = 30, embedding: str | None = None, same_pos: bool = True,
                 min_sim: float | None = USE_THRESHOLD, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_candidates = max_candidates
        self.embedding = embedding
        self.checks: list[Any] = []
        if same_pos:
            self.checks.append(SamePOS())
        if min_sim is not None:
            self.checks.append(SentenceSimilarity(min_sim))

    def candidates(self) -> Any:
        """WordNet synonyms, or neighbours in a counter-fitted embedding file (``embedding=``)."""
        if self._candidates is None:
            self._candidates = (EmbeddingCandidates(self.embedding, self.max_candidates) if self.embedding
                                else WordNetCandidates(self.max_candidates))
        return self._candidates

    def constrain(self, text: Any, candidates: list[Any], index: int) -> list[Any]:
        words = list(text.words)
        for check in self.checks:
            if not candidates:
                break
            keep = check(words, [list(c.words) for c in candidates], index)
            self.constrained_out += len(candidates) - sum(keep)
            candidates = [c for c, k in zip(candidates, keep, strict=True) if k]
        return candidates


@register_attack
class TextFoolerPos(_TextFooler):
    """R+: synonym swaps (WordNet) that lower the victim's score of a good response."""

    name: ClassVar[str] = "textfooler-pos"
    direction: ClassVar[str] = "R+"
    keeps: ClassVar[tuple[str, ...]] = ("overall",)


@register_attack
class TextFoolerNeg(_TextFooler):
    """R-: synonym swaps (WordNet) that raise the victim's score of a bad (mismatched) response."""

    name: ClassVar[str] = "textfooler-neg"
    direction: ClassVar[str] = "R-"
    targets: ClassVar[tuple[str, ...]] = ("coherence", "relevance")


class _BertAttack(_WordSearch):
    source: ClassVar[str] = "Li et al. 2020 (BERT-Attack); as a baseline in Chen et al. 2024 (AdvEval), Tables 2-4"

    def __init__(self, mlm: str = "bert-base-uncased", k: int = 30, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mlm, self.k = mlm, k

    def candidates(self) -> Any:
        if self._candidates is None:
            self._candidates = MaskedLMCandidates(self.mlm, self.k)
        return self._candidates


@register_attack
class BertAttackPos(_BertAttack):
    """R+: masked-LM word swaps that lower the victim's score of a good response."""

    name: ClassVar[str] = "bert-attack-pos"
    direction: ClassVar[str] = "R+"
    keeps: ClassVar[tuple[str, ...]] = ("overall",)


@register_attack
class BertAttackNeg(_BertAttack):
    """R-: masked-LM word swaps that raise the victim's score of a bad (mismatched) response."""

    name: ClassVar[str] = "bert-attack-neg"
    direction: ClassVar[str] = "R-"
    targets: ClassVar[tuple[str, ...]] = ("coherence", "relevance")
