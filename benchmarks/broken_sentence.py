"""Mu & Lim's broken-sentence ROUGE attacker on SummEval: ROUGE-L of the broken strings
(oracle bag from the references, and the bag predicted by the salient-word tagger) next to
the 16 systems, on the 20 documents the tagger was not trained on.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/robusteval salient train --out-dir runs/salient
    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/broken_sentence.py runs/salient
"""

from __future__ import annotations

import os
import sys

import numpy as np

from robusteval import attacks, data, metrics

TRAIN_DOCS = 80


def main() -> int:
    if not os.environ.get("ROBUSTEVAL_DATA") or len(sys.argv) < 2:
        print("usage: ROBUSTEVAL_DATA=... benchmarks/broken_sentence.py <tagger folder>", file=sys.stderr)
        return 2
    samples = data.load("summeval")
    docs = list(dict.fromkeys(s.meta["doc_id"] for s in samples))
    held_out = set(docs[TRAIN_DOCS:])
    test = [s for s in samples if s.meta["doc_id"] in held_out]
    rouge = metrics.load("rougeL")
    systems = {}
    for sys_id in sorted({s.meta["system_id"] for s in test}):
        group = [s for s in test if s.meta["system_id"] == sys_id]
        systems[sys_id] = float(np.mean(rouge.score(group)))
    one_per_doc = [next(s for s in test if s.meta["doc_id"] == d) for d in sorted(held_out)]
    rows = []
    for label, attack in (("broken (oracle bag)", attacks.load("broken-sentence")),
                          ("broken (predicted bag)", attacks.load("broken-sentence", bag="predicted",
                                                                  classifier=sys.argv[1]))):
        advs = [attack.run(s) for s in one_per_doc]
        ok = [(s, r.adversarial) for s, r in zip(one_per_doc, advs, strict=True) if r.applicable]
        score = float(np.mean(rouge.score([s.with_response(a) for s, a in ok])))
        rows.append((label, score, len(ok)))
    print(f"ROUGE-L F (best over references) on the {len(held_out)} held-out SummEval documents\n")
    print("| summary | mean ROUGE-L | n |\n|---|---|---|")
    for sys_id, v in sorted(systems.items(), key=lambda kv: -kv[1]):
        print(f"| system {sys_id} | {v:.2f} | {len(held_out)} |")
    for label, v, n in rows:
        print(f"| {label} | {v:.2f} | {n} |")
    for label, v, _ in rows:
        print(f"\n{label} outscores {sum(v > x for x in systems.values())}/16 systems")
    return 0


if __name__ == "__main__":
    sys.exit(main())
