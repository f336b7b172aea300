"""The quality-aspect taxonomy of Hu et al. 2024, "Are LLM-based Evaluators Confusing NLG
Quality Criteria?" (ACL): the 11 aspects (§3.1, Fig. 3), the 18 aspect-targeted perturbations
(§3.2, Table 2) and, per perturbation and aspect, the paper's expectation and the human
judgment (App. C, Table 19).

This is shared knowledge: the aspect attacks (:mod:`robusteval.attacks.aspect`) say which
perturbation they apply, metrics say which aspect they score (``Metric.aspect``), and the
expectation criterion (:mod:`robusteval.attacks.criteria`) looks the pair up here.

**The hierarchy** (read off Table 19's expectation columns, which follow it exactly):
Overall_quality → Readability, Adequacy; Readability → Fluency, Coherence, Simplicity;
Fluency → Grammaticality; Adequacy → Faithfulness, Informativeness; Faithfulness →
Non-hallucination, Non-contradiction.

**Table 19.** A perturbation is expected to affect its own aspect and that aspect's ancestors
(the three contradiction perturbations also lower Informativeness) and to leave every other
aspect unchanged -- descendants included: a Fluency perturbation (repetition) is expected to
leave Grammaticality alone. The human column disagrees with the expectation in 11 of the 198
cells (a 94.4 % match rate, as the paper reports for the "detailed" definitions); the paper's
S_T / S_F sets keep only the cells where they agree (§5, "consistent results"), which
:func:`expectation` does with ``human_agreed_only=True``.

*Reading of the extraction.* The plain-text copy of Table 19 lost its header row; the 22 marks
per row are read as (human, expectation) pairs in Table 4's column order (Flu., Coh., Gram.,
Sim., Read., Fai., Cont., Hal., Inf., Ade., All.). Under that reading the expectation columns
reproduce the hierarchy above exactly and the match rate is the paper's 94.4 %, which is why
we take it.
"""

from __future__ import annotations

from typing import Literal

SOURCE = "Hu et al. 2024, Are LLM-based Evaluators Confusing NLG Quality Criteria? (ACL)"

PARENTS: dict[str, str | None] = {
    "Overall_quality": None,
    "Readability": "Overall_quality",
    "Adequacy": "Overall_quality",
    "Fluency": "Readability",
    "Coherence": "Readability",
    "Simplicity": "Readability",
    "Grammaticality": "Fluency",
    "Faithfulness": "Adequacy",
    "Informativeness": "Adequacy",
    "Non-hallucination": "Faithfulness",
    "Non-contradiction": "Faithfulness",
}
ASPECTS: tuple[str, ...] = tuple(PARENTS)
OVERALL = "Overall_quality"

# Table 4 / Table 19 column abbreviations
ABBREV = {"Flu": "Fluency", "Coh": "Coherence", "Gram": "Grammaticality", "Sim": "Simplicity",
          "Read": "Readability", "Fai": "Faithfulness", "Cont": "Non-contradiction",
          "Hal": "Non-hallucination", "Inf": "Informativeness", "Ade": "Adequacy", "All": OVERALL}

# perturbation -> (aspect it targets (Table 2), extra aspects it is expected to affect (Table 19),
#                  aspects the human annotators judged affected (Table 19, left column))
_TABLE19: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "repetition": ("Fluency", (), ()),
    "passive-voice": ("Fluency", (), ("Flu", "Read")),
    "inversion": ("Fluency", (), ("Flu", "Read", "All")),
    "improper-connective": ("Coherence", (), ("Coh", "Read", "All")),
    "sentence-exchange": ("Coherence", (), ("Coh", "Read", "All")),
    "incorrect-verb-form": ("Grammaticality", (), ("Flu", "Gram", "Read", "All")),
    "word-exchange": ("Grammaticality", (), ("Flu", "Gram", "Read", "All")),
    "spelling-mistake": ("Grammaticality", (), ("Flu", "Gram", "All")),
    "uncommon-phrase": ("Simplicity", (), ("Sim", "Read")),
    "complex-sentence": ("Simplicity", (), ("Sim",)),
    "abbreviation": ("Informativeness", (), ("Inf", "Ade", "All")),
    "hypernym": ("Informativeness", (), ("Inf", "Ade", "All")),
    "sentence-deletion": ("Informativeness", (), ("Inf", "Ade", "All")),
    "complement": ("Non-hallucination", (), ("Fai", "Hal", "Ade", "All")),
    "continuation": ("Non-hallucination", (), ("Fai", "Hal", "Ade", "All")),
    "different-entity": ("Non-contradiction", ("Informativeness",), ("Fai", "Cont", "Hal", "Inf", "Ade", "All")),
    "conflicting-fact": ("Non-contradiction", ("Informativeness",), ("Fai", "Cont", "Hal", "Inf", "Ade", "All")),
    "negation": ("Non-contradiction", ("Informativeness",), ("Fai", "Cont", "Hal", "Inf", "Ade", "All")),
}
PERTURBATIONS: tuple[str, ...] = tuple(_TABLE19)
TARGET: dict[str, str] = {p: t for p, (t, _, _) in _TABLE19.items()}


def check_aspect(aspect: str) -> str:
    if aspect not in PARENTS:
        raise ValueError(f"unknown quality aspect {aspect!r}; use one of {', '.join(ASPECTS)}")
    return aspect


def ancestors(aspect: str) -> list[str]:
    """``aspect`` and every aspect above it, up to Overall_quality."""
    out: list[str] = []
    node: str | None = check_aspect(aspect)
    while node is not None:
        out.append(node)
        node = PARENTS[node]
    return out


def related(a: str, b: str) -> bool:
    """True when one aspect is the other's ancestor (or the same)."""
    return a in ancestors(b) or b in ancestors(a)


def _perturbation(name: str) -> str:
    if name not in _TABLE19:
        raise ValueError(f"unknown perturbation {name!r} (Hu et al. 2024, Table 2); use one of "
                         f"{', '.join(PERTURBATIONS)}")
    return name


def expected_affected(perturbation: str) -> list[str]:
    """The aspects Table 19 expects ``perturbation`` to lower, in taxonomy order."""
    target, extra, _ = _TABLE19[_perturbation(perturbation)]
    hit = set(ancestors(target)) | set(extra)
    return [a for a in ASPECTS if a in hit]


def human_affected(perturbation: str) -> list[str]:
    """The aspects Table 19's human annotators judged ``perturbation`` to affect."""
    hit = {ABBREV[a] for a in _TABLE19[_perturbation(perturbation)][2]}
    return [a for a in ASPECTS if a in hit]


def humans_agree(perturbation: str, aspect: str) -> bool:
    """Whether Table 19's human judgment matches the expectation for this cell."""
    check_aspect(aspect)
    return (aspect in expected_affected(perturbation)) == (aspect in human_affected(perturbation))


def expectation(perturbation: str, aspect: str,
                human_agreed_only: bool = False) -> Literal["directional", "invariance"] | None:
    """The test that applies to a victim scoring ``aspect`` after ``perturbation``.

    "directional" (the score should drop, S_T) when Table 19 expects the aspect to be affected,
    "invariance" (the score should not move, S_F) otherwise -- descendants of the targeted aspect
    included. With ``human_agreed_only`` a cell where the humans disagreed with the expectation
    has no test (None), as in the paper's S_T / S_F sets. An aspect outside the taxonomy (a
    judge with a custom criterion) has no test either.
    """
    if aspect not in PARENTS:
        return None
    if human_agreed_only and not humans_agree(perturbation, aspect):
        return None
    return "directional" if aspect in expected_affected(perturbation) else "invariance"


def match_rate() -> tuple[int, int]:
    """(cells where the humans agree with the expectation, all cells) over Table 19."""
    cells = [(p, a) for p in PERTURBATIONS for a in ASPECTS]
    return sum(humans_agree(p, a) for p, a in cells), len(cells)


def metric_aspect(metric: object) -> str:
    """The aspect a (possibly wrapped) metric scores: its ``aspect`` attribute, Overall_quality
    when it has none. Metrics declare it (``Metric.aspect``; UniEval maps its dimension). A
    custom aspect outside the taxonomy is returned as is (no expectation applies to it)."""
    aspect = getattr(metric, "aspect", OVERALL)
    return aspect if isinstance(aspect, str) else OVERALL
