"""The analog of Mu & Lim 2022, Table 3: parse and grammar scores of the 16 SummEval systems'
summaries next to the universal attack strings (dot, GA trigger, broken sentences, trigger +
broken sentence), with robusteval's detectors.

Columns, means over the documents:
  parse F1   dependency-triple F1 with the best-matching reference (``parse_triple``), x 100;
  GEC err/tok   grammar errors per word token (``gec``, builtin backend);
  GEC err/sent  share of sentences with an error;
  nonalnum   mean suspicion of ``nonalnum``.

The GA trigger is fitted against BERTScore (MiniLM) on the first 8 documents; every row is
measured on the other 92. With a tagger folder (``robusteval salient train``) as argument the
predicted-bag broken sentence is added.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/detector_table3.py [runs/salient]
"""

from __future__ import annotations

import os
import sys

import numpy as np

from robusteval import attacks, data, detectors, metrics
from robusteval.attacks.victim import CachedVictim
from robusteval.types import Sample

FIT_DOCS = 8


def measure(dets: dict[str, detectors.Detector], samples: list[Sample]) -> dict[str, float]:
    parse = dets["parse_triple"].analyze(samples)
    gec = dets["gec"].analyze(samples)
    return {"parse_f1": 100 * float(np.mean([r.get("triple_f1", 0.0) for r in parse])),
            "gec_tok": float(np.mean([r.get("per_token", 1.0) for r in gec])),
            "gec_sent": float(np.mean([r.get("per_sentence", 1.0) for r in gec])),
            "nonalnum": float(np.mean(dets["nonalnum"].detect(samples)))}


def main() -> int:
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the data folder", file=sys.stderr)
        return 2
    samples = data.load("summeval")
    docs = list(dict.fromkeys(s.meta["doc_id"] for s in samples))
    fit_docs, test_docs = set(docs[:FIT_DOCS]), set(docs[FIT_DOCS:])
    first = {d: next(s for s in samples if s.meta["doc_id"] == d) for d in docs}
    dets = {"parse_triple": detectors.load("parse_triple"), "gec": detectors.load("gec", backend="builtin"),
            "nonalnum": detectors.load("nonalnum")}
    rows: list[tuple[str, dict[str, float], int]] = []
    for sys_id in sorted({s.meta["system_id"] for s in samples}, key=lambda x: int(x.lstrip("M"))):
        group = [s for s in samples if s.meta["system_id"] == sys_id and s.meta["doc_id"] in test_docs]
        rows.append((f"system {sys_id}", measure(dets, group), len(group)))
    victim = CachedVictim(metrics.load("bertscore"))
    fit_on = [first[d] for d in docs if d in fit_docs]
    ga = attacks.load("ga-trigger")
    ga.fit(fit_on, victim)
    tb = attacks.load("trigger-broken")
    tb.fit(fit_on, victim)
    chosen = [("dot trigger", attacks.load("dot-trigger")), (f"GA trigger {ga.trigger!r}", ga),
              ("broken sentence (oracle bag)", attacks.load("broken-sentence")), ("trigger + broken sentence", tb)]
    if len(sys.argv) > 1:
        chosen.append(("broken sentence (predicted bag)",
                       attacks.load("broken-sentence", bag="predicted", classifier=sys.argv[1])))
    test = [first[d] for d in docs if d in test_docs]
    for label, attack in chosen:
        results = [attack.run(s) for s in test]
        adv = [s.with_response(r.adversarial) for s, r in zip(test, results, strict=True)
               if r.applicable and r.adversarial]
        rows.append((label, measure(dets, adv), len(adv)))
    print(f"Means over the {len(test_docs)} SummEval documents not used to fit the GA trigger\n")
    print("| summary | n | parse F1 (x100) | GEC errors / token | GEC sentences with error | nonalnum suspicion |")
    print("|---|---|---|---|---|---|")
    for label, m, n in rows:
        print(f"| {label} | {n} | {m['parse_f1']:.1f} | {m['gec_tok']:.3f} | {m['gec_sent']:.2f} "
              f"| {m['nonalnum']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
