"""Detector-aware attacks: attacks that know the victim's guard (issue 14, "adaptive attacks
that adapt").

A guard judged only on attacks that ignore it measures *transfer*; a defense is only as good
as its result against an attacker who knows it (the adaptive-evaluation principle of Tramèr
et al. 2020, "On Adaptive Attacks to Adversarial Example Defenses", NeurIPS). :class:`Evasive`
wraps any attack and makes it guard-aware when its victim is a guarded metric
(:class:`robusteval.detectors.guarded.GuardedMetric`):

1. **A penalized search.** A word-substitution search (:mod:`robusteval.attacks.search`)
   ranks its candidates by the victim's score minus ``weight`` x the guard's *pressure* on
   the candidate (the largest suspicion / threshold over the detectors,
   :func:`robusteval.detectors.guarded.pressure`), so it moves away from the detectors'
   thresholds instead of only around the texts the guard already floors; with ``fluency`` it
   also pays for the perplexity detector's suspicion (a perplexity-regularized rewrite).
2. **Disguising what the attack added.** When the attack's final text is flagged, the
   tokens it inserted or changed (a role label, a trigger, a swapped word) are disguised the
   way imperceptible-perturbation attacks do it (Boucher et al. 2022, "Bad Characters:
   Imperceptible NLP Attacks", IEEE S&P: homoglyphs and invisible characters): Cyrillic or
   Greek lookalike letters (Unicode TS #39, :func:`robusteval.detectors.sanitize.lookalikes`),
   a zero-width space inside each added token, a full-width colon after a label, a changed
   first letter case. Each variant is scored through the guarded victim (it costs budget) and
   the best-scoring one is kept -- the guarded score already carries the policy (a flagged
   text floored, refused or penalized); among equal scores an unflagged variant wins.

Only R- attacks are made evasive: they want a bad text scored high, so a guard that flags it
stands in their way. For an R+ attack (a meaning-preserving rewrite the attacker wants scored
*low*) a guard that floors the text is the attacker's success, so there is nothing to evade;
R+ attacks run unchanged. The ``sanitize`` policy undoes lookalikes (inside mixed-script
tokens, and whole lookalike tokens) and removes invisible characters, which is what the
disguise step tests; ``nonalnum`` flags both kinds of lookalike since its version 3, and since
version 4 a whole lookalike word also where the text has no Latin letter (a disguised reply of
one word) or a real Cyrillic word beside it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from robusteval.attacks.base import Attack, AttackResult
from robusteval.types import Sample

ZERO_WIDTH_SPACE = "\u200b"
FULLWIDTH_COLON = "\uff1a"
DISGUISES = ("lookalike-cyrillic", "lookalike-greek", "zero-width", "lookalike+zero-width", "fullwidth-colon",
             "lookalike-token", "case")


def find_guard(metric: Any) -> Any:
    """The guarded metric inside ``metric`` (a CachedVictim, a guard, or a wrapper of one), or None."""
    seen: set[int] = set()
    while metric is not None and id(metric) not in seen:
        seen.add(id(metric))
        if callable(getattr(type(metric), "pressure_of", None)):
            return metric
        metric = getattr(metric, "__dict__", {}).get("metric")
    return None


def _tokens(text: str) -> list[re.Match[str]]:
    return list(re.finditer(r"\S+", text))


def added_tokens(original: str, adversarial: str) -> list[int]:
    """Indices of the adversarial text's whitespace tokens that the attack inserted or changed
    (every token when it only deleted or reordered)."""
    a = [m.group(0) for m in _tokens(original)]
    b = [m.group(0) for m in _tokens(adversarial)]
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    out = [j for tag, _, _, j1, j2 in ops if tag in ("replace", "insert") for j in range(j1, j2)]
    return out or list(range(len(b)))


def _lookalike(token: str, script: str) -> str:
    from robusteval.detectors.sanitize import lookalikes

    table = lookalikes().get(script, {})
    return "".join(table.get(c, c) if c.isascii() else c for c in token)


def _zero_width(token: str) -> str:
    letters = [i for i, c in enumerate(token) if c.isalnum()]
    if len(letters) < 2:
        return token
    cut = letters[0] + 1
    return token[:cut] + ZERO_WIDTH_SPACE + token[cut:]


def _case(token: str) -> str:
    for i, c in enumerate(token):
        if c.isalpha():
            return token[:i] + c.swapcase() + token[i + 1:]
    return token


def _rebuild(text: str, spans: list[re.Match[str]], new: dict[int, str]) -> str:
    out, last = [], 0
    for i, m in enumerate(spans):
        out.append(text[last:m.start()])
        out.append(new.get(i, m.group(0)))
        last = m.end()
    out.append(text[last:])
    return "".join(out)


def disguises(original: str, adversarial: str, limit: int = 12) -> list[tuple[str, str]]:
    """(kind, text) variants of ``adversarial`` whose added tokens (:func:`added_tokens`) are
    disguised; in the order of :data:`DISGUISES`, without duplicates or no-ops, at most ``limit``."""
    spans = _tokens(adversarial)
    idx = added_tokens(original, adversarial)
    whole: dict[str, dict[int, str]] = {
        "lookalike-cyrillic": {i: _lookalike(spans[i].group(0), "CYRILLIC") for i in idx},
        "lookalike-greek": {i: _lookalike(spans[i].group(0), "GREEK") for i in idx},
        "zero-width": {i: _zero_width(spans[i].group(0)) for i in idx},
        "lookalike+zero-width": {i: _zero_width(_lookalike(spans[i].group(0), "CYRILLIC")) for i in idx},
        "fullwidth-colon": {i: spans[i].group(0).replace(":", FULLWIDTH_COLON) for i in idx},
    }
    out: list[tuple[str, str]] = [(kind, _rebuild(adversarial, spans, new)) for kind, new in whole.items()]
    out += [(f"lookalike-token:{i}", _rebuild(adversarial, spans, {i: _lookalike(spans[i].group(0), "CYRILLIC")}))
            for i in idx]
    out.append(("case", _rebuild(adversarial, spans, {i: _case(spans[i].group(0)) for i in idx})))
    seen = {adversarial}
    unique = []
    for kind, text in out:
        if text not in seen:
            seen.add(text)
            unique.append((kind, text))
    return unique[:limit]


class GuardPenalty:
    """``weight`` x the guard's pressure (+ ``fluency`` x the perplexity detector's suspicion)
    of texts as responses to a sample, in score points: what a guard-aware search subtracts from
    a candidate's score. The victim must have scored the texts first (the guard records them)."""

    def __init__(self, guard: Any, weight: float, fluency: float = 0.0, fluency_detector: Any = None) -> None:
        self.guard, self.weight, self.fluency = guard, float(weight), float(fluency)
        self._fluency_detector = fluency_detector

    def fluency_detector(self) -> Any:
        if self._fluency_detector is None:
            from robusteval import detectors

            self._fluency_detector = detectors.load("perplexity")
        return self._fluency_detector

    def __call__(self, sample: Sample, texts: Sequence[str]) -> np.ndarray:
        cands = [sample.with_response(t) for t in texts]
        press, _ = self.guard.pressure_of(cands)
        out = self.weight * np.asarray(press, dtype=float)
        if self.fluency:
            out = out + self.fluency * np.asarray(self.fluency_detector().detect(cands), dtype=float)
        return out


class Evasive(Attack):
    """``attack`` made aware of its victim's guard (see the module docstring): the same name,
    family and direction, so its rows replace the transferred ones of that attack."""

    needs_victim = True

    def __init__(self, attack: Attack, weight: float = 10.0, fluency: float = 0.0, max_variants: int = 12,
                 fluency_detector: Any = None) -> None:
        super().__init__(seed=attack.seed)
        if weight < 0 or fluency < 0:
            raise ValueError(f"evasion weights must be >= 0, got weight={weight}, fluency={fluency}")
        self.__dict__["_init_options"] = {"args": [], "kwargs": {"weight": weight, "fluency": fluency,
                                                                  "max_variants": max_variants}}
        self.base = attack
        self.name = attack.name  # type: ignore[misc]
        self.family = attack.family  # type: ignore[misc]
        self.direction = attack.direction  # type: ignore[misc]
        self.targets, self.keeps = attack.targets, attack.keeps  # type: ignore[misc]
        self.languages = attack.languages  # type: ignore[misc]
        self.source = (f"{attack.source}; made guard-aware (penalized search, disguised additions: "  # type: ignore[misc]
                       "Tramèr et al. 2020, Boucher et al. 2022)")
        self.weight, self.fluency, self.max_variants = weight, fluency, max_variants
        self._fluency_detector = fluency_detector

    @property
    def init_options(self) -> dict[str, Any]:
        from robusteval.attacks.runner import attack_identity

        own = dict(self.__dict__["_init_options"])
        return {"args": [], "kwargs": {**own["kwargs"], "attack": attack_identity(self.base)}}

    def row_version(self, sample: Sample) -> str | None:
        return self.base.row_version(sample)

    @property
    def criteria(self) -> Any:  # the runner hands its criteria to attacks that stop on them (AdvEval)
        return getattr(self.base, "criteria", None)

    @criteria.setter
    def criteria(self, value: Any) -> None:
        self.base.criteria = value  # type: ignore[attr-defined]

    def __getattr__(self, item: str) -> Any:
        # fitting (universal triggers: needs_fit, fit, fitted_state, load_fitted) goes to the base
        if item in ("base", "__setstate__") or item.startswith("__"):
            raise AttributeError(item)
        return getattr(self.base, item)

    def prepare(self, samples: Sequence[Sample]) -> None:
        if hasattr(self.base, "prepare"):
            self.base.prepare(samples)  # type: ignore[attr-defined]

    def language_text(self, sample: Sample) -> str:
        return self.base.language_text(sample)

    def run(self, sample: Sample, victim: Any = None, budget: int | None = None) -> AttackResult:
        if victim is None:
            raise ValueError(f"{self.name} (guard-aware) needs a victim")
        why = self.unsupported(sample)
        if why is not None:
            return self.skipped(sample, why)
        guard = find_guard(victim)
        if guard is None or self.direction != "R-":
            result = self.base.run(sample, victim if self.base.needs_victim else None, budget)
            result.meta["evasion"] = {"applied": False,
                                      "reason": "no guard" if guard is None else "R+ attacks have nothing to evade"}
            return result
        calls0 = victim.model_calls
        uses_penalty = hasattr(self.base, "penalty")
        if uses_penalty:
            self.base.penalty = GuardPenalty(guard, self.weight, self.fluency,  # type: ignore[attr-defined]
                                             self._fluency_detector)
        try:
            result = self.base.run(sample, victim if self.base.needs_victim else None, budget)
        finally:
            if uses_penalty:
                self.base.penalty = None  # type: ignore[attr-defined]
        info: dict[str, Any] = {"applied": True, "penalized_search": uses_penalty}
        result.meta["evasion"] = info
        if result.outcome != "attacked" or result.adversarial is None:
            return result
        first = sample.with_response(result.adversarial)
        score0 = float(victim.score(sample, [result.adversarial])[0])
        (p0,), (flag0,) = guard.pressure_of([first])
        info.update({"flagged_before": bool(flag0), "pressure_before": round(float(p0), 6)})
        if not flag0:
            return result
        room = (budget or getattr(self.base, "default_budget", 300)) - (victim.model_calls - calls0)
        # what the attack added: against its own starting text (an R- search starts from another
        # sample's response, recorded in meta["start_text"])
        start = result.meta.get("start_text") or sample.response
        variants = disguises(start, result.adversarial, min(self.max_variants, max(room, 0)))
        info["variants"] = len(variants)
        if not variants:
            info["evaded"] = False
            return result
        texts = [t for _, t in variants]
        scores = victim.score(sample, texts)
        press, flags = guard.pressure_of([sample.with_response(t) for t in texts])
        # the attacker wants the guarded score (which already carries the policy: floored, refused,
        # penalized); among equal scores, an unflagged text, then lower pressure, then the first in
        # DISGUISES order. A variant replaces the text only if it scores higher, or as high unflagged.
        pool = [(float(s), not bool(f), -float(p), -i) for i, (s, p, f) in enumerate(zip(scores, press, flags,
                                                                                          strict=True))]
        best = max(pool)
        if best[:2] > (score0, False):
            i = -best[3]
            result.meta["undisguised"] = result.adversarial
            # a search's own verdicts describe the text before the disguise: kept apart
            moved = {k: result.meta.pop(k) for k in ("goal_reached", "exhausted") if k in result.meta}
            result.meta["undisguised_search"] = {**moved, "note": result.note} if moved else None
            result.note = ""
            result.adversarial, result.victim_after = texts[i], None  # the runner reads its score (cached)
            info.update({"disguise": variants[i][0], "pressure_after": round(float(press[i]), 6)})
            info["evaded"] = bool(best[1])
        else:
            info["evaded"] = False
        return result

    def describe(self) -> dict[str, Any]:
        return {**self.base.describe(), "guard_aware": True, "source": self.source}


def worth_rerunning(attacks: Sequence[Attack]) -> list[Attack]:
    """The attacks a guard-aware rerun can change: those that query their victim (searches) and
    those that lower quality (R-); a static R+ rewrite has nothing to evade."""
    return [a for a in attacks if a.needs_victim or a.direction == "R-"]


def evasive(attacks: Sequence[Attack], weight: float = 10.0, fluency: float = 0.0,
            max_variants: int = 12) -> list[Attack]:
    """Every attack of ``attacks`` wrapped in :class:`Evasive`."""
    return [Evasive(a, weight=weight, fluency=fluency, max_variants=max_variants) for a in attacks]
