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
from robusteval.detectors.clean import in_heldout, load_clean

from robusteval import data, detectors
from robusteval.stats import flag_rate, pct
from robusteval.types import Sample

README_GUARD = ("nonalnum", "parse_triple", "gec")
OPTIONS = {"gec": {"backend": "builtin"}}


def replies(language: str, data_dir: str) -> list[Sample]:
    """The well-rated replies in ``language`` ("english" is the original text): the clean sets
    ``dailydialog-good`` and ``dailydialog-good:<language>``, in the same order."""
    return load_clean("dailydialog-good" if language == "english" else f"dailydialog-good:{language}", "all", data_dir)


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
    root = os.environ["ROBUSTEVAL_DATA"]
    languages = list(data.load("dailydialog-zhao", root)[0].meta["translations"])
    guard = [n for n in README_GUARD if n in dets]
    head = ["language", "n", *names, "README guard (" + " + ".join(guard) + ")", "all detectors"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for lang in languages:
        samples = replies(lang, root)[:args.limit]
        if args.split == "heldout":  # the clean sets split by conversation (a translation by its English one)
            samples = [s for s in samples if in_heldout(s)]
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
