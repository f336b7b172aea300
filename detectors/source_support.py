"""[source_support] Facts in the response that the source does not support or contradicts.

The meaning-level attacks robusteval runs leave the text fluent and well formed, so the
surface detectors cannot see them: the closed-ended fact swaps of Liu et al. (KdConv-ADV /
DSTC7-ADV: the key entity, number or date replaced by another one), and Hu et al. 2024's
Non-contradiction perturbations (Table 2: Different Entity, Conflicting Fact, Negation) and
Faithfulness ones. What they change is checkable against the *source* -- the document, the
dialogue context, the knowledge fact and the references:

* **unsupported mentions** -- named entities, numbers and dates (spaCy NER) of the response
  that occur nowhere in the source. An entity is supported when every word of it occurs in
  the source (``"Obama"`` by ``"Barack Obama"``); a number when the same value does (``1,000``
  and ``1000``; number words ``"three"`` and ``3``);
* **substitutions** -- each response sentence is aligned to the source sentence sharing the
  most content lemmas (at least two, and at least ``align_min`` of the response sentence's).
  A mention replaces one of the aligned sentence's when (:func:`swapped`)

  - it sits in the same parse slot (the same head word and dependency: the subject of "beat")
    as a different mention of its kind there -- even when the swapped-in value occurs
    elsewhere in the source (a fact swap that reuses another of the document's names:
    "Chelsea beat Chelsea"); a mention the aligned sentence names in another slot of another
    word is a rewording (a passive), not a swap; or
  - the response sentence follows the aligned one closely (at least ``close_min`` of its
    content lemmas, default 0.8) and names an entity / number / date of a kind the aligned
    sentence has but not that one, while dropping the aligned sentence's ("back in 1977" ->
    "back in over 200 years ago"). A swap changes the parse around it, so in a near-copy the
    slot rule alone misses most swaps; in a loose paraphrase a new name of one kind is usually
    a fused fact, so the rule stays out of those;

  numbers and dates are compared by value ("about 2000" and "about 2,000" agree);
* **negation flips** -- a predicate negated in the response sentence and not in its aligned
  sentence, or the reverse ("will call" -> "will not call"). Where the two have as many
  negation words (:func:`negation_cues`; not counting the source's in a clause the response
  left out, a word-level diff stretch of more than ``EDIT_MAX`` (4) source words written in at
  most four: :func:`negation_shift`), only a negation moved from one predicate to another
  counts (:func:`flipped`): a lone flip there is the parse reading the same negation elsewhere.
  The predicate is the verb or adjective (an auxiliary is none: the verb it helps is); a
  copula is keyed on its complement ("is not happy" -> ``happy``) or its preposition ("was not
  in" -> ``be in``), so a negated copula is not paired with every passive or copula of the
  aligned sentence (:func:`negated`);
* **edits of a near-copy** (v3) -- a response sentence of five words or more that copies at
  least ``copy_min`` (0.7) of its words from its aligned source sentence in runs of two or more
  (:func:`copied_share`) is a near-copy, the form the attacks take: a faithful, mostly
  extractive sentence with one fact changed. There a word-level diff stretch of at most
  ``EDIT_MAX`` (4) words that replaces a name, number or date with a different one of its
  group, or adds or drops a negation word, is an edit (:func:`edits`, the row's ``edits``). An
  abstractive human sentence that names what its source describes rarely copies that much: on
  the clean calibration halves edits are on 0.9 % of SummEval references (3-22 % of which carry
  a loose finding of one kind or another) and on none of the DailyDialog replies (BENCHMARKS §9c). An edit adds to the
  same fact's other findings (a swapped name is often unsupported or a substitution too). A
  faithful abbreviation in a near-copy ("Man United" for "Manchester United") is an edit.

Two details keep clean text from being read as swapped: each source part (a context turn, the
fact, a reference) is parsed on its own, so no source sentence runs from one part into the
next; and a lower-cased response -- no capital inside any sentence, as in SummEval's system
summaries -- is first written with the source's casing (:func:`recase`), since spaCy's tagger
and NER read case: without it, the names of a lower-cased summary, and so its swaps, go unseen.

Suspicion = ``1 - exp(-(unsupported + 1.5 * (substitutions + flips) + edit_weight * edits) / scale)``:
one unsupported name or number is 0.63 at scale 1 (default threshold 0.6), one substitution or
flip 0.78, one edit 0.98 (``edit_weight`` 4, about the most loose findings a clean calibration
text piles up; 0 turns edits off). A dialogue reply may bring new names into a conversation,
so this detector is meant for grounded tasks
(summarization, data-to-text, knowledge-grounded replies with a fact); its threshold is
calibrated per task with ``robusteval guard calibrate`` like every other.

spaCy's English pipeline does the NER and the parse, so the detector judges English only by
default (``languages=``); other languages abstain (suspicion 0, ``abstained_language:<code>``
counted in the report), as does a sample without any source text (``no_source``).
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

from robusteval.detectors import parsing
from robusteval.detectors.base import Detector, register_detector

from robusteval.types import Sample

KINDS = {
    "entity": frozenset({"PERSON", "ORG", "NORP", "PRODUCT", "WORK_OF_ART", "EVENT", "LAW", "LANGUAGE",
                         "GPE", "LOC", "FAC"}),
    "number": frozenset({"CARDINAL", "QUANTITY", "MONEY", "PERCENT", "ORDINAL"}),
    "date": frozenset({"DATE", "TIME"}),
}
NUMBER_WORDS = {w: i for i, w in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"))}
NEGATIONS = frozenset({"not", "n't", "never", "no", "nobody", "nothing", "none", "neither", "nor", "nowhere"})


def kind_of(label: str) -> str | None:
    return next((k for k, labels in KINDS.items() if label in labels), None)


def numbers_in(text: str) -> set[str]:
    """Normalized numeric values in ``text``: digits without separators, number words as digits."""
    out = {m.group(0).replace(",", "").rstrip(".") for m in re.finditer(r"\d[\d,]*(?:\.\d+)?", text)}
    out |= {str(NUMBER_WORDS[w]) for w in re.findall(r"[a-z]+", text.lower()) if w in NUMBER_WORDS}
    return out


def words_in(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"\w+", text)}


def supported(mention: str, kind: str, words: set[str], numbers: set[str]) -> bool:
    if kind == "number" or (kind == "date" and numbers_in(mention)):
        values = numbers_in(mention)
        if values:
            return values <= numbers
    tokens = words_in(mention) - {"the", "a", "an", "of", "'s"}
    return bool(tokens) and tokens <= words


def content(sent: Any) -> set[str]:
    return {t.lemma_.lower() for t in sent if t.is_alpha and not t.is_stop}


def negated(sent: Any) -> dict[str, bool]:
    """Predicate -> whether it is negated in ``sent``. The predicate is the verb or adjective
    the negation attaches to. An auxiliary (``aux`` / ``auxpass``: "will", the "be" of a
    passive) is none: the verb it helps is. A copula is keyed on its complement ("should not be
    long" -> ``long``) or, without one, on its preposition ("was not in the squad" -> ``be
    in``), so a negated copula is not paired with every passive or copula of the aligned
    sentence. "have" and "do" as main verbs are predicates like any other."""
    out: dict[str, bool] = {}
    for t in sent:
        if t.pos_ not in ("VERB", "AUX", "ADJ") or t.dep_ in ("aux", "auxpass"):
            continue
        neg = any(c.dep_ == "neg" or c.lower_ in NEGATIONS for c in t.children)
        lemma = t.lemma_.lower()
        if lemma == "be":
            comp = next((c for c in t.children if c.dep_ in ("acomp", "attr", "xcomp", "oprd")), None)
            prep = next((c for c in t.children if c.dep_ == "prep"), None)
            key = comp.lemma_.lower() if comp is not None else f"be {prep.lemma_.lower()}" if prep is not None else "be"
        else:
            key = lemma
        out[key] = out.get(key, False) or neg
    return out


# "no" before a number is the abbreviation ("world No. 1", "the wasps no 8"); a capital "Nor" is a name;
# the spaced forms are pre-tokenized text's ("didn ’ t" in SummEval's articles)
_NEGATION_CUE = re.compile(r"(?i:\b(?:not|never|nobody|nothing|none|neither|nowhere|cannot)\b"
                           r"|\bno\b(?!\.?\s*\d)|n ?['’] ?t\b)|\bnor\b")


def negation_cues(text: str) -> int:
    """How many negation words ``text`` has: "not", "never", "no" (not "No. 1"), "n't" --
    straight or curly, and spaced as pre-tokenized text writes it ("didn ’ t", which spaCy
    does not parse as a negation: the count reads the text, not the parse)."""
    return len(_NEGATION_CUE.findall(text))


Diff = tuple[list[Any], list[Any], difflib.SequenceMatcher]


def diff(sent: Any, aligned: Any) -> Diff:
    """The words of a response sentence and of its aligned source sentence (punctuation aside)
    and a ``difflib`` matcher over their lower-cased forms."""
    mine = [t for t in sent if not t.is_punct and not t.is_space]
    theirs = [t for t in aligned if not t.is_punct and not t.is_space]
    return mine, theirs, difflib.SequenceMatcher(None, [t.lower_ for t in mine], [t.lower_ for t in theirs],
                                                 autojunk=False)


def copied_share(sent: Any, aligned: Any, words: Diff | None = None) -> float:
    """The share of the response sentence's words that it copies from the aligned source
    sentence in runs of two or more words, in order (the matcher's blocks); 0 for a sentence
    under five words, which copies too little to say. An attack edits a faithful sentence and
    leaves the rest as it was (a near-copy); a human's abstractive sentence that follows its
    source in meaning rarely does. ``words``: :func:`diff`'s result, when the caller has it."""
    mine, _, matcher = words or diff(sent, aligned)
    if len(mine) < 5:
        return 0.0
    return sum(b.size for b in matcher.get_matching_blocks() if b.size >= 2) / len(mine)


def negation_starts(sent: Any) -> list[int]:
    """Where each negation word of ``sent`` starts (document offsets), read over the whole
    sentence as :func:`negation_cues` reads it: a stretch of the diff then counts the ones
    starting in it, so "No" of "No. 1" is none anywhere and a spaced "didn ’ t" is one, in the
    stretch that holds "didn"."""
    return [sent.start_char + m.start() for m in _NEGATION_CUE.finditer(sent.text)]


def cues_in(toks: list[Any], starts: list[int]) -> int:
    """How many of ``starts`` lie in the text from the first of ``toks`` to the last."""
    if not toks:
        return 0
    lo, hi = toks[0].idx, toks[-1].idx + len(toks[-1])
    return sum(lo <= at < hi for at in starts)


def negation_shift(sent: Any, aligned: Any, words: Diff,
                   starts: tuple[list[int], list[int]] | None = None) -> int:
    """How many more negation words (:func:`negation_cues`) the response sentence ``sent`` has
    than its aligned source sentence (negative: fewer), not counting the source's in a clause
    the response left out: a diff stretch of more than ``EDIT_MAX`` source words that the
    response writes in ``EDIT_MAX`` words or fewer (none, or a few; a negation those few keep
    is the clause's: "didn't" for "surely and truly didn't" adds none). A summary that copies "the
    car's entire front end was torched" from "No one was injured during the fire, but the car's
    entire front end was torched" and writes "was not torched" adds a negation, though each
    sentence has one. A long stretch both sides write is counted on both: the response's
    rewrite of it may keep the negation ("was never close to playing" for "did not take part")
    or add one ("Tim Durkan did not photograph" for "He photographed a handful of").
    ``words``: :func:`diff`'s result for the two; ``starts``: their :func:`negation_starts`,
    when the caller has them."""
    mine, theirs, matcher = words
    mine_starts, their_starts = starts or (negation_starts(sent), negation_starts(aligned))
    left_out = sum(max(0, cues_in(theirs[j1:j2], their_starts) - cues_in(mine[i1:i2], mine_starts))
                   for _, i1, i2, j1, j2 in matcher.get_opcodes() if j2 - j1 > EDIT_MAX >= i2 - i1)
    return len(mine_starts) - len(their_starts) + left_out


def flipped(sent: Any, aligned: Any, words: Diff | None = None) -> list[str]:
    """The predicates negated in one sentence and not in the other (:func:`negated`). Where the
    two have as many negation words (the source's left-out clauses aside: :func:`negation_shift`),
    the negation is the same one and a single flip is the parse attaching it elsewhere, or
    missing a spaced "didn ’ t": it counts only as part of a pair in both directions, a negation
    moved from one predicate to another ("did not win ... lost" against "won ... did not
    lose"). ``words``: :func:`diff`'s result, when the caller has it."""
    ours, theirs = negated(sent), negated(aligned)
    pairs = [(lemma, neg) for lemma, neg in ours.items() if lemma in theirs and theirs[lemma] != neg]
    if not pairs or ({neg for _, neg in pairs} != {True, False}
                     and not negation_shift(sent, aligned, words or diff(sent, aligned))):
        return []
    return [lemma for lemma, _ in pairs]


APPROXIMATE = frozenset({"about", "around", "approximately", "almost", "nearly", "over", "under", "more",
                         "less", "than", "some", "roughly", "up", "to", "at", "least", "most", "just", "only",
                         "the", "a", "an", "of"})


def same_value(mine: str, theirs: str, kind: str) -> bool:
    """Whether two mentions of one kind name the same thing. Numbers and dates: the numeric
    values of one are among the other's ("about 2000" and "about 2,000", "150" and "more than
    150", "April 2015" and "2015"; not "3-1" and "1-0", not "12 April" and "11 April") and so are
    their other words, hedges aside ("April 2015" and "May 2015" differ). Names: one's words
    inside the other's ("Obama" and "Barack Obama")."""
    mw, tw = words_in(mine), words_in(theirs)
    if kind in ("number", "date"):
        a, b = numbers_in(mine), numbers_in(theirs)
        if a and b:
            if not (a <= b or b <= a):
                return False
            mw = {w for w in mw if not w[0].isdigit() and w not in NUMBER_WORDS} - APPROXIMATE
            tw = {w for w in tw if not w[0].isdigit() and w not in NUMBER_WORDS} - APPROXIMATE
    return mw <= tw or tw <= mw


_WORD = re.compile(r"\w[\w'’-]*")
SENTENCE_START = frozenset(".!?:;\"'“”‘’()[]-–—")  # after these a capital says nothing about the word
ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "prof", "sr", "jr", "gen", "gov", "sen", "rep", "lt",
                           "col", "capt", "sgt", "mt", "ft", "vs", "no", "u.s", "u.k", "u.n", "e.g", "i.e"})


def at_sentence_start(text: str, start: int) -> bool:
    """Whether the word at ``start`` of ``text`` opens a sentence, a line or a quotation (where a
    capital says nothing about the word). A full stop after an abbreviation or an initial ("Mr.
    Smith", "J. Smith", "U.S. Army") does not end a sentence."""
    i = start - 1
    while i >= 0 and text[i].isspace() and text[i] != "\n":
        i -= 1
    if i < 0 or text[i] == "\n":
        return True
    if text[i] == ".":
        j = i - 1
        while j >= 0 and (text[j].isalpha() or text[j] == "."):
            j -= 1
        before = text[j + 1:i].lower()
        return not (before in ABBREVIATIONS or (len(before) == 1 and before.isalpha()))
    return text[i] in SENTENCE_START


def lower_cased(text: str) -> bool:
    """No word of ``text`` is capitalized except where a sentence starts: a case-folded output."""
    return not any(m.group(0) != m.group(0).lower() and not at_sentence_start(text, m.start())
                   for m in _WORD.finditer(text))


@functools.lru_cache(maxsize=256)
def casing(source: str) -> dict[str, str]:
    """Lower-case word -> how ``source`` writes it, for the words the source only ever
    capitalizes inside a sentence (its most frequent form). Worked out once per source: an
    attack's candidates and a summary's many systems share one."""
    lower: set[str] = set()
    cased: dict[str, dict[str, int]] = {}
    for m in _WORD.finditer(source):
        w = m.group(0)
        if w == w.lower():
            lower.add(w)
            continue
        if at_sentence_start(source, m.start()):
            continue  # capitalized for the position, not the word
        forms = cased.setdefault(w.lower(), {})
        forms[w] = forms.get(w, 0) + 1
    # single letters stay: initials ("J. Doe", "U.S.") would otherwise recase every "s" of "'s"
    return {k: max(v, key=lambda f: (v[f], f)) for k, v in cased.items() if k not in lower and len(k) > 1}


def recase(text: str, source: str) -> str:
    """A lower-cased ``text`` (:func:`lower_cased`) with its lower-case words written as the
    source writes them where the source only ever capitalizes them inside a sentence ("paul
    merson" -> "Paul Merson"; :func:`casing`). Many system outputs are lower-cased (SummEval's
    are), and spaCy's NER and tagger read case: without this, the names of a lower-cased summary
    are not found, so its swapped facts are not either. A word the source also writes in lower
    case, or capitalizes only where a sentence starts, is left alone; so is a text that has its
    own capitals (its casing is its own)."""
    if not lower_cased(text):
        return text
    table = casing(source)
    if not table:
        return text
    return _WORD.sub(lambda m: table.get(m.group(0), m.group(0)) if m.group(0) == m.group(0).lower()
                     else m.group(0), text)


def slot(root: Any) -> tuple[str, ...]:
    """Where a mention sits: its head's lemma and its dependency; through a preposition, the
    word the preposition attaches to as well ("beat ... on Sunday" -> ("beat", "on", "pobj"))."""
    head = root.head
    if head.pos_ == "ADP" and head.head is not head:
        return (head.head.lemma_.lower(), head.lemma_.lower(), root.dep_)
    return (head.lemma_.lower(), root.dep_)


class Mention(NamedTuple):
    """A name, number or date of a sentence: its text, kind (``KINDS``), spaCy label ("" for a
    run of proper nouns NER missed), tokens and root token."""

    text: str
    kind: str
    label: str
    tokens: tuple[Any, ...]
    root: Any


def mention_spans(sent: Any) -> list[Mention]:
    """The entity, number and date mentions of ``sent``: spaCy's named entities, plus runs of
    proper nouns the small English NER misses ("Arsenal beat ...")."""
    out = [Mention(e.text, k, e.label_, tuple(e), e.root) for e in sent.ents if (k := kind_of(e.label_)) is not None]
    covered = {t.i for e in sent.ents for t in e}
    run: list[Any] = []
    for t in [*sent, None]:
        if t is not None and t.pos_ == "PROPN" and t.i not in covered:
            run.append(t)
            continue
        if run:
            root = next((r for r in run if r.head not in run), run[-1])
            out.append(Mention(" ".join(r.text for r in run), "entity", "", tuple(run), root))
            run = []
    return out


def mentions(sent: Any) -> list[tuple[str, str, tuple[str, ...]]]:
    """(text, kind, slot) of :func:`mention_spans`. The slot is where the mention sits in the
    parse: its root's head lemma and dependency ("Arsenal beat ..." -> ("beat", "nsubj"))."""
    return [(m.text, m.kind, slot(m.root)) for m in mention_spans(sent)]


def group(m: Mention) -> str:
    """What a mention may be swapped for in an edit: a value (number or date) for a value, a
    nationality, religion or group (NORP: "the Italians") for another, any other name for a
    name. Persons, organizations and places are one group: the small English NER confuses them
    ("Yoshinori Muto" as an organization, "Albirex Niigata" as a person). Keeping NORP apart
    keeps a name that spells out a description ("the Spanish tactician" -> "Guardiola") from
    reading as a swap."""
    if m.kind != "entity":
        return "value"
    return "norp" if m.label == "NORP" else "name"


EDIT_MAX = 4  # words on either side of an edit: a longer stretch is text one side left out, not a swap


def tagged(sent: Any) -> dict[int, Mention]:
    """Token index -> the mention it belongs to, a number NER did not tag ("6-0") a value of its own."""
    out = {t.i: m for m in mention_spans(sent) for t in m.tokens}
    out.update({t.i: Mention(t.text, "number", "CARDINAL", (t,), t) for t in sent if t.like_num and t.i not in out})
    return out


def edits(sent: Any, aligned: Any, words: Diff | None = None) -> list[str]:
    """The fact edits a word-level diff of ``sent`` against its aligned source sentence shows
    (``difflib`` opcodes over the lower-cased words, punctuation aside): a mention of ``sent``
    in a replaced stretch whose source side holds a different mention it may stand for
    (:func:`group`: "Chelsea" for "Albirex Niigata", "0-0" for "6-0"), and ``"negation"``, once,
    for a stretch that adds or drops a negation word where the two sentences' counts of them
    differ (the source's left-out clauses aside: :func:`negation_shift`; a negation moved
    within the sentence keeps the count: :func:`flipped` reads it).

    An edit is at most ``EDIT_MAX`` words on either side: a longer stretch is a clause one side
    has and the other leaves out (a summary that copies half of a long sentence), not a change
    of one fact. A name that *replaces* a description ("the full back" -> "Luis") has no mention
    on the source side to differ from, and one an edit *inserts* ("of Limerick Township,
    Pennsylvania") none at all: neither is a swap (a name the source lacks is unsupported).
    ``words``: :func:`diff`'s result, when the caller has it (the matcher keeps its blocks)."""
    mine, theirs, matcher = words or diff(sent, aligned)
    where_mine, where_theirs = tagged(sent), tagged(aligned)

    out: list[str] = []
    mine_starts, their_starts = negation_starts(sent), negation_starts(aligned)
    negation = negation_shift(sent, aligned, (mine, theirs, matcher), (mine_starts, their_starts)) != 0
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal" or max(i2 - i1, j2 - j1) > EDIT_MAX:
            continue
        changed = cues_in(mine[i1:i2], mine_starts) != cues_in(theirs[j1:j2], their_starts)
        if negation and changed and "negation" not in out:
            out.append("negation")
        if op != "replace":
            continue
        old = list({id(m): m for t in theirs[j1:j2] if (m := where_theirs.get(t.i)) is not None}.values())
        for new in {id(m): m for t in mine[i1:i2] if (m := where_mine.get(t.i)) is not None}.values():
            if new.text not in out and any(group(new) == group(o) and not same_value(new.text, o.text, o.kind)
                                           for o in old):
                out.append(new.text)
    return out


def swapped(sent: Any, aligned: Any, close: bool) -> list[str]:
    """Mentions of the response sentence ``sent`` that replace one of the aligned source
    sentence's, found two ways:

    * **in its slot** -- the mention sits where the aligned sentence names something else of
      its kind (the subject of "beat"). A mention the aligned sentence also names counts only
      when it moved between the arguments of the same word ("Arsenal beat Chelsea" -> "Chelsea
      beat Chelsea"); elsewhere it is a rewording the parse reads differently (a passive);
    * **in its kind** -- the sentence names an entity / number / date the aligned sentence does
      not, and drops one of the same kind that the aligned sentence names ("back in 1977" ->
      "back in over 200 years ago"), wherever the parse puts them: a swap changes the parse
      around it, so slots alone miss most swaps in sentences that are otherwise the same.
    """
    mine, theirs = mentions(sent), mentions(aligned)
    by_slot: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    heads: dict[tuple[str, str], set[str]] = {}
    for t, kind, where in theirs:
        by_slot.setdefault((kind, where), []).append(t)
        heads.setdefault((kind, t.lower()), set()).add(where[0])
    out: list[str] = []
    for m, kind, where in mine:
        others = by_slot.get((kind, where), [])
        if not others or any(same_value(m, t, kind) for t in others):
            continue
        named = [h for (k, t), h in heads.items() if k == kind and same_value(m, t, kind)]
        if named and not any(where[0] in h for h in named):
            continue
        out.append(m)
    if not close:
        return out
    sent_words, aligned_words = words_in(sent.text), words_in(aligned.text)
    sent_numbers, aligned_numbers = numbers_in(sent.text), numbers_in(aligned.text)

    def said(mention: str, kind: str, words: set[str], numbers: set[str]) -> bool:
        """Whether the other sentence says ``mention`` at all, tagged or not (of another kind,
        "2,000" as a date there and "2000" as a number here)."""
        values = numbers_in(mention) if kind in ("number", "date") else set()
        rest = {w for w in words_in(mention) if not w[0].isdigit() and w not in NUMBER_WORDS} - APPROXIMATE
        return values <= numbers and rest <= words

    for kind in KINDS:
        extra = [m for m, k, _ in mine if k == kind and m not in out
                 and not any(same_value(m, t, k) for t, k2, _ in theirs if k2 == kind)
                 and not said(m, k, aligned_words, aligned_numbers)]
        dropped = [t for t, k, _ in theirs if k == kind
                   and not any(same_value(m, t, k) for m, k2, _ in mine if k2 == kind)
                   and not said(t, k, sent_words, sent_numbers)]
        if extra and dropped:
            out += list(dict.fromkeys(extra))
    return out


@register_detector
class SourceSupport(Detector):
    """Entities, numbers, dates and negations unsupported by the source (Liu et al.'s closed-ended
    swaps; Hu et al. 2024, Table 2, Non-contradiction and Faithfulness)."""

    name: ClassVar[str] = "source_support"
    family: ClassVar[str] = "meaning"
    source: ClassVar[str] = ("Liu et al., closed-ended adversarial references (KdConv-ADV / DSTC7-ADV); "
                             "Hu et al. 2024, Table 2 (Non-contradiction: Different Entity, Conflicting Fact, "
                             "Negation)")
    default_threshold: ClassVar[float] = 0.6
    reads: ClassVar[tuple[str, ...]] = ("response", "context", "reference", "references", "fact")
    version: ClassVar[int] = 4  # 2: the revision of 2026-11-25; 3: edits in near-copies; 4: the source's
    # negations in clauses the response left out not counted (negation_shift) (Detector.identity)

    def __init__(self, scale: float = 1.0, align_min: float = 0.5, close_min: float = 0.8, copy_min: float = 0.7,
                 edit_weight: float = 4.0, languages: tuple[str, ...] | list[str] | None = ("en",),
                 threshold: float | None = None) -> None:
        super().__init__(threshold)
        if scale <= 0 or not 0 < align_min <= 1 or not 0 < close_min <= 1 or not 0 < copy_min <= 1:
            raise ValueError("source_support: scale must be > 0, align_min, close_min and copy_min in (0, 1]")
        if edit_weight < 0:
            raise ValueError(f"source_support: edit_weight must be >= 0, got {edit_weight}")
        self.scale = scale
        self.align_min = align_min
        self.close_min = close_min
        self.copy_min = copy_min
        self.edit_weight = edit_weight
        self.languages = tuple(languages) if languages else None

    def signature(self) -> str:
        langs = ",".join(self.languages) if self.languages else "any"
        return (f"scale={self.scale},align_min={self.align_min},close_min={self.close_min},"
                f"copy_min={self.copy_min},edit_weight={self.edit_weight},languages={langs}")

    @staticmethod
    def source_parts(s: Sample) -> list[str]:
        """The texts the response is checked against: the context turns, the fact and the
        references, each parsed on its own (a sentence never runs from one into the next)."""
        return [t for t in (*s.context, s.fact or "", *s.all_references()) if t and t.strip()]

    def _abstain(self, s: Sample) -> dict[str, Any] | None:
        """The row of a sample this detector does not judge (a language it does not cover, no
        source), None for the others."""
        from robusteval.langid import sample_language

        lang = sample_language(s) if self.languages else None
        if self.languages and lang not in self.languages:
            return {"suspicion": 0.0, "abstained": True, "language": lang, "fallback": f"abstained_language:{lang}"}
        if not self.source_parts(s):
            return {"suspicion": 0.0, "abstained": True, "fallback": "no_source"}
        return None

    @classmethod
    def _texts(cls, s: Sample) -> list[str]:
        """What is parsed for ``s``: the response (recased against the source) and each source part."""
        parts = cls.source_parts(s)
        return [recase(s.response, "\n".join(parts)), *parts]

    def parse_requests(self, samples: Sequence[Sample]) -> list[tuple[str, bool]]:
        return [(t, True) for s in samples if self._abstain(s) is None for t in self._texts(s)]

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any] | None] = [self._abstain(s) for s in samples]
        todo = [(i, self._texts(samples[i])) for i, r in enumerate(rows) if r is None]
        if todo:
            docs = iter(parsing.parse([t for _, texts in todo for t in texts], ner=True))
            for i, texts in todo:
                resp, *src = [next(docs) for _ in texts]
                rows[i] = self._compare(resp, src, "\n".join(texts[1:]))
        return [r for r in rows if r is not None]

    def _compare(self, resp: Any, src: Sequence[Any], src_text: str) -> dict[str, Any]:
        words, numbers = words_in(src_text), numbers_in(src_text)
        unsupported = [m for m, k, _ in mentions(resp) if not supported(m, k, words, numbers)]
        said = " ".join(unsupported)
        # numbers NER did not tag ("5-1", "in 12 games") are values all the same
        unsupported += sorted(v for v in numbers_in(resp.text) - numbers if v not in numbers_in(said))
        src_sents = [(sent, content(sent)) for doc in src for sent in doc.sents]
        substitutions: list[str] = []
        flips: list[str] = []
        edited: list[str] = []
        for sent in resp.sents:
            mine = content(sent)
            if not mine or not src_sents:
                continue
            best, lemmas = max(src_sents, key=lambda p: len(mine & p[1]))
            shared = len(mine & lemmas)
            if shared < min(2, len(mine)) or shared / len(mine) < self.align_min:
                continue
            close = shared / len(mine) >= self.close_min
            substitutions += [m for m in swapped(sent, best, close) if m not in unsupported]
            words = diff(sent, best) if self.edit_weight else None  # one matcher for the share, edits, flips
            if words is not None and copied_share(sent, best, words) >= self.copy_min:
                edited += edits(sent, best, words)
            flips += flipped(sent, best, words)
        score = len(unsupported) + 1.5 * (len(substitutions) + len(flips)) + self.edit_weight * len(edited)
        return {"unsupported": unsupported, "substitutions": substitutions, "negation_flips": flips,
                "edits": edited, "abstained": False, "suspicion": 1.0 - math.exp(-score / self.scale)}
