"""``report.html``: one self-contained page (inline CSS and SVG, no scripts, no network)."""

from __future__ import annotations

import html
import json
import re
from typing import Any

from robusteval.compare import plots
from robusteval.compare.report_md import (
    ADAPTIVE,
    CERTIFIED,
    FLAGGED,
    FLIPS,
    GATE,
    HEADLINE,
    LABEL,
    TRANSFER,
    ablation_rows,
    adaptive_rows,
    asr_rows,
    available,
    certified_rows,
    correlation_rows,
    flagged_rows,
    flip_rows,
    fpr_rows,
    gate_rows,
    headline_rows,
    pct,
    transfer_rows,
)

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
main{max-width:1100px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:1.7rem;margin:.2em 0}h2{margin-top:2.2em;border-bottom:2px solid #dfe3ea;padding-bottom:.2em}
h3{margin-top:1.6em;font-size:1.05rem}
.lede{color:#4a5568;max-width:75ch}
table{border-collapse:collapse;margin:.6em 0 1.2em;background:#fff;font-size:.86rem;box-shadow:0 1px 2px #0001}
th,td{padding:5px 10px;border-bottom:1px solid #e6e9ef}
th{background:#eef1f6;text-align:center}td.num{text-align:right;font-variant-numeric:tabular-nums}td.txt{text-align:left}
figure.plot{background:#fff;margin:.8em 0;padding:10px;box-shadow:0 1px 2px #0001;overflow-x:auto}
figure.plot svg{max-width:100%;height:auto}figcaption{font-size:.8rem;color:#4a5568;margin-top:4px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(330px,1fr));gap:12px}
pre{background:#fff;padding:10px;overflow-x:auto;font-size:.78rem;box-shadow:0 1px 2px #0001}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:1em 0}
.card{background:#fff;padding:10px 14px;box-shadow:0 1px 2px #0001;min-width:180px}
.card b{display:block;font-size:1.5rem}
"""


def esc(x: Any) -> str:
    return html.escape(str(x))


NUMERIC = re.compile(r"^[-–0-9.,/ ()\[\]%e+]+$")


def table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """An HTML table; numeric cells are right-aligned, text cells left-aligned."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f'<td class="{"num" if NUMERIC.match(str(c)) else "txt"}">{esc(c)}</td>'
                                    for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def figure(kind: str, svg: str, caption: str) -> str:
    return f'<figure class="plot" data-plot="{kind}">{svg}<figcaption>{esc(caption)}</figcaption></figure>'


def cards(report: dict[str, Any]) -> str:
    """Worst plain ASR and best defended ASR, at a glance."""
    items = []
    for sname, suite in report["suites"].items():
        for vname, victim in suite["victims"].items():
            defended = [v for v in available(victim)
                        if v != "plain" and victim["variants"][v]["overall"]["asr"] is not None]
            if not defended:  # nothing attacked under any defense (e.g. every original floored)
                continue
            best = min(defended, key=lambda v: victim["variants"][v]["overall"]["asr"])
            before = pct(victim["variants"]["plain"]["overall"]["asr"])
            after = pct(victim["variants"][best]["overall"]["asr"])
            items.append(f'<div class="card">{esc(sname)} · {esc(vname)}<b>{before}% → {after}%</b>'
                         f"ASR plain → best defense ({esc(LABEL[best])})</div>")
    return '<div class="cards">' + "".join(items) + "</div>"


def render(report: dict[str, Any]) -> str:
    parts = [f"<h1>robusteval: {esc(report['name'])}</h1>",
             '<p class="lede">How gameable is each metric, and how much do input guards and adversarial training '
             "help — at what cost in agreement with human judgments? ASR counts an R- attack (text made worse) as "
             "successful when the victim still scores it at least as high as the reference, and an R+ attack "
             "(quality kept) when the score moves by more than one point.</p>", cards(report),
             "<h2>Headline</h2>", table(HEADLINE, headline_rows(report), "headline")]
    for sname, suite in report["suites"].items():
        parts.append(f"<h2>Suite {esc(sname)}: {esc(suite['dataset'])} "
                     f"({suite['n_attacked']} attacked test contexts)</h2>")
        for vname, victim in suite["victims"].items():
            parts.append(f"<h3>{esc(vname)} <small>({esc(victim['metric'])})</small></h3>")
            parts.append(figure("asr", plots.asr_bars(victim, f"{vname}: ASR per attack family"),
                                "Attack success rate per family and direction, before and after each defense."))
            head, rows = asr_rows(victim)
            parts.append(table(head, rows, "asr"))
            ta = adaptive_rows(victim)
            if ta:
                parts.append("<h4>Adaptive vs transfer attacks on the defenses</h4>")
                parts.append(table(ADAPTIVE, ta, "adaptive"))
            cert = certified_rows(victim)
            if cert:
                parts.append("<h4>Certified smoothed scores (probability ≥ 1 − alpha)</h4>")
                parts.append(table(CERTIFIED, cert, "certified"))
            parts.append(figure("distributions", plots.score_distributions(victim, f"{vname}: clean vs adversarial"),
                                "Victim scores of the clean originals and of their R- adversarial versions."))
            parts.append(figure("correlation", plots.correlation_bars(victim, f"{vname}: Spearman with humans"),
                                "Turn-level Spearman correlation with human judgments (95% bootstrap CI)."))
            head, rows = correlation_rows(victim)
            parts.append(table(head, rows, "correlation"))
            fl = flagged_rows(victim)
            if fl:
                parts.append("<h4>Rated responses the guard flagged (ratings normalized to 0-1)</h4>")
                parts.append(table(FLAGGED, fl, "flagged"))
            gen = victim.get("generalization")
            if gen:
                parts.append(figure("generalization", plots.generalization_heatmap(gen, f"{vname}: train on X, "
                                                                                     "attack with Y"),
                                    "ASR of models adversarially trained on one family (rows) per attack family."))
            ab = victim.get("ablation")
            if ab:
                parts.append("<h4>Ablation: the hardened model with one part switched off</h4>")
                parts.append(table(*ablation_rows(ab), "ablation"))
            gate = gate_rows(victim.get("training") or {})
            if gate:
                parts.append("<h4>Adversarial rounds and the validation gate (round 0 = the base)</h4>")
                parts.append(table(GATE, gate, "gate"))
        fr = flip_rows(suite)
        if fr:
            parts.append("<h3>Judges: verdict flips (pairwise judges)</h3>")
            parts.append(table(FLIPS, fr, "flips"))
        tr = transfer_rows(suite)
        if tr:
            parts.append("<h3>Judges: universal-phrase transfer (Raina et al. 2024)</h3>")
            parts.append(table(TRANSFER, tr, "transfer"))
    g = report["guard"]
    parts.append("<h2>Guard</h2>")
    parts.append(f"<p>Detectors {esc(', '.join(g['detectors']))}; policy <code>{esc(g['policy'])}</code>; "
                 f"thresholds from <code>{esc(g['thresholds_file'])}</code>.</p>")
    head, rows = fpr_rows(g)
    parts.append(table(head, rows, "fpr"))
    parts.append('<div class="grid">' + "".join(
        figure("roc", plots.roc_curves(r, f"detector ROC: {s}"), "Held-out clean text vs R- adversarial text.")
        for s, r in g["roc"].items()) + "</div>")
    prov = report.get("provenance") or {}
    parts.append("<h2>Provenance</h2>")
    parts.append(table(["field", "value"], [["seed", str(report["seed"])], ["git commit", str(prov.get("git_commit"))],
                                            ["created", str(prov.get("created"))],
                                            ["python", str(prov.get("python"))],
                                            ["platform", str(prov.get("platform"))]], "provenance"))
    pk = prov.get("packages") or {}
    parts.append(table(["package", "version"], [[k, str(v)] for k, v in pk.items()], "packages"))
    parts.append("<h4>Config</h4><pre>" + esc(json.dumps(prov.get("config") or {}, indent=2)) + "</pre>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>robusteval: {esc(report['name'])}</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>\n")
