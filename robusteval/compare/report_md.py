"""``report.md``: the comparison as Markdown tables (the HTML report adds the plots)."""

from __future__ import annotations

from typing import Any

from robusteval.compare.story import DEFAULT_TOLERANCE, Tolerance, VariantStory, inverted_detectors, stories
from robusteval.metaeval import fmt_change
from robusteval.stats import pct as pct_ci

LABEL = {"plain": "plain", "guarded": "guarded", "trained": "adv. trained", "guarded+trained": "guarded + trained",
         "smoothed": "smoothed", "smoothed+trained": "smoothed + trained", "guarded+smoothed": "guarded + smoothed",
         "guarded+smoothed+trained": "guarded + smoothed + trained"}


def pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}"


def num(v: float | None, nd: int = 3) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


def auc_cell(r: dict[str, Any]) -> str:
    """An AUC with its interval, ``"0.812 [0.74, 0.88]"`` (a report made before the interval
    existed shows the point alone)."""
    ci = r.get("ci")
    return num(r.get("auc")) + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci and r.get("auc") is not None else "")


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


def available(victim: dict[str, Any]) -> list[str]:
    return [v for v, e in victim["variants"].items() if e.get("available")]


def rate_cell(entry: dict[str, Any] | None) -> str:
    """``"26.3 [11.3, 50.1] (126/479)"``: a rate with its interval and its numerator/denominator."""
    if not entry or not entry.get("n"):
        return "–"
    k = entry.get("successes", entry.get("flagged"))
    return f"{pct_ci(entry)} ({k}/{entry['n']})"


def rho_cell(s: VariantStory) -> str:
    """Mean Spearman, and for a defended variant its change from ``plain``'s (with the paired
    interval where the run measured one)."""
    if s.spearman is None:
        return "–"
    text = num(s.spearman)
    if s.variant != "plain" and s.spearman_change is not None:
        ci = s.spearman_change_ci
        text += f" ({s.spearman_change:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "") + ")"
    return text


def verdict_cell(s: VariantStory) -> str:
    return s.verdict if s.variant == "plain" else f"{s.verdict}: {s.summary}"


def headline_rows(report: dict[str, Any], tol: Tolerance = DEFAULT_TOLERANCE) -> list[list[str]]:
    """Per suite, victim and variant: R- ASR and R+ invariance failures apart (never pooled),
    mean Spearman with its change from plain, the share of rated responses the guard flagged,
    and the verdict of :mod:`robusteval.compare.story`."""
    return [[vs.suite, vs.victim, LABEL[s.variant], rate_cell(s.r_minus), rate_cell(s.r_plus), rho_cell(s),
             rate_cell(s.flagged), verdict_cell(s)]
            for vs in stories(report, tol) for s in vs.variants]


HEADLINE = ["suite", "victim", "variant", "R- ASR % [95% CI] (fooled/attacked)",
            "R+ invariance failures % [95% CI] (failed/attacked)", "mean Spearman (change vs plain)",
            "rated text flagged % [95% CI] (flagged/rated)", "verdict"]


def detector_warnings(report: dict[str, Any]) -> list[str]:
    """One sentence per detector that ranks attacked text below clean text (AUC < 0.5)."""
    return [f"{w['detector']} ranks the {w['suite']} suite's attacked texts below clean text (ROC AUC "
            f"{auc_cell(w)}, {w['n_adversarial']} attacked vs {w['n_clean']} clean"
            + ("" if not w.get("ci") or w["ci"][1] >= 0.5 else "; the interval stays below 0.5")
            + "): a random attacked text "
            "scores below a random clean one more often than not, so its flags on these attacks cost more "
            "clean text than they catch on the whole (see its ROC for single thresholds)"
            + ("" if not w.get("ci") or w["ci"][1] < 0.5 else
               "; but the interval reaches 0.5, so this may be noise")
            for w in inverted_detectors(report)]


def failure_warnings(report: dict[str, Any]) -> list[str]:
    """One line per result file with rows that rest on a failed LLM request (``llm_failed``)."""
    from robusteval.metrics.inner import retry_note

    return [f"{path}: {retry_note(n, 'fitted state(s)' if path.endswith('.json') else 'row(s)')}"
            for path, n in (report.get("llm_failed") or {}).items()]


def attacked_label(suite: dict[str, Any]) -> str:
    """``"40 attacked test responses from 17 conversations"``, or ``"17 attacked test contexts"``
    where each response has a conversation of its own (best-per-context) or a report made
    before the conversations were counted does not say."""
    n, convs = suite["n_attacked"], suite.get("n_attacked_conversations")
    if convs is None or convs == n:
        return f"{n} attacked test contexts"
    return f"{n} attacked test responses from {convs} conversations"


def ablation_rows(ab: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Per model (base, hardened, each ablation): the R- ASR and the R+ invariance failures (never
    pooled), the rate per family, test Spearman. A report made before the directions were kept
    apart shows "n/a" in those two columns."""
    cols = ab["attack_families"]
    split = ab.get("by_direction") or {}
    rows = [[row, *(pct_ci((split.get(row) or {}).get(d)) for d in ("R-", "R+")),
             *(pct_ci(ab["primary"][row].get(c)) for c in cols),
             num(ab["test_spearman"].get(row))] for row in ab["rows"]]
    return ["model", "R- ASR %", "R+ invariance failures %", *cols, "test Spearman (mean)"], rows


GATE = ["model", "round", "lr", "adversarial examples", "val Spearman", "worst validation set (change [95% CI])",
        "val ASR % [95% CI] (R- and R+ pooled)", "objective", "within tolerance", "kept"]


def worst_set(base: dict[str, Any], record: dict[str, Any]) -> str:
    """The validation set whose Spearman fell most from the base's (the points the gate
    compares), with the change and, where the round kept its predictions, the paired 95 %
    interval of that change (``val_set_changes``,
    :func:`robusteval.training.rounds.val_set_changes`)."""
    b, r = base.get("val_sets") or {}, record.get("val_sets") or {}
    common = [k for k in b if k in r]
    if not common or record is base:
        return "–"
    k = min(common, key=lambda name: r[name] - b[name])
    paired = (record.get("val_set_changes") or {}).get(k) or {}
    return f"{k} ({fmt_change({'change': r[k] - b[k], 'ci': paired.get('ci')})})"


def gate_rows(training: dict[str, Any]) -> list[list[str]]:
    """Every round of every hardened model (the trained variant, each generalization row, each
    ablation) with its validation Spearman (mean, and the set that fell most), validation ASR and
    the gate's decision: where the gate
    kept the base, the model's test rows equal the base's, and this table says why."""
    models = [("hardened", training.get("trained") or {}),
              *((f"trained on {k}", v) for k, v in (training.get("by_family") or {}).items()),
              *((f"ablation {k}", v) for k, v in (training.get("ablations") or {}).items())]
    rows = []
    for name, rec in models:
        rounds = rec.get("rounds") or []
        for r in rounds:
            detail = r.get("val_asr_detail")
            asr = pct_ci(detail) if detail else pct(r.get("val_asr"))
            rows.append([name, str(r["round"]), "base" if r["round"] == 0 else (f"{r['lr']:.2g}" if r.get("lr")
                                                                                  else "–"),
                         str(r.get("added", 0)), num(r.get("val_spearman")), worst_set(rounds[0], r), asr,
                         num(r.get("objective")),
                         "yes" if r.get("valid") else "**no**", "**yes**" if r.get("kept") else ""])
    return rows


def asr_rows(victim: dict[str, Any], direction: str | None = None) -> tuple[list[str], list[list[str]]]:
    """ASR per attack family (rows) and variant (columns); ``direction`` ("R-" or "R+") keeps
    the families of one direction, so R+ invariance failures never sit among R- successes."""
    vs = available(victim)
    fams = sorted({f for v in vs for f, e in victim["variants"][v]["asr"].items()
                   if direction is None or e.get("direction") == direction})
    rows = []
    for f in fams:
        cells = []
        for v in vs:
            e = victim["variants"][v]["asr"].get(f)
            # beside the fraction: originals the guard floored or refused (out of n), texts it
            # refused (in n, not fooled, unless their reference was guarded too), R- rows whose
            # reference it floored or refused (out of n: no beats-reference verdict; a refused
            # text among them is counted in both notes)
            notes = (("original_floored", "orig. floored"), ("original_rejected", "orig. refused"),
                     ("rejected", "refused"), ("reference_guarded", "out of n: no ref. verdict"))
            floored = "".join(f", {e[k]} {label}" for k, label in notes if e and e.get(k))
            cells.append(f"{pct_ci(e['primary'])} ({e['primary']['successes']}/{e['primary']['n']}{floored})"
                         if e else "–")
        rows.append([f, *cells])
    return ["family (direction)", *(LABEL[v] for v in vs)], rows


ADAPTIVE = ["variant", "attack", "family", "transfer ASR % [95% CI]", "adaptive ASR % [95% CI]"]
CERTIFIED = ["variant", "certified within (points)", "radius", "certified contexts % [95% CI]", "certified / n"]


def certified_rows(victim: dict[str, Any]) -> list[list[str]]:
    """Smoothed variants: the share of test contexts certified within the tolerance per radius."""
    rows = []
    for v in available(victim):
        c = victim["variants"][v].get("certified")
        if not c:
            continue
        if "radius" not in c:
            rows.append([LABEL[v], f"{c['tolerance']:g}", "–", c.get("note", ""), "–"])
            continue
        rows += [[LABEL[v], f"{c['tolerance']:g}", r, pct_ci(f), f"{f['certified']}/{f['n']}"]
                 for r, f in c["radius"].items()]
    return rows


def adaptive_rows(victim: dict[str, Any]) -> list[list[str]]:
    """Per guarded variant and adaptive attack: ASR of the transferred texts and of the rerun."""
    return [[LABEL[v], a, x["family"], pct_ci(x["transfer"]), pct_ci(x["adaptive"])]
            for v in available(victim) for a, x in (victim["variants"][v].get("transfer_vs_adaptive") or {}).items()]


def fmt_threshold(t: float | str) -> str:
    """A detector threshold for people: flagged when suspicion >= t."""
    if isinstance(t, str):  # "default (per task and language)"
        return t
    if t > 1.0:
        return "never fires"
    if 0.0 < t < 1e-9:
        return "> 0"
    return f"{t:.3g}"


def fpr_rows(guard: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    sets = sorted({s for per in guard["false_positive_rate"].values() for s in per})
    rows = [[d, fmt_threshold(guard["thresholds"][d]) if d in guard["thresholds"] else "any",
             *(f"{pct_ci(per[s])} ({per[s]['flagged']}/{per[s]['n']})" for s in sets)]
            for d, per in guard["false_positive_rate"].items()]
    return ["detector", "threshold", *(f"FPR % [95% CI] {s}" for s in sets)], rows


def set_change(variant: dict[str, Any], cset: str, aspect: str) -> str:
    """`` (Δ -0.044 [-0.09, +0.00])``: a defended variant's paired Spearman change from plain's
    on one set and aspect (``validity.change_vs_plain.per_set``), or nothing where the report
    has none (plain; a report made before per-set changes were recorded)."""
    from robusteval.metaeval import fmt_change

    per = ((variant.get("validity") or {}).get("change_vs_plain") or {}).get("per_set") or {}
    e = (per.get(cset) or {}).get(aspect)
    return "" if not e or e.get("change") is None else f" (Δ {fmt_change(e)})"


def correlation_rows(victim: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    vs = available(victim)
    first = victim["variants"][vs[0]]["correlation"]
    rows = []
    for cset, per in first.items():
        if "_skipped" in per:  # the metric cannot score this set (e.g. no references): say so
            rows.append([cset, "skipped", "", per["_skipped"], *([""] * (len(vs) - 1))])
            continue
        for aspect in (a for a in per if not a.startswith("_")):
            cells = []
            for v in vs:
                entry = victim["variants"][v]["correlation"][cset].get(aspect) or {}
                sp = entry.get("spearman") or {}
                ci = sp.get("ci95")
                # a variant that correlated fewer pairs (a reject guard's refused responses are
                # NaN, and dropped) says so in its cell: the n column is the first variant's
                fewer = entry.get("n") is not None and entry.get("n") != per[aspect].get("n")
                cells.append(num(sp.get("r")) + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
                             + (f" (n {entry['n']})" if fewer else "")
                             + set_change(victim["variants"][v], cset, aspect))
            rows.append([cset, aspect, str(per[aspect].get("n", "")), *cells])
    return ["set", "aspect", f"n ({LABEL[vs[0]]})", *(LABEL[v] for v in vs)], rows


FLAGGED = ["variant", "set", "flagged / rated", "mean rating flagged", "mean rating unflagged"]


def flagged_rows(victim: dict[str, Any]) -> list[list[str]]:
    """Guarded variants: how many rated responses were flagged, and their mean (normalized)
    human rating against the unflagged ones."""
    rows = []
    for v in available(victim):
        for cset, per in victim["variants"][v]["correlation"].items():
            f = per.get("_flagged")
            if f:
                rows.append([LABEL[v], cset, f"{f['flagged']}/{f['n']}", num(f["mean_rating_flagged"], 2),
                             num(f["mean_rating_unflagged"], 2)])
    return rows


FLIPS = ["victim", "check", "flips / n", "flip rate % [95% CI]"]
TRANSFER = ["surrogate (phrase fitted on)", "target", "phrase", "ASR % [95% CI] (fooled/attacked)"]


def flip_rows(suite: dict[str, Any]) -> list[list[str]]:
    """Position and rubric flip rates of the suite's pairwise judges (robusteval.compare.judges)."""
    rows = []
    for vname, victim in suite["victims"].items():
        for check, rec in (victim.get("judge_flips") or {}).items():
            label = f"rubric reworded ({rec['template']})" if check == "rubric" else "answers swapped"
            missing = f" ({rec['no_verdict']} without a verdict)" if rec.get("no_verdict") else ""
            rows.append([vname, label, f"{rec['flips']}/{rec['n']}{missing}", pct_ci(rec)])
    return rows


def transfer_rows(suite: dict[str, Any]) -> list[list[str]]:
    """ASR of each victim's universal phrase on the other victims."""
    rows = []
    for source, targets in (suite.get("phrase_transfer") or {}).items():
        for target, rec in targets.items():
            a = rec.get("asr")
            rows.append([source, target, f"`{rec['phrase']}`",
                         f"{pct_ci(a)} ({a['successes']}/{a['n']})" if a and a.get("n") else "–"])
    return rows


def intro(report: dict[str, Any]) -> str:
    return ("Attack success rate (ASR) = fooled / attacked, with a 95 % interval (Wilson, or a bootstrap over "
            "contexts where several rows share one). Attacked: every attack that ran, searches that exhausted "
            "their budget included; attacks that could not apply, and attacks on originals the guard had "
            "already floored, are counted apart. R- attacks make the text worse: one fools the victim when "
            "its text scores at least as high as the reference. R+ attacks keep the meaning: one fools it "
            f"(an invariance failure) when the score moves by more than "
            f"{report.get('criteria', {}).get('invariance_tolerance', 1.0):g} point(s). The two are never "
            "pooled. Guarded variants count guard-aware reruns of the search and R- attacks (penalized "
            "search, disguised additions: robusteval.attacks.evasion) and transfer of the other attacks' texts."
            + split_sentence(report))


def split_sentence(report: dict[str, Any]) -> str:
    """How the run split its data. Reports of code before 5807d5b record none: up to 47adb2f
    (2026-11-26) splits hashed each exact context, from it on they kept conversations together."""
    scheme = report.get("split")
    if scheme is None:
        return (" This report records no split scheme: its code predates 5807d5b. Code before 47adb2f "
                "(2026-11-26) split train / val / test by exact dialogue context (a held-out turn could sit "
                "in a train window), later code by conversation; `provenance.git_commit` says which.")
    kept = str(scheme).split("/")[0]  # "conversation/file-name": conversations, a file salted by its name
    return (f" Train / validation / test splits and every interval's resampling keep whole {kept}s together.")


def rule(tol: Tolerance = DEFAULT_TOLERANCE) -> str:
    return ("A defense is recommended only when it lowers the R- ASR clearly (paired with plain on the same attacks "
            "and test samples: the change's 95 % interval below 0 and an exact sign test over the contexts at "
            "p < 0.05; in a report made before the paired test, its 95 % interval below plain's) "
            f"and every validity cost was measured and stays within the tolerance ({tol.describe()}); "
            "otherwise the verdict names the trade-off it makes, an unclear gain or what was not measured. "
            "Changes are measured against the plain variant.")


def fmt_points(c: dict[str, Any] | None) -> str:
    """A mean score change (:func:`robusteval.asr.score_change`): "+12.3 [+5.1, +20.0] (n=34)"."""
    if not c or not c.get("n") or c.get("mean") is None:
        return "–"
    ci = c.get("ci")
    spread = f" [{ci[0]:+.1f}, {ci[1]:+.1f}]" if ci else ""
    return f"{c['mean']:+.1f}{spread} (n={c['n']})"


def change_families(victim: dict[str, Any]) -> list[str]:
    """The R- families with a mean score change in some available variant (entries of reports
    made before 2026-11-26 lack it; a family every text of which a guard refused has n = 0)."""
    return sorted({f for v in available(victim) for f, e in victim["variants"][v]["asr"].items()
                   if e.get("direction") == "R-" and (e.get("score_change") or {}).get("n")})


def change_rows(victim: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Does gaming pay? The mean change of the victim's score (points, after - before) per R-
    family (:func:`change_families`) and variant."""
    vs, fams = available(victim), change_families(victim)
    rows = [[f, *(fmt_points((victim["variants"][v]["asr"].get(f) or {}).get("score_change")) for v in vs)]
            for f in fams]
    return ["family (direction)", *(LABEL[v] for v in vs)], rows


def family_sections(vname: str, victim: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The per-family tables, R- and R+ apart: ASR, invariance failures, and how far R- attacks
    move the score; (title, head, rows) for each non-empty one."""
    out = []
    for direction, what in (("R-", "R- attacks (text made worse): ASR % [95% CI] per family (fooled/attacked)"),
                            ("R+", "R+ attacks (meaning kept): invariance failures % [95% CI] per family "
                                   "(failed/attacked)")):
        head, rows = asr_rows(victim, direction)
        if rows:
            out.append((f"{vname}: {what}", head, rows))
    head, rows = change_rows(victim)
    if rows:
        out.append((f"{vname}: R- attacks, does gaming pay? Mean score change in points (after - before) "
                    "[95% CI] per family; above 0: the worse text scored higher (texts a guard refused have no "
                    "after score and are not averaged)", head, rows))
    return out


def markdown(report: dict[str, Any], tol: Tolerance = DEFAULT_TOLERANCE) -> str:
    lines = [f"# robusteval comparison: {report['name']}", "", intro(report), "",
             "## Headline: robustness and its validity cost", "", rule(tol), ""]
    for vs in stories(report, tol):
        lines += [f"- **{vs.suite} · {vs.victim}**: {vs.headline}"]
    lines += ["", *table(HEADLINE, headline_rows(report, tol)), ""]
    warn = detector_warnings(report)
    if warn:
        lines += ["**Detectors that rank attacked text below clean text:**", "", *(f"- {w}" for w in warn), ""]
    failed = failure_warnings(report)
    if failed:
        lines += ["**Results that rest on a failed LLM request:**", "", *(f"- {w}" for w in failed), ""]
    for sname, suite in report["suites"].items():
        lines += [f"## Suite {sname} ({suite['dataset']}, {attacked_label(suite)})", ""]
        for vname, victim in suite["victims"].items():
            for title, head, rows in family_sections(vname, victim):
                lines += [f"### {title}", "", *table(head, rows), ""]
            ta_rows = adaptive_rows(victim)
            if ta_rows:
                lines += [f"### {vname}: adaptive vs transfer attacks on the defenses", "",
                          *table(ADAPTIVE, ta_rows), ""]
            cert = certified_rows(victim)
            if cert:
                lines += [f"### {vname}: certified smoothed scores (probability >= 1 - alpha)", "",
                          *table(CERTIFIED, cert), ""]
            head, rows = correlation_rows(victim)
            lines += [f"### {vname}: Spearman with human judgments [95% bootstrap CI]", "", *table(head, rows), ""]
            fl = flagged_rows(victim)
            if fl:
                lines += [f"### {vname}: rated responses the guard flagged", "", *table(FLAGGED, fl), ""]
            gen = victim.get("generalization")
            if gen:
                cols = gen["attack_families"]
                lines += [f"### {vname}: generalization (ASR % when trained on X, attacked with Y)", "",
                          *table(["trained on \\ attacked with", *cols],
                                 [[row, *(pct_ci((gen.get("primary") or {}).get(row, {}).get(c)) if "primary" in gen
                                          else pct(vals.get(c)) for c in cols)]
                                  for row, vals in gen["asr"].items()]), ""]
            ab = victim.get("ablation")
            if ab:
                lines += [f"### {vname}: ablation (hardened with one part switched off)", "",
                          *table(*ablation_rows(ab)), ""]
            gate = gate_rows(victim.get("training") or {})
            if gate:
                lines += [f"### {vname}: adversarial rounds and the validation gate", "",
                          "Each round's validation Spearman (mean over the validation splits) and validation ASR "
                          "(training attacks on the validation contexts). A round is kept only if its Spearman is "
                          "within the tolerance of the base's and its objective (Spearman - weight x ASR) is the "
                          "best; a model whose kept round is 0 is the base.", "", *table(GATE, gate), ""]
        fr = flip_rows(suite)
        if fr:
            lines += ["### Judges: verdict flips (pairwise judges)", "", *table(FLIPS, fr), ""]
        tr = transfer_rows(suite)
        if tr:
            lines += ["### Judges: universal-phrase transfer (Raina et al. 2024)", "", *table(TRANSFER, tr), ""]
    g = report["guard"]
    lines += ["## Guard", "", f"Detectors: {', '.join(g['detectors'])}; policy `{g['policy']}`; thresholds from "
              f"`{g['thresholds_file']}`.", ""]
    lines += ["### False-positive rate % on held-out clean text", "", *table(*fpr_rows(g)), ""]
    suites = list(g["roc"])
    lines += ["### Detector ROC AUC [95% CI] (clean held-out text vs R- adversarial text)", "",
              *table(["detector", *suites], [[d, *(auc_cell(g["roc"][s][d]) for s in suites)]
                                              for d in g["detectors"]]), ""]
    prov = report.get("provenance") or {}
    if prov:
        lines += ["## Provenance", "", f"seed {report['seed']}, git commit `{prov.get('git_commit')}`, "
                  f"created {prov.get('created')}, Python {prov.get('python')}; the config is in report.json "
                  "(`provenance.config`)", ""]
    return "\n".join(lines)
