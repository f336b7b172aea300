"""Clean, human-written text to calibrate detectors on and to measure false positives with.

Each set is built from the human-judgment data (``ROBUSTEVAL_DATA``), never copied:

* ``summeval-references`` — every SummEval reference summary as the response, with its source
  article as context and the document's *other* references as references (a human summary
  checked against human summaries, as a system summary would be);
* ``summeval-good`` — SummEval system summaries that the experts rated >= 4 (1-5, the mean
  of three) on every aspect: the summarization counterpart of ``dailydialog-good``, i.e. good
  *system* output, the text a guard in front of a summarization metric screens;
* ``dailydialog-good`` — DailyDialog-Zhao responses rated >= 4 overall (1-5);
* ``dailydialog-good:<language>`` — the same replies in one of xDial's nine machine
  translations (``arabic``, ``chinese``, ``french``, ``german``, ``hindi``, ``japanese``,
  ``korean``, ``russian``, ``spanish``), response and context translated together;
* ``usr-topicalchat-ground-truth`` — the original Topical-Chat ground-truth responses of USR;
* ``quickstart-references`` — the reference replies and summaries of robusteval's own
  quickstart datasets and their candidates rated 5 of 5 (package data, so the offline
  quickstart needs no data folder), with their dialogue context or source paragraph.

Any other dataset works as a clean set too -- a ``.jsonl`` / ``.csv`` / ``.parquet`` file, a
registered dataset, ``hf:NAME``, a folder or ``module:attr`` (whatever ``robusteval.data.load``
takes): its responses are taken as clean text.

Samples are split in two by a hash of their *conversation* (:meth:`Sample.conversation_key`:
the dialogue a reply answers, the document a summary summarizes; a sample without a context is
its own conversation), stable across runs and orderings: ``calibration`` fits thresholds,
``heldout`` measures false-positive rates. Texts of one conversation never sit in both halves,
so a held-out rate is measured on contexts the thresholds never saw (detectors such as
``context_copy``, ``perplexity`` and ``source_support`` read the context), and a translated
reply falls in the half of the English conversation it was translated from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from robusteval.types import Sample

CLEAN_SETS: dict[str, Callable[[Path | None], list[Sample]]] = {}
SPLITS = ("calibration", "heldout", "all")
# how the halves are drawn, recorded in every thresholds file: "conversation" since 2026-11-27
# (before it, a hash of the sample id, which put one dialogue's replies on both sides); a file
# calibrated the old way is not evaluated on the new held-out half, which overlaps its fit
CLEAN_SPLIT = "conversation"


def _clean_set(name: str) -> Callable[[Callable[[Path | None], list[Sample]]], Callable[[Path | None], list[Sample]]]:
    def deco(fn: Callable[[Path | None], list[Sample]]) -> Callable[[Path | None], list[Sample]]:
        CLEAN_SETS[name] = fn
        return fn
    return deco


@_clean_set("summeval-references")
def _summeval_refs(data_dir: Path | None) -> list[Sample]:
    from robusteval import data

    seen: dict[str, Sample] = {}
    for s in data.load("summeval", data_dir):
        seen.setdefault(str(s.meta.get("doc_id")), s)
    out = []
    for doc_id, s in seen.items():
        refs = s.all_references()
        for j, ref in enumerate(refs):
            others = tuple(r for k, r in enumerate(refs) if k != j)
            out.append(Sample(id=f"summeval-ref/{doc_id}/{j}", task="summarization", context=s.context,
                              response=ref, reference=others[0] if others else None, references=others,
                              meta={"dataset": "summeval", "doc_id": doc_id, "clean": "human reference"}))
    return out


@_clean_set("summeval-good")
def _summeval_good(data_dir: Path | None) -> list[Sample]:
    from robusteval import data

    return [s for s in data.load("summeval", data_dir) if s.human and min(s.human.values()) >= 4.0]


@_clean_set("dailydialog-good")
def _dailydialog_good(data_dir: Path | None) -> list[Sample]:
    from robusteval import data

    return [s for s in data.load("dailydialog-zhao", data_dir) if s.human.get("overall", 0.0) >= 4.0]


def _dailydialog_good_in(language: str, data_dir: Path | None) -> list[Sample]:
    out = []
    for s in _dailydialog_good(data_dir):
        tr = (s.meta.get("translations") or {}).get(language)
        if tr is None:
            from robusteval.errors import UnknownNameError

            known = ", ".join(sorted(s.meta.get("translations") or {}))
            raise UnknownNameError(f"no {language!r} translation in DailyDialog-Zhao (known: {known})")
        turns = tuple(t for t in tr["context"].split("\n") if t.strip()) or s.context
        out.append(Sample(id=f"{s.id}/{language}", task="dialogue", response=tr["response"], context=turns,
                          # the English dialogue's conversation: translations are made row by row,
                          # so their own contexts would not join one dialogue's rated turns
                          meta={"dataset": "dailydialog-zhao", "translation": language, "clean": "rated >= 4",
                                "conversation": s.conversation_key()}))
    return out


@_clean_set("usr-topicalchat-ground-truth")
def _usr_gt(data_dir: Path | None) -> list[Sample]:
    from robusteval import data

    return [s for s in data.load("usr-topicalchat", data_dir) if s.meta.get("system_id") == "Original Ground Truth"]


@_clean_set("quickstart-references")
def _quickstart_refs(data_dir: Path | None) -> list[Sample]:
    from robusteval import data

    out: dict[str, Sample] = {}
    for name in ("quickstart-dialogue", "quickstart-summary"):
        for s in data.load(name):
            key = f"{name}/ref/{s.id.split('/')[1]}"
            if key not in out and s.reference:
                out[key] = Sample(id=key, task=s.task, context=s.context, response=s.reference,
                                  meta={"dataset": name, "clean": "human reference"})
            if s.human.get("overall") == 5.0:
                out[s.id] = s
    return list(out.values())


def in_heldout(sample: Sample) -> bool:
    """Whether ``sample`` is in the held-out half: a hash of its conversation, so every text of
    one dialogue or document falls on the same side."""
    if not isinstance(sample, Sample):
        raise TypeError(f"in_heldout takes a Sample (its conversation decides the half), got {type(sample).__name__}")
    return hashlib.sha256(sample.conversation_key().encode("utf-8")).digest()[0] % 2 == 1


def check_clean_split(thresholds: str | Path) -> None:
    """Refuse a thresholds file whose false-positive rates are about to be measured on held-out
    halves it may have been fitted on: one that records another ``clean_split``, or none (written
    before robusteval recorded it -- then on id halves, or conversation halves from 2026-11-27 --
    or by hand). Used by ``guard evaluate`` and by ``compare`` with ``guard.thresholds: <file>``."""
    from robusteval.detectors.base import read_thresholds_header

    from robusteval.errors import RobustevalError

    made = read_thresholds_header(thresholds).get("clean_split")
    if made == CLEAN_SPLIT:
        return
    how = (f"was calibrated on halves drawn by {made!r}" if made else
           "records no clean_split (written before robusteval recorded one, when the halves were drawn "
           "by sample id, or by hand)")
    raise RobustevalError(f"{thresholds}: {how}, but held-out clean text is now the {CLEAN_SPLIT!r} half, so "
                          "its false-positive rates could be measured on texts it was fitted on; recalibrate "
                          f"with `robusteval guard calibrate`, or, for a table not fitted on these clean sets, add "
                          f'"clean_split": "{CLEAN_SPLIT}" to it')


def is_clean_set(name: str) -> bool:
    """``name`` is one of the shipped clean sets above (``dailydialog-good:<language>`` included)."""
    base, _, language = name.partition(":")
    return base in CLEAN_SETS and (not language or base == "dailydialog-good")


def check_clean(name: str) -> None:
    """Fail now on a clean set that names nothing: neither a shipped clean set nor anything
    ``robusteval.data.info`` knows (a missing file, an unknown name)."""
    if is_clean_set(name):
        return
    from robusteval import data
    from robusteval.errors import MissingResourceError, UnknownNameError

    try:
        data.info(name)
    except UnknownNameError as exc:
        raise UnknownNameError(f"unknown clean set {name!r}: not a shipped clean set "
                               f"({', '.join(sorted(CLEAN_SETS))}, dailydialog-good:<language>) and not a "
                               f"dataset ({exc})") from None
    except MissingResourceError as exc:
        raise MissingResourceError(f"clean set {name!r}: {exc}") from None


def load_clean(name: str, split: str = "all", data_dir: str | Path | None = None) -> list[Sample]:
    """Clean set ``name`` (see the module docstring: a shipped set, or any dataset a file, a
    name, ``hf:NAME`` or ``module:attr`` gives), one half of it, or all of it."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    folder = Path(data_dir) if data_dir else None
    if is_clean_set(name):
        base, _, language = name.partition(":")
        samples = _dailydialog_good_in(language, folder) if language else CLEAN_SETS[base](folder)
    else:
        from robusteval import data

        check_clean(name)
        samples = data.load(name, folder)
    _refuse_blank(name, samples)
    if split == "all":
        return samples
    want = split == "heldout"
    half = [s for s in samples if in_heldout(s) == want]
    if samples and not half:
        from robusteval.errors import DataFormatError

        n_conv = len({s.conversation_key() for s in samples})
        raise DataFormatError(f"clean set {name}", f"its {len(samples)} texts come from {n_conv} "
                              f"conversation(s), all in the other half, so its {split} half is empty; "
                              "clean text is halved by conversation (the context, or a 'conversation' "
                              "column): give it texts from several dialogues or documents")
    return half


def _refuse_blank(name: str, samples: list[Sample]) -> None:
    """An empty or invisible-only response is not clean human text: every detector rates it
    1.0 (its fallback), so calibrating on it would push the threshold above 1 and switch the
    detector off without a word. Refused, naming the samples."""
    from robusteval.errors import DataFormatError
    from robusteval.text import is_blank

    blank = [s.id for s in samples if is_blank(s.response)]
    if blank:
        shown = ", ".join(repr(i) for i in blank[:5]) + (f" and {len(blank) - 5} more" if len(blank) > 5 else "")
        raise DataFormatError(f"clean set {name}", f"{len(blank)} of {len(samples)} responses are empty or "
                              f"invisible-only ({shown}); clean text calibrates what human text looks like, so "
                              "remove them")
