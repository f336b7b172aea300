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
    LABEL,
    TRANSFER,
    ablation_rows,
    adaptive_rows,
    attacked_label,
    certified_rows,
    correlation_rows,
    detector_warnings,
    failure_warnings,
    family_sections,
    flagged_rows,
    flip_rows,
    fpr_rows,
    gate_rows,
    intro,
    rate_cell,
    rho_cell,
    rule,
    transfer_rows,
)
from robusteval.compare.story import BASELINE, DEFAULT_TOLERANCE, RECOMMENDED, Tolerance, VictimStory, rate_of, stories

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
.card{background:#fff;padding:10px 16px 4px;box-shadow:0 1px 3px #0002;border-left:5px solid #9aa5b8;flex:1 1 100%}
.card.ok{border-left-color:#2f855a}.card.none{border-left-color:#c05621}
.card h3{margin:.3em 0}.card .verdict{margin:.2em 0 .6em;font-weight:600}
.card table{margin:.3em 0 .8em;box-shadow:none;width:100%}.card td.txt{max-width:38ch}
th.grp{background:#e2e7f0;font-weight:600}
.badge{display:inline-block;padding:0 6px;border-radius:3px;font-size:.78rem;font-weight:600;color:#fff}
.badge.baseline{background:#718096}.badge.recommended{background:#2f855a}.badge.trade-off{background:#c05621}
.badge.no-gain,.badge.not-measured{background:#a0aec0}.badge.unclear-gain{background:#b7791f}
.callout{background:#fffaf0;border-left:5px solid #dd6b20;padding:8px 14px;margin:1em 0}
.rule{font-size:.85rem;color:#4a5568;max-width:95ch}
details{background:#fff;padding:6px 12px;margin:1em 0;box-shadow:0 1px 2px #0001}summary{cursor:pointer;font-weight:600}
"""


def esc(x: Any) -> str:
    return html.escape(str(x))


# a number, an interval or a fraction, with an optional note in parentheses after it ("1.000 (n 41)",
# "3/5 (2 without a verdict)")
NUMERIC = re.compile(r"^[-–0-9.,/ ()\[\]%e+]+(?: \([^()]*\))*$")


def table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """An HTML table; numeric cells are right-aligned, text cells left-aligned."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f'<td class="{"num" if NUMERIC.match(str(c)) else "txt"}">{esc(c)}</td>'
                                    for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def figure(kind: str, svg: str, caption: str) -> str:
    return f'<figure class="plot" data-plot="{kind}">{svg}<figcaption>{esc(caption)}</figcaption></figure>'


def badge(verdict: str) -> str:
    return f'<span class="badge {verdict.replace(" ", "-")}">{esc(verdict)}</span>'


def num_cell(text: str, cls: str, entry: dict[str, Any] | None) -> str:
    """A card cell carrying its rate's numerator and denominator as data attributes (what the
    tests check against report.json)."""
    k = None if not entry else entry.get("successes", entry.get("flagged"))
    n = None if not entry else entry.get("n")
    attrs = f' data-k="{k}" data-n="{n}"' if entry and n else ""
    return f'<td class="num {cls}"{attrs}>{esc(text)}</td>'


CARD_HEAD = ('<thead><tr><th rowspan="2">variant</th><th class="grp">Robustness: R- attacks (text made worse)</th>'
             '<th class="grp">Invariance: R+ attacks (meaning kept)</th><th class="grp" colspan="2">Validity cost</th>'
             '<th rowspan="2">verdict</th></tr><tr><th>ASR % [95% CI] (fooled/attacked)</th>'
             "<th>R+ invariance failures % [95% CI] (failed/attacked)</th>"
             "<th>mean Spearman (change vs plain [95% CI])</th>"
             "<th>rated text flagged % [95% CI] (flagged/rated)</th></tr></thead>")


def card(vs: VictimStory) -> str:
    """One victim: each variant's R- ASR, R+ invariance failures and validity cost side by side,
    its verdict, and the victim's headline (a recommended defense only within the tolerance)."""
    rows = []
    for s in vs.variants:
        rows.append(f'<tr data-variant="{esc(s.variant)}"><td class="txt">{esc(LABEL[s.variant])}</td>'
                    + num_cell(rate_cell(s.r_minus), "r-minus", s.r_minus)
                    + num_cell(rate_cell(s.r_plus), "r-plus", s.r_plus)
                    + f'<td class="num rho">{esc(rho_cell(s))}</td>'
                    + num_cell(rate_cell(s.flagged), "flagged", s.flagged)
                    + f'<td class="txt verdict" data-verdict="{esc(s.verdict)}">{badge(s.verdict)} '
                    f"{esc('' if s.verdict == BASELINE else s.summary)}</td></tr>")
    cls = "ok" if vs.recommended else "none"
    return (f'<section class="card {cls}" data-suite="{esc(vs.suite)}" data-victim="{esc(vs.victim)}" '
            f'data-recommended="{esc(vs.recommended or "")}"><h3>{esc(vs.suite)} · {esc(vs.victim)} '
            f"<small>({esc(vs.metric)})</small></h3><p class=\"verdict\">{esc(vs.headline)}</p>"
            f'<table class="card-table">{CARD_HEAD}<tbody>{"".join(rows)}</tbody></table></section>')


def cards(report: dict[str, Any], tol: Tolerance = DEFAULT_TOLERANCE) -> str:
    return '<div class="cards">' + "".join(card(vs) for vs in stories(report, tol)) + "</div>"


def tradeoff_points(victims: list[VictimStory]) -> list[dict[str, Any]]:
    """The robustness-vs-validity plot's points: one per victim and variant, from the stories."""
    pts = []
    for vs in victims:
        for s in vs.variants:
            y, ci = rate_of(s.r_minus), (s.r_minus or {}).get("ci")
            pts.append({"victim": vs.victim, "variant": s.variant, "x": s.spearman, "xci": s.spearman_ci,
                        "y": None if y is None else 100 * y, "yci": [100 * ci[0], 100 * ci[1]] if ci else None,
                        "ok": s.verdict in (BASELINE, RECOMMENDED)})
    return pts


def warnings(report: dict[str, Any]) -> str:
    out = ""
    warn = detector_warnings(report)
    if warn:
        out += ('<div class="callout" data-callout="inverted-detectors"><b>Detectors that rank attacked text below '
                "clean text</b><ul>" + "".join(f"<li>{esc(w)}</li>" for w in warn) + "</ul></div>")
    failed = failure_warnings(report)
    if failed:
        out += ('<div class="callout" data-callout="llm-failed"><b>Results that rest on a failed LLM request</b><ul>'
                + "".join(f"<li>{esc(w)}</li>" for w in failed) + "</ul></div>")
    return out


def render(report: dict[str, Any], tol: Tolerance = DEFAULT_TOLERANCE) -> str:
    story = stories(report, tol)
    parts = [f"<h1>robusteval: {esc(report['name'])}</h1>",
             '<p class="lede">How gameable is each metric, and how much do input guards and adversarial training '
             "help — at what cost in agreement with human judgments?</p>",
             "<h2>Verdict: robustness and its validity cost</h2>", f'<p class="rule">{esc(rule(tol))}</p>',
             cards(report, tol), warnings(report)]
    for sname in report["suites"]:
        mine = [vs for vs in story if vs.suite == sname]
        parts.append(figure("tradeoff", plots.robustness_validity(tradeoff_points(mine),
                                                                  f"{sname}: robustness vs validity"),
                            "One point per victim and variant: R- ASR (lower is better) against mean Spearman "
                            "with human judgments (right is better), with 95% intervals where measured. Hollow: "
                            "a defense outside the validity tolerance, or with no gain."))
    parts.append(f'<p class="rule">{esc(intro(report))}</p>')
    for sname, suite in report["suites"].items():
        parts.append(f"<h2>Suite {esc(sname)}: {esc(suite['dataset'])} "
                     f"({esc(attacked_label(suite))})</h2>")
        for vname, victim in suite["victims"].items():
            parts.append(f"<h3>{esc(vname)} <small>({esc(victim['metric'])})</small></h3>")
            if plots.has_direction(victim, "R-"):
                parts.append(figure("asr", plots.asr_bars(victim, f"{vname}: R- ASR per attack family", "R-"),
                                    "R- attacks (text made worse): how often the metric was fooled, per family, "
                                    "before and after each defense (lower is better)."))
            if plots.has_score_change(victim):
                parts.append(figure("score-change", plots.score_change_bars(victim, f"{vname}: does gaming pay?"),
                                    "R- attacks: the mean change of the victim's score, after minus before, per "
                                    "family (points, 95% interval resampling contexts). Above 0: the text made "
                                    "worse scored higher on average."))
            if plots.has_direction(victim, "R+"):
                parts.append(figure("asr-plus", plots.asr_bars(victim, f"{vname}: R+ invariance failures", "R+"),
                                    "R+ rewrites (meaning kept): how often the score moved past the tolerance, per "
                                    "family, before and after each defense (lower is better)."))
            for title, head, rows in family_sections(vname, victim):
                parts.append(f"<h4>{esc(title)}</h4>")
                parts.append(table(head, rows, "asr r-minus" if title.split(": ", 1)[1].startswith("R-")
                                   else "asr r-plus"))
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
    parts.append(f"<details><summary>Package versions ({len(pk)})</summary>"
                 + table(["package", "version"], [[k, str(v)] for k, v in pk.items()], "packages") + "</details>")
    parts.append('<details class="config"><summary>Config</summary><pre>'
                 + esc(json.dumps(prov.get("config") or {}, indent=2)) + "</pre></details>")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>robusteval: {esc(report['name'])}</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>\n")
