"""Flag rates of the guard's detectors on well-rated human replies in every xDial language.

Well-rated (>= 4 of 5 overall) DailyDialog-Zhao replies, each in English and in its nine xDial
machine translations (response and context translated together), go through every detector
with its *default* threshold (no thresholds file: what a user who calls ``guard(...)`` gets)
and through the README's example guard (``nonalnum``, ``parse_triple``, ``gec``). Each cell is
the share flagged with its 95 % interval (:func:`robusteval.stats.flag_rate`; replies of one
context resample together, since 2026-11-26: earlier tables used Wilson per reply). A human
reply that a guard flags is a false positive; the target of issue 14 is <= 2 % per language.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/guard_languages.py [--limit 200]

``--detectors`` narrows the set (``perplexity`` loads SmolLM2 and is the slow one).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from robusteval import data, detectors
from robusteval.stats import flag_rate, pct
from robusteval.types import Sample

README_GUARD = ("nonalnum", "parse_triple", "gec")
OPTIONS = {"gec": {"backend": "builtin"}}


def replies(good: list[Sample], language: str) -> list[Sample]:
    """The well-rated replies ``good`` in ``language`` ("english" is the original text)."""
    if language == "english":
        return good
    out = []
    for s in good:
        tr = s.meta["translations"][language]
        turns = tuple(t for t in tr["context"].split("\n") if t.strip()) or s.context
        out.append(Sample(id=f"{s.id}/{language}", task="dialogue", response=tr["response"], context=turns,
                          reference=None, meta={"language_name": language,
                                                "conversation": s.conversation_key()}))  # the English dialogue's
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None, help="well-rated replies per language (default: all)")
    ap.add_argument("--detectors", nargs="*", default=None, help="default: every registered detector")
    ap.add_argument("--split", choices=("all", "heldout"), default="all",
                    help="heldout: only the half the shipped default thresholds were not calibrated on")
    args = ap.parse_args(argv)
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the human-judgment data folder", file=sys.stderr)
        return 2
    names = args.detectors or detectors.names()
    dets = {n: detectors.load(n, **OPTIONS.get(n, {})) for n in names}
    everything = data.load("dailydialog-zhao", os.environ["ROBUSTEVAL_DATA"])
    good = [s for s in everything if s.human.get("overall", 0.0) >= 4.0][:args.limit]
    languages = list(everything[0].meta["translations"])
    guard = [n for n in README_GUARD if n in dets]
    head = ["language", "n", *names, "README guard (" + " + ".join(guard) + ")", "all detectors"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for lang in languages:
        samples = replies(good, lang)
        if args.split == "heldout":  # the clean sets split each language by its own ids ("<id>/<language>")
            from robusteval.detectors.clean import in_heldout

            samples = [s for s in samples if in_heldout(s.id)]
        flags = {n: d.flags(samples) for n, d in dets.items()}
        readme = np.any([flags[n] for n in guard], axis=0) if guard else np.zeros(len(samples), bool)
        every = np.any(list(flags.values()), axis=0)
        keys = [s.conversation_key() for s in samples]  # a context's several well-rated replies: one cluster
        cells = [pct(flag_rate(flags[n], keys)) for n in names]
        print(f"| {lang} | {len(samples)} | " + " | ".join(cells) + f" | {pct(flag_rate(readme, keys))} | "
              f"{pct(flag_rate(every, keys))} |", flush=True)
    abstained = {n: d.report()["fallbacks"] for n, d in dets.items() if d.report()["fallbacks"]}
    if abstained:
        print("\nabstentions and fallbacks (counted per sample):", abstained)
    return 0


if __name__ == "__main__":
    sys.exit(main())
