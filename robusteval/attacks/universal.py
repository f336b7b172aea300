"""Universal evasion attacks on summarization scoring (Mu & Lim 2023, "Universal Evasion
Attacks on Summarization Scoring", BlackboxNLP; §4-§5, Tables 1-2).

* ``dot-trigger``: the whole summary is a single "." — with BERTScore on a default model it
  outscores real summaries (the paper's BERTScore backdoor).
* ``ga-trigger``: a genetic search (pymoo) for a string of non-alphanumeric characters that
  maximizes the victim's mean score on a small fitting set of references; each round adds
  the fitting reference on which the current best trigger is weakest ("refit on the
  farthest reference") and searches again. The trigger is then used unchanged on unseen
  samples.
* ``broken-sentence``: a ROUGE attacker (Algorithm 1, §3.2) — from a bag of salient words,
  repeatedly take the longest run of consecutive source tokens that are all still in the bag
  and remove its words from the bag, until the longest run is shorter than C = 3
  (``broken-sentence-c2``: the paper's alternative C = 2, Tables 2 and 4). ``oracle`` mode
  takes the bag from the references themselves -- the paper's target b(1, s_ref), every
  word with its count, stop words included (an upper bound on its tagger;
  ``oracle_references="first"``: from the main reference alone, the one Mu & Lim score against);
  ``predicted`` takes the ``bag_size`` (30) words the salient-word tagger ranks highest.
* ``trigger-broken``: the fitted GA trigger followed by the broken string.

All are ``R-``: none of these strings is a good summary.
"""

from __future__ import annotations

import random
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from robusteval.attacks.base import Perturbation
from robusteval.attacks.registry import register_attack
from robusteval.types import Sample

SOURCE = "Mu & Lim 2023, Universal Evasion Attacks on Summarization Scoring (BlackboxNLP)"
TRIGGER_CHARS = string.punctuation  # the "fast" preset's alphabet: printable ASCII punctuation
# the paper's alphabet (§3.3): every non-alphanumeric character -- here every ASCII one, control
# characters and whitespace included
ALL_NON_ALNUM = "".join(chr(c) for c in range(128) if not chr(c).isalnum())
# Mu & Lim §4: "population size at 10, and terminate at 2000 generations", a fitness threshold
# of -0.88 (BERTScore 0.88 = 88 on robusteval's scale), refit on the farthest reference and stop
# at i = 5 (rounds i = 0..5); "fast" is the cheap search robusteval used before (BENCHMARKS §4)
GA_PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"pop_size": 10, "generations": 2000, "rounds": 6, "target": 88.0, "alphabet": ALL_NON_ALNUM},
    "fast": {"pop_size": 24, "generations": 12, "rounds": 3, "target": None, "alphabet": TRIGGER_CHARS},
}


class _Universal(Perturbation):
    family: ClassVar[str] = "universal"
    source: ClassVar[str] = SOURCE
    direction: ClassVar[str] = "R-"
    tasks: ClassVar[tuple[str, ...]] = ("summarization",)
    targets: ClassVar[tuple[str, ...]] = ("coherence", "consistency", "fluency", "relevance")
    needs_fit: ClassVar[bool] = False


@register_attack
class DotTrigger(_Universal):
    """Replace the summary by a single "." (the BERTScore backdoor)."""

    name: ClassVar[str] = "dot-trigger"

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        return "."


def decode(genes: Sequence[int], alphabet: str = TRIGGER_CHARS) -> str:
    """Gene i in [0, len(TRIGGER_CHARS)] -> character; the top value means "no character"."""
    return "".join(alphabet[g] for g in genes if 0 <= g < len(alphabet))


def _termination(generations: int, target: float | None) -> Any:
    """Stop after ``generations``, or once the best mean score reaches ``target``."""
    from pymoo.core.termination import Termination
    from pymoo.termination.max_gen import MaximumGenerationTermination

    class Reached(Termination):
        def __init__(self) -> None:
            super().__init__()
            self.max_gen = MaximumGenerationTermination(generations)

        def _update(self, algorithm: Any) -> float:
            progress = float(self.max_gen.update(algorithm))
            opt = algorithm.opt
            if target is not None and opt is not None and len(opt) and -float(opt.get("F").min()) >= target:
                return 1.0
            return progress

    return Reached()


@register_attack
class GATrigger(_Universal):
    """A non-alphanumeric trigger string found by a genetic search (pymoo), applied unchanged
    (Mu & Lim §3.3-§4). ``preset="paper"`` (default): population 10, up to 2000 generations or
    a mean score of 88 (the paper's fitness -0.88), every ASCII non-alphanumeric character
    (control characters included), refit on the farthest reference for rounds i = 0..5, each
    round starting from the previous trigger. ``preset="fast"``: population 24, 12
    generations, 3 rounds, printable punctuation. Explicit options override the preset. The
    paper gives no trigger length; ``length`` is 8."""

    name: ClassVar[str] = "ga-trigger"
    needs_fit: ClassVar[bool] = True

    def __init__(self, length: int = 8, preset: str = "paper", pop_size: int | None = None,
                 generations: int | None = None, rounds: int | None = None, target: float | None = None,
                 fit_size: int = 8, trigger: str | None = None, seed: int = 0) -> None:
        super().__init__(seed=seed)
        if preset not in GA_PRESETS:
            raise ValueError(f"ga-trigger preset must be one of {', '.join(GA_PRESETS)}, got {preset!r}")
        p = GA_PRESETS[preset]
        self.preset = preset
        self.length = length
        self.pop_size = int(pop_size if pop_size is not None else p["pop_size"])
        self.generations = int(generations if generations is not None else p["generations"])
        self.rounds = int(rounds if rounds is not None else p["rounds"])
        self.target = target if target is not None else p["target"]
        self.alphabet: str = p["alphabet"]
        self.fit_size = fit_size
        self.trigger = trigger
        self.history: list[dict[str, Any]] = []

    def fit(self, samples: Sequence[Sample], victim: Any) -> str:
        """Search the trigger on ``samples[:fit_size]`` (their references) against ``victim``
        (a CachedVictim); returns it and keeps it for :meth:`perturb`."""
        from pymoo.algorithms.soo.nonconvex.ga import GA
        from pymoo.core.problem import Problem
        from pymoo.operators.crossover.sbx import SBX
        from pymoo.operators.mutation.pm import PM
        from pymoo.operators.repair.rounding import RoundingRepair
        from pymoo.operators.sampling.rnd import IntegerRandomSampling
        from pymoo.optimize import minimize

        pool, seen = [], set()
        for s in samples:  # one sample per distinct reference set
            if s.all_references() and s.all_references() not in seen:
                seen.add(s.all_references())
                pool.append(s)
        if not pool:
            raise ValueError("ga-trigger needs samples with references to fit on")
        fitting = [pool[0]]
        candidates = pool[: max(self.fit_size, 1)]

        def mean_scores(triggers: Sequence[str], group: Sequence[Sample]) -> np.ndarray:
            """Mean victim score of each trigger over ``group``: one batched victim call per
            sample for the whole population (an empty or invisible-only trigger -- whitespace and
            control characters are in the paper's alphabet -- gets -1, never a victim call)."""
            from robusteval.text import is_blank

            real = [t for t in dict.fromkeys(triggers) if t and not is_blank(t)]
            totals = np.zeros(len(real))
            for s in group:
                if real:
                    totals += victim.score(s, real)
            means = dict(zip(real, totals / max(len(group), 1), strict=True))
            return np.array([means.get(t, -1.0) for t in triggers])

        def mean_score(trigger: str, group: Sequence[Sample]) -> float:
            return float(mean_scores([trigger], group)[0])

        best = "."
        self.history = []  # this fit's rounds (a second fit of the same object starts afresh)
        for rnd in range(self.rounds):
            group = list(fitting)

            class TriggerProblem(Problem):
                def __init__(self, n_var: int, group: list[Sample], alphabet: str) -> None:
                    super().__init__(n_var=n_var, n_obj=1, xl=0, xu=len(alphabet) - 1, vtype=int)
                    self.group, self.alphabet = group, alphabet

                def _evaluate(self, x: np.ndarray, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
                    triggers = [decode(row.astype(int), self.alphabet) for row in x]
                    out["F"] = -mean_scores(triggers, self.group).reshape(-1, 1)

            sampling: Any = IntegerRandomSampling()
            if best != "." and rnd > 0:  # start from the previous round's trigger (the paper's s_emu,i)
                genes = np.array([[self.alphabet.index(c) for c in best[: self.length].ljust(self.length, best[0])]])
                mutated = np.random.default_rng(self.seed + rnd).integers(0, len(self.alphabet),
                                                                          size=(self.pop_size - 1, self.length))
                sampling = np.vstack([genes, mutated])
            algorithm = GA(pop_size=self.pop_size, sampling=sampling,
                           crossover=SBX(prob=0.9, eta=3.0, vtype=float, repair=RoundingRepair()),
                           mutation=PM(prob=1.0, eta=3.0, vtype=float, repair=RoundingRepair()),
                           eliminate_duplicates=True)
            res = minimize(TriggerProblem(self.length, group, self.alphabet), algorithm,
                           _termination(self.generations, self.target), seed=self.seed + rnd, verbose=False)
            found = decode(np.atleast_2d(res.X)[0].astype(int), self.alphabet)
            if mean_score(found, group) >= mean_score(best, group):
                best = found
            scores = {s.id: victim.score_one(s, best) for s in candidates}  # cached after round 0
            self.history.append({"round": rnd, "trigger": best, "fitting": [s.id for s in group],
                                 "fit_mean": mean_score(best, group)})
            farthest = min((s for s in candidates if s not in fitting), key=lambda s: scores[s.id],
                           default=None)
            if farthest is None:
                break
            fitting.append(farthest)
        self.trigger = best
        return best

    def settings(self) -> dict[str, Any]:
        """What the search ran with (the preset resolved): a saved trigger belongs to these."""
        return {"preset": self.preset, "length": self.length, "pop_size": self.pop_size,
                "generations": self.generations, "rounds": self.rounds, "target": self.target,
                "alphabet": self.alphabet, "fit_size": self.fit_size, "seed": self.seed}

    def fitted_state(self) -> dict[str, Any]:
        return {"trigger": self.trigger, "history": self.history, "preset": self.preset, "settings": self.settings()}

    def load_fitted(self, state: dict[str, Any]) -> None:
        """A trigger fitted earlier (a resumed run's ``fitted.json``), refused when it was fitted
        with other search settings (an older state records only its preset): it would not be
        this attack's trigger."""
        saved = state.get("settings") or {"preset": state.get("preset", self.preset)}
        mine = self.settings()
        differ = sorted(k for k in saved if k in mine and saved[k] != mine[k])
        if differ:
            got = ", ".join(f"{k}={saved[k]!r} (this attack: {mine[k]!r})" for k in differ if k != "alphabet")
            raise ValueError(f"ga-trigger: the saved trigger was fitted with other settings: "
                             f"{got or 'another alphabet'}; fit it again (a new --out-dir)")
        self.trigger = state["trigger"]
        self.history = list(state.get("history", []))

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        if self.trigger is None:
            raise RuntimeError("ga-trigger is not fitted: call fit() (the runner does) or pass trigger=")
        return self.trigger


def _norm(token: str) -> str:
    return "".join(ch for ch in token.lower() if ch.isalnum())


def _longest_run(norms: Sequence[str], bag: Mapping[str, int]) -> tuple[int, int]:
    """(start, end) of the longest run of consecutive tokens that the bag can pay for: no word
    used more often within the run than the bag holds it (earliest on ties)."""
    best, start, used = (0, 0), 0, Counter[str]()
    for i, tok in enumerate(norms):
        if not tok or bag.get(tok, 0) <= 0:
            start, used = i + 1, Counter()
            continue
        used[tok] += 1
        while used[tok] > bag[tok]:  # slide the start past the earlier copy of this word
            used[norms[start]] -= 1
            start += 1
        if i + 1 - start > best[1] - best[0]:
            best = (start, i + 1)
    return best


def broken_string(source: str, bag: Iterable[str] | Mapping[str, int], min_run: int = 3) -> str | None:
    """Algorithm 1 of Mu & Lim (§3.2): while salient words remain, take the longest run of
    consecutive source tokens that are all still in the bag; stop when it is shorter than
    ``min_run`` (the paper's C = 3; C = 2 is its alternative version, Tables 2 and 4); else
    append it to the output and take its words out of the bag ("W <- W - c", a bag
    difference: a word the bag holds twice can be used twice). ``bag``: normalized word ->
    count (the paper's b(1, s_ref), Eq. 4), or a set (each word once). Runs are concatenated in
    the order they are taken (longest first). None when no run reaches ``min_run``."""
    if min_run < 1:
        raise ValueError(f"min_run (C) must be at least 1, got {min_run}")
    tokens = source.split()
    norms = [_norm(t) for t in tokens]
    remaining = Counter(bag) if isinstance(bag, Mapping) else Counter(set(bag))
    out: list[str] = []
    while +remaining:
        a, b = _longest_run(norms, remaining)
        if b - a < min_run:
            break
        out.extend(tokens[a:b])
        remaining.subtract(norms[a:b])  # never below 0: the run was paid for
        remaining = +remaining  # drop words used up
    return " ".join(out) if out else None


@register_attack
class BrokenSentence(_Universal):
    """Concatenate the longest salient runs of the source until they are shorter than C = 3
    (Mu & Lim, Algorithm 1; ROUGE attacker, oracle bag by default)."""

    name: ClassVar[str] = "broken-sentence"
    default_min_run: ClassVar[int] = 3

    def __init__(self, min_run: int | None = None, bag: str = "oracle", classifier: str | None = None,
                 bag_size: int | None = 30, seed: int = 0, oracle_references: str = "all") -> None:
        super().__init__(seed=seed)
        self.bag_size = bag_size
        if bag not in ("oracle", "predicted"):
            raise ValueError("bag must be 'oracle' or 'predicted'")
        if oracle_references not in ("all", "first"):
            raise ValueError("oracle_references must be 'all' (every reference) or 'first' (the main one)")
        self.oracle_references = oracle_references
        if bag == "predicted" and not classifier:
            raise ValueError("bag='predicted' needs classifier=<folder written by train_salient>")
        self.min_run = self.default_min_run if min_run is None else int(min_run)
        if self.min_run < 1:
            raise ValueError(f"min_run (C) must be at least 1, got {self.min_run}")
        self.bag = bag
        self._classifier_path = classifier
        self._predictor: Any = None

    def salient(self, sample: Sample) -> set[str] | Counter[str]:
        if self.bag == "predicted":
            if self._predictor is None:
                from robusteval.attacks.salient import SalientPredictor

                self._predictor = SalientPredictor(str(self._classifier_path))
            return self._predictor.bag(sample.source_text(), top_k=self.bag_size)
        refs = sample.all_references()
        if self.oracle_references == "first":
            return Counter(w for w in map(_norm, refs[0].split()) if w) if refs else Counter()
        # several references: each word as often as the reference that uses it most
        bag: Counter[str] = Counter()
        for r in refs:
            bag |= Counter(w for w in map(_norm, r.split()) if w)
        return bag

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        return broken_string(sample.source_text(), self.salient(sample), self.min_run)


@register_attack
class BrokenSentenceC2(BrokenSentence):
    """Algorithm 1 with C = 2, the alternative version of Mu & Lim (Tables 2 and 4, last row)."""

    name: ClassVar[str] = "broken-sentence-c2"
    default_min_run: ClassVar[int] = 2


@register_attack
class TriggerBroken(BrokenSentence):
    """The fitted GA trigger followed by the broken string (Mu & Lim §3.3). As in the paper, the
    trigger is repeated until it has at least ``pad_to`` (513) visible characters -- each a
    token of a BERT-style tokenizer -- so a 512-token scorer never reaches the broken text
    while ROUGE, which ignores punctuation, sees only the broken text. ``pad_to=0``: the
    trigger once."""

    name: ClassVar[str] = "trigger-broken"
    needs_fit: ClassVar[bool] = True

    def __init__(self, min_run: int | None = None, bag: str = "oracle", classifier: str | None = None,
                 bag_size: int | None = 30, trigger: str | None = None, pad_to: int = 513, seed: int = 0,
                 oracle_references: str = "all", **ga: Any) -> None:
        super().__init__(min_run=min_run, bag=bag, classifier=classifier, bag_size=bag_size, seed=seed,
                         oracle_references=oracle_references)
        self.ga = GATrigger(trigger=trigger, seed=seed, **ga)
        self.pad_to = int(pad_to)

    def fit(self, samples: Sequence[Sample], victim: Any) -> str:
        return self.ga.fit(samples, victim)

    def fitted_state(self) -> dict[str, Any]:
        return self.ga.fitted_state()

    def load_fitted(self, state: dict[str, Any]) -> None:
        self.ga.load_fitted(state)

    def padded_trigger(self, sample: Sample, rng: random.Random) -> str:
        trigger = str(self.ga.perturb(sample, rng))
        visible = sum(ch.isprintable() and not ch.isspace() for ch in trigger)
        if self.pad_to <= 0 or visible == 0:
            return trigger
        return trigger * -(-self.pad_to // visible)  # ceil: at least pad_to visible characters

    def perturb(self, sample: Sample, rng: random.Random) -> str | None:
        broken = super().perturb(sample, rng)
        if broken is None:
            return None
        return f"{self.padded_trigger(sample, rng)} {broken}"
