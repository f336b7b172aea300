"""Which all-MiniLM-L6-v2 layer should BERTScore use? Spearman of BERTScore-F with humans for
layers 1-6 on SummEval (vs. the 11 references), USR Topical-Chat (vs. the original ground
truth) and DailyDialog-Zhao (vs. the dialogue context, a reference-free proxy).

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/bertscore_layers.py
"""

from __future__ import annotations

import os
import sys

import numpy as np

from robusteval import data
from robusteval.metaeval import correlation
from robusteval.metrics.bertscore import BERTScore

CASES = [("summeval", "reference", ("coherence", "consistency", "relevance")),
         ("usr-topicalchat", "reference", ("overall",)),
         ("dailydialog-zhao", "context", ("overall",))]


def main() -> int:
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the data folder", file=sys.stderr)
        return 2
    loaded = {name: data.load(name) for name, _, _ in CASES}
    print("| layer | " + " | ".join(f"{n}/{a}" for n, _, asp in CASES for a in asp) + " | mean |")
    print("|---|" + "---|" * (sum(len(a) for _, _, a in CASES) + 1))
    for layer in range(1, 7):
        cells = []
        for name, against, aspects in CASES:
            m = BERTScore(num_layers=layer, against=against)
            s = m.score(loaded[name])
            for a in aspects:
                cells.append(correlation(s, np.array([x.human[a] for x in loaded[name]]), "spearman"))
        print(f"| {layer} | " + " | ".join(f"{c:.3f}" for c in cells) + f" | {np.mean(cells):.3f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
