"""robusteval's offline grammar checker (the ``builtin`` backend of the ``gec`` detector).

LanguageTool cannot be installed in this environment, so these rules stand in for it. Each
works on a spaCy parse and its morphology and reports errors as
``(kind, token index, message)``:

* ``spelling``: an alphabetic, lower-case-looking word that is neither in WordNet (through
  ``morphy``, so inflections count) nor frequent on the web (wordfreq Zipf >= 3.0). Proper
  nouns, capitalized words after the sentence start, URLs and words with digits are skipped.
* ``subject_verb``: a present-tense finite verb (or "was"/"were") whose number/person
  disagrees with its nominal subject ("the results is", "he go", "I is", "they was").
* ``det_noun``: a singular determiner on a plural noun ("this results", "a cars") or a plural
  one on a singular noun ("these result", "many car").
* ``verb_form``: the verb after a modal, "do" or "to" is not a base form ("can goes",
  "did went", "to went"); after "have" not a past participle ("has go", "has went",
  checked with lemminflect).
* ``repeated_word``: the same word twice in a row ("the the"), except the grammatical
  doubles "that that" and "had had".
* ``no_finite_verb``: a sentence of 6+ words with no finite verb (a fragment or word salad).
* ``sentence_boundary``: in cased text, a sentence starting in lower case after terminal
  punctuation, or a non-final sentence without terminal punctuation.
"""

from __future__ import annotations

import functools
from typing import Any

from robusteval.paths import ensure_nltk_data_path

ERROR_KINDS = ("spelling", "subject_verb", "det_noun", "verb_form", "repeated_word", "no_finite_verb",
               "sentence_boundary")
_SING_DET = {"a", "an", "this", "that", "every", "each", "another"}
_PLUR_DET = {"these", "those", "many", "several", "both", "few"}
_QUANTITY = {"few", "lot", "lots", "couple", "number", "dozen", "hundred", "thousand", "million",
             "billion", "pair", "series", "variety", "group", "total", "majority", "range"}
_SING_PRON = {"he", "she", "it", "this", "that"}
_PLUR_PRON = {"we", "they", "you", "these", "those"}
_OK_DOUBLES = {"that", "had", "is"}
_TERMINAL = {".", "!", "?", "…", '"', "'", ")", "”", "’"}


@functools.lru_cache(maxsize=200_000)
def is_known_word(word: str) -> bool:
    """True for a word found in WordNet (any inflection) or frequent in wordfreq's English."""
    from wordfreq import zipf_frequency

    w = word.lower()
    if zipf_frequency(w, "en") >= 3.0:
        return True
    return _wordnet_morphy(w)


@functools.lru_cache(maxsize=200_000)
def _wordnet_morphy(w: str) -> bool:
    wn = _wordnet()
    return wn is not None and wn.morphy(w) is not None


@functools.lru_cache(maxsize=1)
def _wordnet() -> Any:
    ensure_nltk_data_path()
    try:
        from nltk.corpus import wordnet as wn

        wn.ensure_loaded()
        return wn
    except LookupError:
        return None  # without WordNet the frequency list alone decides


def _finite_verb_of(head: Any) -> Any:
    """The token carrying tense for ``head``'s clause: a finite auxiliary if there is one."""
    for child in head.children:
        if child.dep_ in {"aux", "auxpass"} and "Fin" in child.morph.get("VerbForm"):
            return child
    return head


def _subject_number(subj: Any) -> str | None:
    low = subj.lower_
    if any(c.dep_ == "conj" for c in subj.children):
        return "plur"
    if low == "i":
        return "i"
    if low in _SING_PRON:
        return "sing"
    if low in _PLUR_PRON:
        return "plur"
    if subj.tag_ in {"NN", "NNP"}:
        return "sing"
    if subj.tag_ in {"NNS", "NNPS"}:
        return "plur"
    return None


def _agreement_error(subj: Any, verb: Any) -> bool:
    number = _subject_number(subj)
    low = verb.lower_
    if number is None:
        return False
    if verb.tag_ == "VBD" and low in {"was", "were"}:
        if low == "were":  # "if I were" / "he wished it were" are subjunctive, not errors
            before = verb.doc[max(0, subj.i - 3):subj.i]
            subjunctive = any(t.lower_ in {"if", "wish", "wished", "though"} for t in before)
            return number in {"i", "sing"} and subj.lower_ != "you" and not subjunctive
        return (number == "plur" and subj.lower_ != "you") or subj.lower_ == "you"
    if verb.tag_ not in {"VBZ", "VBP"}:
        return False
    if verb.lemma_ == "be":
        if number == "i":
            return low in {"is", "are", "'re"}
        if number == "sing":
            return low in {"am", "are", "'m", "'re"} and subj.lower_ != "you"
        return low in {"am", "is", "'m", "'s"}
    if number in {"i", "plur"}:
        return verb.tag_ == "VBZ"
    return verb.tag_ == "VBP"


def _next_verbal(doc: Any, i: int) -> Any:
    """The first of the next three tokens after ``i`` that is not an adverb or negation."""
    for j in range(i + 1, min(i + 4, len(doc))):
        tok = doc[j]
        if tok.pos_ in {"ADV", "PART"} and tok.lower_ != "to":
            continue
        return tok
    return None


def _is_participle(tok: Any) -> bool:
    """True when ``tok`` is a past participle of its lemma (lemminflect), e.g. not "went"."""
    from lemminflect import getInflection

    forms = {f.lower() for f in getInflection(tok.lemma_, "VBN")}
    return not forms or tok.lower_ in forms


def check_doc(doc: Any) -> list[tuple[str, int, str]]:
    """Grammar errors in one spaCy Doc."""
    errors: list[tuple[str, int, str]] = []
    cased = any(ch.isupper() for ch in doc.text)
    for tok in doc:
        low = tok.lower_
        # spelling
        if (tok.is_alpha and tok.is_ascii and len(tok) > 1 and tok.pos_ != "PROPN" and not tok.like_url
                and not (tok.text[0].isupper() and not tok.is_sent_start)
                and not is_known_word(tok.text) and not is_known_word(tok.lemma_)):
            errors.append(("spelling", tok.i, f"unknown word {tok.text!r}"))
        # repeated word
        nxt = doc[tok.i + 1] if tok.i + 1 < len(doc) else None
        if nxt is not None and tok.is_alpha and nxt.lower_ == low and low not in _OK_DOUBLES:
            errors.append(("repeated_word", nxt.i, f"repeated word {tok.text!r}"))
        # subject-verb agreement
        if tok.dep_ in {"nsubj", "nsubjpass"} and tok.head.pos_ in {"VERB", "AUX"}:
            verb = _finite_verb_of(tok.head)
            if _agreement_error(tok, verb):
                errors.append(("subject_verb", verb.i, f"{tok.text!r} does not agree with {verb.text!r}"))
        # determiner-noun number
        if tok.dep_ == "det" and tok.head.tag_ in {"NN", "NNS"} and tok.i < tok.head.i:
            between = {t.lower_ for t in doc[tok.i + 1: tok.head.i]}
            if not between & _QUANTITY:
                if low in _SING_DET and tok.head.tag_ == "NNS":
                    errors.append(("det_noun", tok.head.i, f"{tok.text!r} with plural {tok.head.text!r}"))
                elif low in _PLUR_DET and tok.head.tag_ == "NN":
                    errors.append(("det_noun", tok.head.i, f"{tok.text!r} with singular {tok.head.text!r}"))
        # verb form after modals / do / to / have
        trigger = tok.tag_ in {"MD", "TO"} or (tok.pos_ == "AUX" and tok.lemma_ in {"do", "have"})
        after = _next_verbal(doc, tok.i) if trigger else None
        if after is not None and after.pos_ in {"VERB", "AUX"}:
            if (tok.tag_ == "MD" or (tok.lemma_ == "do" and tok.pos_ == "AUX")) and after.tag_ in {"VBZ", "VBD", "VBG"}:
                errors.append(("verb_form", after.i, f"{after.text!r} after {tok.text!r} should be a base form"))
            elif tok.tag_ == "TO" and after.tag_ in {"VBZ", "VBD"}:
                errors.append(("verb_form", after.i, f"{after.text!r} after 'to' should be a base form"))
            elif (tok.lemma_ == "have" and tok.pos_ == "AUX" and after.head == tok.head
                  and (after.tag_ in {"VB", "VBZ"} or (after.tag_ in {"VBD", "VBN"} and not _is_participle(after)))):
                errors.append(("verb_form", after.i, f"{after.text!r} after {tok.text!r} should be a participle"))
    sents = list(doc.sents)
    for k, sent in enumerate(sents):
        words = [t for t in sent if t.is_alpha]
        finite = any("Fin" in t.morph.get("VerbForm") or t.tag_ in {"VBZ", "VBP", "VBD", "MD"} for t in sent)
        if len(words) >= 6 and not finite:
            errors.append(("no_finite_verb", sent.start, "sentence without a finite verb"))
        if cased and k > 0:
            first = next((t for t in sent if t.is_alpha), None)
            prev_last = sents[k - 1][-1].text
            if first is not None and first.text[0].islower() and prev_last[-1] in _TERMINAL:
                errors.append(("sentence_boundary", first.i, "sentence starts in lower case"))
        if k < len(sents) - 1 and sent[-1].text[-1] not in _TERMINAL and sent[-1].is_alpha:
            errors.append(("sentence_boundary", sent[-1].i, "sentence ends without punctuation"))
    return errors


def summarize(doc: Any, errors: list[tuple[str, int, str]]) -> dict[str, Any]:
    """Error rates per word token and per sentence, and counts by kind."""
    n_tokens = max(1, sum(1 for t in doc if not t.is_punct and not t.is_space))
    sents = list(doc.sents)
    bad_sents = {next((k for k, s in enumerate(sents) if s.start <= i < s.end), 0) for _, i, _ in errors}
    counts = {k: 0 for k in ERROR_KINDS}
    for kind, _, _ in errors:
        counts[kind] = counts.get(kind, 0) + 1
    return {"errors": len(errors), "tokens": n_tokens, "sentences": max(1, len(sents)),
            "per_token": len(errors) / n_tokens, "per_sentence": len(bad_sents) / max(1, len(sents)),
            "by_kind": counts}
