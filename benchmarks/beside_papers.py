"""BENCHMARKS.md "Beside the papers": our measured numbers next to the source papers' tables.

Each table reads the run folders written by the configs named in its heading (run them first,
see BENCHMARKS.md) and prints the papers' numbers (cited per table) beside ours. Nothing here
computes a rate or a correlation itself: ASR and the mean drop come from the runs'
``summary.json`` (:mod:`robusteval.asr`), correlations from ``metaeval.json``
(:mod:`robusteval.metaeval`); the only arithmetic is unit conversion and averaging of
already-computed columns, each said where it happens.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/beside_papers.py runs/beside
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from robusteval.results import read_jsonl
from robusteval.stats import pct

# -- the papers' numbers ---------------------------------------------------------------------
# AdvEval (Chen et al. 2024), R+ ASR (%) of the baselines against the reference-based metrics:
# Table 2 (dialogue) and Table 4 (summarization).
ADVEVAL = {
    "adveval-t2-dailydialog": ("Table 2, DailyDialog", {"sacrebleu": {"SR": 3, "EX": 4, "TF": 29},
                                                        "bertscore-minilm": {"SR": 0, "EX": 0, "TF": 16}}),
    "adveval-t2-personachat": ("Table 2, PersonaChat", {"sacrebleu": {"SR": 2, "EX": 2, "TF": 2},
                                                        "bertscore-minilm": {"SR": 0, "EX": 0, "TF": 1}}),
    "adveval-t4-cnndm": ("Table 4, CNN/DailyMail", {"sacrebleu": {"SR": 11, "TF": 6}, "rougeL": {"SR": 0, "TF": 20},
                                                    "bertscore-minilm": {"SR": 3, "TF": 1}}),
    "adveval-t4-xsum": ("Table 4, XSum", {"sacrebleu": {"SR": 7, "TF": 20}, "rougeL": {"SR": 0, "TF": 4},
                                          "bertscore-minilm": {"SR": 0, "TF": 4}}),
}
ADVEVAL_ATTACKS = {"SR": "adveval-synonym", "EX": "adveval-extension", "TF": "textfooler-pos"}
PAPER_VICTIM = {"sacrebleu": "SacreBLEU", "rougeL": "ROUGE", "bertscore-minilm": "BERTScore"}

# Hu et al. 2024, Table 21: mean score drop on a 1-5 scale (BLEU, chrF++, ROUGE, BERTScore).
HU_T21 = {
    "repetition": (1.05, 0.20, 0.39, 0.08), "passive-voice": (1.68, 0.25, 1.02, 0.13),
    "inversion": (1.51, 0.17, 0.98, 0.16), "improper-connective": (0.71, 0.13, 0.13, 0.06),
    "sentence-exchange": (0.16, 0.01, 1.46, 0.11), "incorrect-verb-form": (1.11, 0.14, 0.49, 0.10),
    "word-exchange": (1.35, 0.12, 0.46, 0.16), "spelling-mistake": (1.53, 0.13, 0.73, 0.26),
    "uncommon-phrase": (1.52, 0.43, 0.73, 0.12), "complex-sentence": (2.03, 0.30, 0.85, 0.16),
    "abbreviation": (2.64, 1.21, 1.43, 0.20), "hypernym": (1.44, 0.59, 0.78, 0.15),
    "sentence-deletion": (1.28, 0.94, 0.66, 0.11), "complement": (2.03, 0.59, 1.06, 0.20),
    "continuation": (1.27, 0.40, 0.77, 0.12), "different-entity": (1.11, 0.42, 0.54, 0.09),
    "conflicting-fact": (1.83, 0.50, 1.04, 0.19), "negation": (0.37, 0.07, 0.14, 0.04),
}
HU_VICTIMS = ("bleu", "chrF++", "rougeL", "bertscore")  # victim labels in hu_table21_summeval.yaml

# Vasselli & Watanabe, Table 1, Overall column: (Spearman rho, Kendall tau).
VASSELLI_T1 = {"DialogRPT": (-0.024, 0.016), "UniEval": (0.285, 0.198), "UniEval-altered": (0.491, 0.347),
               "GPT-3.5": (0.637, 0.484), "GPT-4": (0.703, 0.548)}

# Liu et al., Table 6: per aspect (Pearson gamma, Spearman rho); aspects in the paper's order
# Naturalness, Coherence, Engagingness, Groundedness, then their Average.
LIU_T6 = {
    "usr-topicalchat": {
        "BLEU-1": [(0.163, 0.133), (0.203, 0.209), (0.308, 0.321), (0.282, 0.291), (0.239, 0.238)],
        "BLEU-2": [(0.206, 0.217), (0.210, 0.272), (0.310, 0.378), (0.278, 0.346), (0.251, 0.303)],
        "BLEU-3": [(0.184, 0.194), (0.148, 0.216), (0.244, 0.325), (0.215, 0.284), (0.198, 0.254)],
        "BLEU-4": [(0.169, 0.189), (0.120, 0.167), (0.206, 0.297), (0.187, 0.272), (0.170, 0.231)],
        "ROUGE-1": [(0.160, 0.133), (0.188, 0.190), (0.280, 0.287), (0.243, 0.241), (0.218, 0.213)],
        "ROUGE-2": [(0.192, 0.213), (0.183, 0.271), (0.266, 0.357), (0.230, 0.281), (0.218, 0.281)],
        "ROUGE-L": [(0.170, 0.141), (0.170, 0.175), (0.266, 0.265), (0.276, 0.277), (0.221, 0.215)],
        "METEOR": [(0.227, 0.214), (0.268, 0.284), (0.407, 0.429), (0.356, 0.356), (0.315, 0.321)],
        "chrF++": [(0.190, 0.183), (0.278, 0.322), (0.421, 0.471), (0.368, 0.389), (0.314, 0.341)],
        "BERTScore": [(0.135, 0.130), (0.077, 0.070), (0.170, 0.170), (0.128, 0.121), (0.128, 0.122)],
        "UniEval": [(0.444, 0.323), (0.595, 0.613), (0.557, 0.605), (0.536, 0.575), (0.533, 0.577)],
    },
    "usr-personachat": {
        "BLEU-1": [(0.015, 0.014), (0.067, 0.069), (-0.098, -0.079), (0.079, 0.085), (0.016, 0.022)],
        "BLEU-2": [(0.069, 0.061), (0.076, 0.036), (-0.113, -0.041), (0.090, 0.091), (0.030, 0.037)],
        "BLEU-3": [(0.083, 0.064), (0.125, 0.115), (-0.137, -0.062), (0.091, 0.121), (0.040, 0.059)],
        "BLEU-4": [(0.105, 0.134), (0.142, 0.158), (-0.136, -0.064), (0.070, 0.109), (0.045, 0.084)],
        "ROUGE-1": [(0.011, 0.001), (0.088, 0.075), (-0.146, -0.130), (0.062, 0.059), (0.004, 0.001)],
        "ROUGE-2": [(0.110, 0.111), (0.129, 0.097), (-0.127, -0.049), (0.101, 0.123), (0.054, 0.070)],
        "ROUGE-L": [(-0.006, -0.014), (0.083, 0.057), (-0.203, -0.191), (0.038, 0.022), (-0.022, -0.031)],
        "METEOR": [(0.054, 0.055), (0.191, 0.179), (-0.119, -0.092), (0.137, 0.119), (0.066, 0.065)],
        "chrF++": [(0.171, 0.150), (0.235, 0.225), (0.104, 0.167), (0.271, 0.279), (0.195, 0.205)],
        "BERTScore": [(0.042, 0.054), (0.161, 0.159), (-0.092, -0.086), (0.068, 0.075), (0.045, 0.051)],
    },
}
LIU_ASPECTS = {"usr-topicalchat": ("naturalness", "coherence", "engagingness", "groundedness"),
               "usr-personachat": ("natural", "maintains_context", "engaging", "uses_knowledge")}

# Mu & Lim 2022, Table 2 (CNN/DM test, single reference), R-L, A.M., G.M., METEOR, BERTScore.
MU_LIM_T2 = {
    "Pointer-generator (coverage)": (39.53, 17.28, 36.38, 31.06, 29.18, 33.1, 86.44),
    "Bottom-Up": (41.22, 18.68, 38.34, 32.75, 30.91, 34.2, 87.71),
    "PNBERT": (42.69, 19.60, 38.85, 33.71, 31.91, 41.2, 87.73),
    "T5": (43.52, 21.55, 40.69, 35.25, 33.67, 38.6, 88.66),
    "BART": (44.16, 21.28, 40.90, 35.45, 33.75, 40.5, 88.62),
    "SimCLS": (46.67, 22.15, 43.54, 37.45, 35.57, 40.5, 88.85),
    "Scrambled code + broken": (46.71, 20.39, 43.56, 36.89, 34.62, 39.6, 87.80),
    "Scrambled code + broken (alter, C = 2)": (48.18, 19.84, 45.35, 37.79, 35.13, 40.6, 87.80),
}
# Mu & Lim Table 1 (one CNN/DM example), R-L, METEOR, BERTScore.
MU_LIM_T1 = {"good summary": (55.45, 18.18, 41.58, 40.03, 85.56), "broken": (56.84, 21.51, 44.21, 47.26, 85.95),
             "a dot": (0, 0, 0, 0, 88.47), "scrambled code": (0, 0, 0, 0, 87.00),
             "scrambled code + broken": (56.84, 21.51, 44.21, 47.26, 87.00)}
MU_LIM_VICTIMS = ("ROUGE-1", "ROUGE-2", "ROUGE-L", "METEOR", "BERTScore (MiniLM)")
MU_LIM_ATTACKS = {"dot-trigger": "a dot", "ga-trigger": "scrambled code", "broken-sentence": "broken",
                  "trigger-broken": "scrambled code + broken", "broken-sentence-c2": "broken (C = 2)"}


# -- reading runs ----------------------------------------------------------------------------
def _summary(folder: Path) -> dict[str, Any] | None:
    p = folder / "summary.json"
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None


def _metaeval(folder: Path) -> dict[str, Any] | None:
    """A ``robusteval metaeval`` run's ``metaeval.json`` (None when it has not run)."""
    p = folder / "metaeval.json"
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None


def _rows(folder: Path) -> list[dict[str, Any]]:
    """An attack run's result rows (``read_jsonl`` leaves the fingerprint header out)."""
    p = folder / "results.jsonl"
    return read_jsonl(p) if p.is_file() else []


def _missing(what: str, config: str) -> str:
    return (f"_{what}: not run yet -- `robusteval {'metaeval' if 'metaeval' in config else 'attack'} "
            f"--config {config} --out-dir runs/beside/...`_\n")


def _slug(label: str) -> str:
    from robusteval.cli.common import slug

    return slug(label)


def _r(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


# -- tables ----------------------------------------------------------------------------------
def adveval(root: Path) -> str:
    out = ["### AdvEval (Chen et al. 2024), Tables 2 and 4: R+ baselines against reference-based metrics", "",
           "R+ ASR in %. *Paper*: their Table 2 / 4 cell (100 samples, PaLM-2 / GPT-4 gold). *Eq. 3*: ours "
           "under the paper's criterion with SmolLM2-135M as the gold (8 sampled ratings averaged, "
           "tau1 = 70, tau2 = 40). *Invariance*: robusteval's own R+ criterion (the score moved by more "
           "than 1 point). n = texts attacked of the selected samples (a rule that finds nothing to change "
           "is skipped), with the victim's mean score of the attacked texts (100 before: each text is its "
           "own reference). 95 % intervals.", ""]
    for run, (title, paper) in ADVEVAL.items():
        first = next(iter(paper))
        if _summary(root / run / first) is None:
            config = run.replace("-t2-", "_table2_").replace("-t4-", "_table4_")
            out.append(_missing(title, f"configs/attacks/{config}.yaml"))
            continue
        cols = list(next(iter(paper.values())))
        out += [f"**{title}** (`{run}`)", "",
                "| victim | " + " | ".join(f"{c} paper | {c} Eq. 3 (ours) | {c} invariance (ours) | {c} n (score after)"
                                         for c in cols) + " |",
                "|---|" + "---|---|---|---|" * len(cols)]
        golds: list[float] = []
        for victim, cells in paper.items():
            s = _summary(root / run / victim)
            if s is None:
                continue
            parts = []
            for c in cols:
                entry = s["attacks"].get(ADVEVAL_ATTACKS[c])
                if entry is None:
                    parts.append(f"{cells[c]} | not run | not run | 0")
                    continue
                crit = entry["criteria"]
                after = "" if entry.get("mean_after") is None else f" ({entry['mean_after']:.1f})"
                parts.append(f"{cells[c]} | {pct(crit['gold'], 0)} | {pct(crit['invariance'], 0)} | "
                             f"{entry['attacked']}/{entry['n']}{after}")
            out.append(f"| {PAPER_VICTIM[victim]} | " + " | ".join(parts) + " |")
            golds = golds or [r["gold_before"] for r in {r["sample_id"]: r for r in _rows(root / run / victim)
                                                         if r.get("gold_before") is not None}.values()]
        if golds:
            over = sum(g > 70 for g in golds)
            out += ["", f"The gold's rating of the clean originals: mean {np.mean(golds):.1f} / 100, "
                        f"{over} of {len(golds)} above tau1 = 70 (Eq. 3 credits an R+ text only when the gold "
                        "rates that text above 70)."]
        out.append("")
    return "\n".join(out)


def hu(root: Path, run: str = "hu-t21") -> str:
    head = ["### Hu et al. 2024, Table 21: how far each perturbation moves the non-LLM metrics", "",
            "Mean drop of the score, perturbed vs original, on the paper's 1-5 scale (ours: the paired "
            "mean drop on 0-100 from `summary.json`, divided by 25, with its 95 % bootstrap interval "
            "over documents). Texts: SummEval's CNN/DM highlights (theirs: GPT-4-improved references), "
            "each scored against itself unperturbed. `-rule` rows are robusteval's offline variants of "
            "perturbations the paper made with GPT-4.", ""]
    sums = {v: _summary(root / run / _slug(v)) for v in HU_VICTIMS}
    if any(s is None for s in sums.values()):
        return "\n".join(head) + "\n" + _missing("Hu Table 21", "configs/attacks/hu_table21_summeval.yaml")
    lines = ["| perturbation | n | BLEU paper | BLEU ours | chrF++ paper | chrF++ ours | ROUGE-L paper | "
             "ROUGE-L ours | "
             "BERTScore paper | BERTScore ours |", "|---|---|---|---|---|---|---|---|---|---|"]
    attacks = sorted({a for s in sums.values() if s for a in s["attacks"]})
    for a in attacks:
        base = a.removeprefix("aspect-").removesuffix("-rule")
        paper = HU_T21.get(base)
        cells, n = [], 0
        for i, v in enumerate(HU_VICTIMS):
            entry = sums[v]["attacks"].get(a) if sums[v] else None  # type: ignore[index]
            d = (entry or {}).get("mean_drop") or {}
            n = max(n, d.get("n") or 0)
            ours = "n/a" if d.get("mean") is None else (
                f"{d['mean'] / 25:.2f}" + (f" [{d['ci'][0] / 25:.2f}, {d['ci'][1] / 25:.2f}]" if d.get("ci") else ""))
            cells.append(f"{paper[i] if paper else 'n/a'} | {ours}")
        lines.append(f"| {a.removeprefix('aspect-')} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(head + lines) + "\n"


def vasselli(root: Path, run: str = "vasselli-t1") -> str:
    head = ["### Vasselli & Watanabe, Table 1: turn-level correlation with the Overall rating (DailyDialog)", "",
            "Spearman rho and Kendall tau with 95 % context-bootstrap intervals (ours) beside the paper's "
            "Overall column. Ours is on DailyDialog-Zhao (xDial-Eval's csv: the overall rating only); "
            "theirs on a subset they annotated for four aspects.", ""]
    found = _metaeval(root / run)
    if found is None:
        return "\n".join(head) + "\n" + _missing("Vasselli Table 1", "configs/metaeval/vasselli_table1.yaml")
    res = found["results"]["dailydialog-zhao"]
    reports = found.get("metric_reports", {})
    lines = ["| metric | source | n | rho | tau | unparseable answers (midpoint fallback) |",
             "|---|---|---|---|---|---|"]
    for name, (rho, tau) in VASSELLI_T1.items():
        lines.append(f"| {name} | paper | (subset) | {rho:.3f} | {tau:.3f} | |")
    for label, entry in res.items():
        e = entry.get("overall") or {}
        if "spearman" not in e:
            lines.append(f"| {label} | ours | - | {e.get('skipped', 'n/a')} | | |")
            continue
        sp, kt = e["spearman"], e["kendall"]
        report = reports.get(label) or {}
        # an LLM judge reports its fallbacks (none: 0); other metrics have no answers to parse
        fallback = report.get("fallbacks", {}).get("unparseable", 0 if "llm" in report else None)
        fell = "" if fallback is None else f"{fallback} of {e['n']}"
        lines.append(f"| {label} | ours | {e['n']} | {_r(sp['r'])} [{_r(sp['ci95'][0])}, {_r(sp['ci95'][1])}] | "
                     f"{_r(kt['r'])} [{_r(kt['ci95'][0])}, {_r(kt['ci95'][1])}] | {fell} |")
    return "\n".join(head + lines) + "\n"


def liu(root: Path, run: str = "liu-t6") -> str:
    head = ["### Liu et al., Table 6: turn-level Pearson / Spearman per aspect on USR Topical-Chat and "
            "Persona-Chat", "",
            "Each cell: ours (paper), Pearson gamma / Spearman rho. Ours: the metaeval run (context-bootstrap "
            "intervals in its `metaeval.md`); *Average* is the mean of the four aspects' coefficients, as in the "
            "paper. The UniEval row is the official UniEval predictions shipped with UniEval's reproduce data, "
            "correlated by robusteval (no UniEval checkpoint runs offline).", ""]
    found = _metaeval(root / run)
    if found is None:
        return "\n".join(head) + "\n" + _missing("Liu Table 6", "configs/metaeval/liu_table6.yaml")
    res = found["results"]
    lines = list(head)
    for ds, paper in LIU_T6.items():
        aspects = LIU_ASPECTS[ds]
        lines += [f"**{ds}**", "", "| metric | " + " | ".join(aspects) + " | Average |",
                  "|---|" + "---|" * (len(aspects) + 1)]
        ours = dict(res.get(ds, {}))
        if ds == "usr-topicalchat" and (root / run / "unieval_official.json").is_file():
            ours["UniEval"] = json.loads((root / run / "unieval_official.json").read_text(encoding="utf-8"))
        for metric, cells in paper.items():
            label = next((k for k in ours if k.split(" (")[0] == metric), None)
            got = ours.get(label, {}) if label else {}
            row, gammas, rhos = [], [], []
            for a, (pg, pr) in zip(aspects, cells, strict=False):
                e = got.get(a) or {}
                g, r = (e.get("pearson") or {}).get("r"), (e.get("spearman") or {}).get("r")
                if g is not None and r is not None:
                    gammas.append(g)
                    rhos.append(r)
                row.append(f"{_r(g)} / {_r(r)} ({pg:.3f} / {pr:.3f})")
            pg, pr = cells[-1]
            avg = f"{np.mean(gammas):.3f} / {np.mean(rhos):.3f}" if len(gammas) == len(aspects) else "n/a"
            row.append(f"{avg} ({pg:.3f} / {pr:.3f})")
            lines.append(f"| {metric} | " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def unieval_official(data_dir: str, out: Path) -> None:
    """Correlate the official UniEval predictions (UniEval's reproduce data, a real file) with
    the human ratings through :func:`robusteval.metaeval.metaevaluate` -- the UniEval row of
    Liu et al. Table 6."""
    from robusteval import data
    from robusteval.metaeval import metaevaluate

    samples = data.load("usr-topicalchat-unieval", data_dir)
    res = {}
    for aspect in LIU_ASPECTS["usr-topicalchat"]:
        scores = np.array([float(s.meta["unieval_predict"][aspect]) for s in samples])
        res[aspect] = metaevaluate(samples, scores, [aspect], n_boot=1000, seed=0)[aspect]
    out.write_text(json.dumps(res, indent=1), encoding="utf-8")


def mu_lim(root: Path, run: str = "mu-lim-t2") -> str:
    head = ["### Mu & Lim 2022, Tables 1-3: universal evasion on CNN/DM, system level", ""]
    sums = {v: _summary(root / run / _slug(v)) for v in MU_LIM_VICTIMS}
    if any(s is None for s in sums.values()):
        return "\n".join(head) + "\n" + _missing("Mu & Lim Tables 1-2", "configs/attacks/mu_lim_table2.yaml")
    out = list(head)
    # Table 2: system means on the documents each attack changed (robusteval.asr.system_level)
    base = {v: s["attacks"]["broken-sentence"]["system_level"] for v, s in sums.items()}  # type: ignore[index]
    systems = sorted(next(iter(base.values()))["systems"])

    def row(vals: list[float]) -> str:
        r1, r2, rl, met, bs = vals
        am, gm = (r1 + r2 + rl) / 3, (r1 * r2 * rl) ** (1 / 3) if min(r1, r2, rl) > 0 else 0.0
        return f"{r1:.2f} | {r2:.2f} | {rl:.2f} | {am:.2f} | {gm:.2f} | {met:.2f} | {bs:.2f}"

    out += ["**Table 2 (ours)**: SummEval's 16 systems and the attack systems on SummEval's CNN/DM documents, "
            "against the single highlight. A.M. / G.M.: arithmetic / geometric mean of the three ROUGE "
            "columns. System means are on the documents the broken sentence was built for; an attack's rank "
            "(1 = best) is among the 16 systems on its own documents (the GA-based rows leave out the 8 "
            "fitting documents).", "",
            "| system | docs | ROUGE-1 | ROUGE-2 | ROUGE-L | A.M. | G.M. | METEOR | BERTScore | "
            "rank R-1 / R-L / METEOR / BERTScore |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    n_docs = next(iter(base.values()))["n_docs"]
    ranked = sorted(systems, key=lambda s: -base["ROUGE-L"]["systems"][s])
    for name in ranked:
        out.append(f"| system {name} | {n_docs} | " + row([base[v]["systems"][name] for v in MU_LIM_VICTIMS]) + " | |")
    for attack, label in MU_LIM_ATTACKS.items():
        lv = {v: s["attacks"].get(attack, {}).get("system_level") for v, s in sums.items()}  # type: ignore[union-attr]
        if any(x is None or not x.get("n_docs") for x in lv.values()):
            continue
        ranks = " / ".join(f"{lv[v]['rank']} of {lv[v]['of']}"  # type: ignore[index]
                           for v in ("ROUGE-1", "ROUGE-L", "METEOR", "BERTScore (MiniLM)"))
        out.append(f"| **{label}** | {lv['ROUGE-1']['n_docs']} | "  # type: ignore[index]
                   + row([lv[v]["attack_mean"] for v in MU_LIM_VICTIMS]) + f" | {ranks} |")  # type: ignore[index]
    out += ["", "**Table 2 (paper)**: CNN/DM test set, BERTScore with roberta-large.", "",
            "| system | ROUGE-1 | ROUGE-2 | ROUGE-L | A.M. | G.M. | METEOR | BERTScore |",
            "|---|---|---|---|---|---|---|---|"]
    out += [f"| {k} | " + " | ".join(f"{x:.2f}" for x in v) + " |" for k, v in MU_LIM_T2.items()]
    # Table 1: one document, every attack string's scores
    rows = {v: _rows(root / run / _slug(v)) for v in MU_LIM_VICTIMS}
    fitted = {r["sample_id"] for r in rows["ROUGE-1"] if (r.get("meta") or {}).get("fitting_sample")}
    doc = next((r["sample_id"] for r in rows["ROUGE-1"] if r["sample_id"] not in fitted), None)
    if doc is not None:
        out += ["", f"**Table 1 (ours)**: one document (`{doc}`, the first not used to fit the trigger); "
                    "paper's values for its example in parentheses (R-1, R-2, R-L, METEOR, BERTScore).", "",
                "| text | ROUGE-1 | ROUGE-2 | ROUGE-L | METEOR | BERTScore | paper | excerpt |",
                "|---|---|---|---|---|---|---|---|"]
        by = {v: {r["attack"]: r for r in rs if r["sample_id"] == doc} for v, rs in rows.items()}
        first = next(iter(by["ROUGE-1"].values()))
        good = [by[v][first["attack"]]["victim_before"] for v in MU_LIM_VICTIMS]
        out.append("| best-rated system summary | " + " | ".join(f"{x:.2f}" for x in good)
                   + f" | {MU_LIM_T1['good summary']} | {first['original'][:60]!r} |")
        for attack, label in MU_LIM_ATTACKS.items():
            if attack not in by["ROUGE-1"] or by["ROUGE-1"][attack].get("victim_after") is None:
                continue
            vals = [by[v][attack]["victim_after"] for v in MU_LIM_VICTIMS]
            text = by["ROUGE-1"][attack]["adversarial"] or ""
            out.append(f"| {label} | " + " | ".join(f"{x:.2f}" for x in vals)
                       + f" | {MU_LIM_T1.get(label, '-')} | {text[:60]!r} |")
    return "\n".join(out) + "\n"


def main() -> int:
    import os

    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(sys.argv[1])
    if os.environ.get("ROBUSTEVAL_DATA") and (root / "liu-t6").is_dir():
        unieval_official(os.environ["ROBUSTEVAL_DATA"], root / "liu-t6" / "unieval_official.json")
    print("\n".join([adveval(root), hu(root), vasselli(root), liu(root), mu_lim(root)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
