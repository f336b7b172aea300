"""[parse_triple] Overlap of dependency triples between the candidate and a trusted text.

Mu & Lim 2022 (§6.2, Table 3) compare the dependency parses of summaries with those of their
references: a broken-sentence string reuses the source's words, but the glued fragments do not
form the source's syntactic relations, and a punctuation trigger forms none. A triple is
(head lemma, relation, child lemma) from spaCy's parser; the overlap is the F1 of the two
triple multisets.

``against``: ``auto`` (the best over the sample's references when it has any, else the source /
dialogue context), ``reference`` or ``source``. ``measure``: ``f1`` (suspicion = 1 - F1, the
paper's check) or ``gap`` (suspicion = 1 - triple precision / lemma precision: how much of the
candidate's *vocabulary* comes from the trusted text but not its *structure*, which is low for
a fluent paraphrase and high for word salad built from the source). A candidate with no
triple at all (a lone token or punctuation) gets suspicion 1.

**Where it applies.** Mu & Lim check *summaries*, which restate their source: by default the
detector judges ``summarization`` and ``data_to_text`` samples only. A dialogue reply shares
almost no triples with its context however good it is (at the old default it flagged 72 % of
well-rated English DailyDialog replies), so other tasks get suspicion 0, counted as
``not_applicable:<task>``. The parser is spaCy's English one: a response in another language
(``meta["language"]`` or :mod:`robusteval.langid`) abstains, counted as
``abstained_language:<code>``. ``tasks=`` and ``languages=`` change both lists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

from robusteval.detectors import parsing
from robusteval.detectors.base import Detector, register_detector

from robusteval.errors import InputError
from robusteval.text import is_blank
from robusteval.types import Sample

AGAINST = ("auto", "reference", "source")
MEASURES = ("f1", "gap")


def triples(doc: Any) -> Counter[tuple[str, str, str]]:
    """(head lemma, relation, child lemma) of every token but punctuation and spaces. A
    sentence's root is its own head and counts as (lemma, "ROOT", lemma), so two texts built
    around the same main verb share that triple. (The first version meant to leave roots out
    with ``t.head is not t``, but spaCy builds a new Token object on every access, so that test
    never held and roots were always counted; the shipped default thresholds were calibrated
    that way, and this keeps it.)"""
    return Counter((t.head.lemma_.lower(), t.dep_, t.lemma_.lower()) for t in doc
                   if not t.is_punct and not t.is_space)


def lemmas(doc: Any) -> Counter[str]:
    return Counter(t.lemma_.lower() for t in doc if not t.is_punct and not t.is_space)


def overlap(a: Counter[Any], b: Counter[Any]) -> int:
    """``sum((a & b).values())`` for counts that are all positive, without building the
    intersection: the smaller counter is walked and looked up in the larger (a reference is
    compared with every summary of its document, each of them with 11 references)."""
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    return sum(min(v, big[k]) for k, v in small.items() if k in big)


def prf(cand: Counter[Any], ref: Counter[Any]) -> tuple[float, float, float]:
    common = overlap(cand, ref)
    p = common / cand.total() if cand else 0.0
    r = common / ref.total() if ref else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


@register_detector
class ParseTriple(Detector):
    """Dependency-triple F1 against the reference or source (Mu & Lim 2022, §6.2 / Table 3)."""

    name: ClassVar[str] = "parse_triple"
    family: ClassVar[str] = "syntax"
    source: ClassVar[str] = "Mu & Lim 2022, Universal Evasion Attacks on Summarization Scoring, §6.2, Table 3"
    default_threshold: ClassVar[float] = 0.95
    reads: ClassVar[tuple[str, ...]] = ("task", "response", "context", "reference", "references")
    needs: ClassVar[tuple[str, ...]] = ("reference or source",)

    def __init__(self, against: str = "auto", measure: str = "f1",
                 tasks: tuple[str, ...] | list[str] = ("summarization", "data_to_text"),
                 languages: tuple[str, ...] | list[str] = ("en",), threshold: float | None = None) -> None:
        super().__init__(threshold)
        self.tasks = tuple(tasks)
        self.languages = tuple(languages)
        if against not in AGAINST:
            raise ValueError(f"parse_triple: against must be one of {AGAINST}, got {against!r}")
        if measure not in MEASURES:
            raise ValueError(f"parse_triple: measure must be one of {MEASURES}, got {measure!r}")
        self.against = against
        self.measure = measure

    def signature(self) -> str:
        return (f"against={self.against},measure={self.measure},tasks={','.join(self.tasks)},"
                f"languages={','.join(self.languages)}")


    def trusted(self, s: Sample) -> tuple[str, ...]:
        refs = tuple(r for r in s.all_references() if not is_blank(r))
        if self.against in {"auto", "reference"} and refs:
            return refs
        if self.against == "reference":
            raise InputError(s.id, "reference", "parse_triple(against='reference') needs a reference")
        src = s.source_text()
        if is_blank(src):
            raise InputError(s.id, "context", "parse_triple needs a reference or a source / context")
        return (src,)

    def skip(self, s: Sample) -> dict[str, Any] | None:
        """The row of a sample this detector does not judge (another task, or a language its
        English parser does not cover): suspicion 0 and a counted fallback; None otherwise."""
        from robusteval.langid import sample_language

        if s.task not in self.tasks:
            return {"applicable": False, "suspicion": 0.0, "fallback": f"not_applicable:{s.task}"}
        lang = sample_language(s)
        if lang not in self.languages:
            return {"applicable": False, "language": lang, "suspicion": 0.0, "fallback": f"abstained_language:{lang}"}
        return None

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        skipped = [self.skip(s) for s in samples]
        judged = [s for s, sk in zip(samples, skipped, strict=True) if sk is None]
        rows = iter(self._judge(judged))
        return [sk if sk is not None else next(rows) for sk in skipped]

    def _to_parse(self, samples: list[Sample]) -> tuple[list[tuple[str, ...]], list[str]]:
        """(each judged sample's trusted texts, the distinct trusted texts): each distinct one
        is parsed and counted once per call (SummEval's summaries of one document share its 11
        references, an attack's candidates share their sample's)."""
        trusted = [self.trusted(s) for s in samples]
        return trusted, list(dict.fromkeys(t for ts in trusted for t in ts))

    def parse_requests(self, samples: Sequence[Sample]) -> list[tuple[str, bool]]:
        judged = [s for s in samples if self.skip(s) is None]
        _, distinct = self._to_parse(judged)
        return [(t, False) for t in [s.response for s in judged] + distinct]

    def _judge(self, samples: list[Sample]) -> list[dict[str, Any]]:
        if not samples:
            return []
        trusted, distinct = self._to_parse(samples)
        docs = parsing.parse([s.response for s in samples] + distinct)
        cand_docs = docs[:len(samples)]
        counts = {t: (triples(d), lemmas(d)) for t, d in zip(distinct, docs[len(samples):], strict=True)}
        rows = []
        for doc, ts in zip(cand_docs, trusted, strict=True):
            c_tri, c_lem = triples(doc), lemmas(doc)
            best: dict[str, Any] | None = None
            for t in ts:
                r_tri, r_lem = counts[t]
                tp, tr, tf = prf(c_tri, r_tri)
                lp, _, lf = prf(c_lem, r_lem)
                row = {"triple_p": tp, "triple_r": tr, "triple_f1": tf, "lemma_p": lp, "lemma_f1": lf}
                if best is None or tf > best["triple_f1"]:
                    best = row
            assert best is not None
            if not c_tri:
                susp = 1.0
            elif self.measure == "f1":
                susp = 1.0 - best["triple_f1"]
            else:
                susp = 1.0 - best["triple_p"] / best["lemma_p"] if best["lemma_p"] > 0 else 1.0
            rows.append({**best, "applicable": True, "triples": sum(c_tri.values()), "suspicion": susp})
        return rows
