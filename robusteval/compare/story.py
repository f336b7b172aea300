"""What a comparison says, variant by variant: robustness and its validity cost side by side,
and which defense (if any) the report may recommend.

Every number here is read from ``report.json``, where :mod:`robusteval.asr` (ASR, R- and R+
apart), :mod:`robusteval.metaeval` (Spearman) and :mod:`robusteval.stats` (rates and their
intervals) put it; this module only subtracts a variant's value from ``plain``'s and compares
the differences with a stated tolerance. No ASR or correlation is recomputed.

The rule (docs/compare.md, "Reading the report"): a defended variant is **recommended** when it
lowers the R- ASR (text made worse and still scored at least as high as the reference) and each
of its validity costs stays within :class:`Tolerance`:

* its mean Spearman with human judgments falls by at most ``spearman_drop`` from ``plain``'s,
  and on no single set and aspect does it fall *clearly* further (the paired interval of that
  set's change lying wholly below ``-spearman_drop``: a drop the mean hides, told apart from the
  noise of a small set);
* the guard flags at most ``flagged`` of the rated (clean, human-judged) responses: a flagged
  response is floored, penalized or refused, so the metric no longer scores it;
* its R+ invariance failures (meaning kept, score moved) rise by at most ``invariance_rise``
  (the point rise: a rise beyond it is a cost even when the paired test over contexts, printed
  beside it, cannot yet tell it from noise).

A cost that was not measured (no human ratings for the Spearman change; no flag count for a
guarded variant) is never read as no cost: such a variant's verdict is **not measured**. A
gain that is not clear is an **unclear gain**: reported, never recommended. Clear means, where
the run paired the variant's rows with plain's (``paired_vs_plain``: the same attacks on the
same test samples), a paired change whose bootstrap interval lies below 0 with an exact sign
test over contexts at p < 0.05 (:func:`clear_paired_gain`); in a report without it, a 95 %
interval that lies below ``plain``'s. Otherwise its verdict is a **trade-off** (lower ASR, bought with the costs it
names) or **no gain** (R- ASR not lower). Among the recommended variants the one with the lowest R- ASR is the
victim's recommended defense; when there is none the report says so and names the trade-off of
the variant with the lowest ASR instead of crowning it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from robusteval.config.compare import Tolerance  # the command's tolerance block; defined with the config
from robusteval.metaeval import fmt_change
from robusteval.stats import flag_rate

DEFAULT_TOLERANCE = Tolerance()
BASELINE, RECOMMENDED, TRADE_OFF, NO_GAIN, NOT_MEASURED, UNCLEAR = "baseline", "recommended", "trade-off", \
    "no gain", "not measured", "unclear gain"


def rate_of(entry: dict[str, Any] | None) -> float | None:
    """The rate of an ASR (``asr``) or flag-rate (``rate``) entry; None when nothing was counted."""
    if not entry:
        return None
    return entry.get("asr", entry.get("rate"))


def flagged_pooled(correlation: dict[str, Any]) -> dict[str, Any] | None:
    """The guard's flags over every rated response of every correlation set (``_flagged``
    entries written by :func:`robusteval.compare.pipeline.flagged_summary`) as one
    :func:`robusteval.stats.flag_rate` entry, or None for an unguarded variant.

    The responses to one context (one conversation) are one cluster (their flags are not independent: one
    guarded context often flags all of them), so the interval is the cluster bootstrap over
    the conversations of every set (``contexts``: ``[responses, flagged]`` per conversation). A report
    written before contexts were recorded falls back to Wilson over responses and says so
    (``ci_method``)."""
    parts = [per["_flagged"] for per in correlation.values() if isinstance(per, dict) and "_flagged" in per]
    if not parts:
        return None
    flags: list[bool] = []
    clusters: list[tuple[int, int]] | None = []
    for j, p in enumerate(parts):
        groups = p.get("contexts")
        if groups is None or sum(g[0] for g in groups) != p["n"] or sum(g[1] for g in groups) != p["flagged"]:
            clusters = None
            flags += [i < p["flagged"] for i in range(p["n"])]
            continue
        for c, (n, k) in enumerate(groups):
            flags += [i < k for i in range(n)]
            if clusters is not None:
                clusters += [(j, c)] * n
    return {**flag_rate(flags, clusters), "sets": len(parts)}


@dataclass
class VariantStory:
    """One variant's robustness, validity cost and verdict, every number from ``report.json``."""

    variant: str
    r_minus: dict[str, Any] | None          # by_direction["R-"]: the ASR proper
    r_plus: dict[str, Any] | None           # by_direction["R+"]: invariance failures
    spearman: float | None                  # mean Spearman over the sets and aspects
    spearman_ci: list[float] | None         # its interval, where the run measured one
    spearman_change: float | None           # minus plain's (0 for plain)
    spearman_change_ci: list[float] | None  # paired interval, where the run measured one
    flagged: dict[str, Any] | None          # pooled flag rate over the rated responses (guarded variants)
    flagged_sets: list[dict[str, Any]] = field(default_factory=list)  # per set, with the mean ratings
    asr_gain: float | None = None           # plain's R- ASR minus this one's (positive: fewer successes)
    clear_gain: bool = False                # paired test over contexts (else: the intervals do not overlap)
    paired: str = ""                        # how the paired test reads, where the run recorded it
    invariance_change: float | None = None  # this R+ rate minus plain's
    costs: list[str] = field(default_factory=list)
    unmeasured: list[str] = field(default_factory=list)  # validity costs the run did not measure
    verdict: str = BASELINE
    summary: str = ""


@dataclass
class VictimStory:
    suite: str
    victim: str
    metric: str
    variants: list[VariantStory]
    recommended: str | None
    headline: str


def _validity(entry: dict[str, Any]) -> tuple[list[float] | None, float | None, list[float] | None]:
    v = entry.get("validity") or {}
    ms, ch = v.get("mean_spearman") or {}, v.get("change_vs_plain") or {}
    return ms.get("ci"), ch.get("mean"), ch.get("ci")


def paired_reading(paired: dict[str, Any]) -> tuple[int, str]:
    """How a paired change from plain on the same attacks and test samples
    (``paired_vs_plain[direction]``, :func:`robusteval.asr.paired_change`) reads: -1 when the
    rate is clearly lower, +1 clearly higher, 0 neither; and the words for a summary. Clear
    means the bootstrap interval of the change excludes 0 on that side *and* the exact sign
    test over contexts gives p < 0.05: with a few contexts the bootstrap alone excludes 0 too
    readily."""
    c, t = paired["change"], paired["sign_test"]
    ci, p = c.get("ci"), t.get("p")
    tested = ci is not None and p is not None and p < 0.05
    side = -1 if tested and ci[1] < 0 else 1 if tested and ci[0] > 0 else 0
    where = f"paired over {paired['n_pairs']} rows: {t['down']} contexts fooled less, {t['up']} more"
    return side, where + ("" if p is None else f", p = {p:.2g}") + ("" if side else "; not clear")


def clear_paired_gain(paired: dict[str, Any]) -> tuple[bool, str]:
    """Is a variant's R- ASR clearly below plain's (:func:`paired_reading` of
    ``paired_vs_plain["R-"]``)? Returns the verdict and how the test reads, for the summary."""
    side, where = paired_reading(paired)
    return side < 0, where


def clear_set_drops(entry: dict[str, Any], tol: Tolerance) -> list[tuple[str, dict[str, Any]]]:
    """The sets (and aspects) on which a variant's Spearman fell clearly beyond the tolerance:
    the paired interval of the change from plain's (``validity.change_vs_plain.per_set``) lies
    wholly below ``-tol.spearman_drop``."""
    per = (((entry.get("validity") or {}).get("change_vs_plain") or {}).get("per_set")) or {}
    return [(f"{cset} ({aspect})", e) for cset, aspects in sorted(per.items()) for aspect, e in sorted(aspects.items())
            if e.get("ci") and e["ci"][1] < -tol.spearman_drop]


def variant_story(variant: str, entry: dict[str, Any], plain: dict[str, Any], tol: Tolerance) -> VariantStory:
    d, pd = entry.get("by_direction") or {}, plain.get("by_direction") or {}
    ms_ci, change, change_ci = _validity(entry)
    ms, pms = entry.get("mean_spearman"), plain.get("mean_spearman")
    if change is None and ms is not None and pms is not None:
        change = round(ms - pms, 6)
    s = VariantStory(variant=variant, r_minus=d.get("R-"), r_plus=d.get("R+"), spearman=ms, spearman_ci=ms_ci,
                     spearman_change=0.0 if variant == "plain" else change,
                     spearman_change_ci=None if variant == "plain" else change_ci,
                     flagged=flagged_pooled(entry.get("correlation") or {}),
                     flagged_sets=[{"set": k, **per["_flagged"]} for k, per in (entry.get("correlation") or {}).items()
                                   if isinstance(per, dict) and "_flagged" in per])
    if variant == "plain":
        s.summary = "the undefended metric: every change is measured against it"
        return s
    mine, base = rate_of(s.r_minus), rate_of(pd.get("R-"))
    if mine is not None and base is not None:
        s.asr_gain = round(base - mine, 6)
        ci, pci = (s.r_minus or {}).get("ci"), (pd.get("R-") or {}).get("ci")
        s.clear_gain = bool(ci and pci and ci[1] < pci[0])
        paired = (entry.get("paired_vs_plain") or {}).get("R-")
        if paired and paired.get("n_pairs"):
            s.clear_gain, s.paired = clear_paired_gain(paired)
    rp, prp = rate_of(s.r_plus), rate_of(pd.get("R+"))
    if rp is not None and prp is not None:
        s.invariance_change = round(rp - prp, 6)
    if s.spearman_change is not None and s.spearman_change < -tol.spearman_drop:
        s.costs.append(f"mean Spearman {s.spearman_change:+.3f}")
    s.costs += [f"Spearman on {where} {fmt_change(e)}" for where, e in clear_set_drops(entry, tol)]
    fr = rate_of(s.flagged)
    if fr is not None and fr > tol.flagged:
        assert s.flagged is not None
        s.costs.append(f"flags {100 * fr:.1f} % of rated responses ({s.flagged['flagged']}/{s.flagged['n']})")
    if s.invariance_change is not None and s.invariance_change > tol.invariance_rise:
        # the rise itself is the cost (a point estimate, so noise is never read as no cost);
        # the paired test beside it says whether more contexts would confirm it
        paired = (entry.get("paired_vs_plain") or {}).get("R+")
        s.costs.append(f"R+ invariance failures {100 * s.invariance_change:+.1f} points"
                       + (f" ({paired_reading(paired)[1]})" if paired and paired.get("n_pairs") else ""))
    if s.spearman_change is None:
        s.unmeasured.append("the Spearman change (no human ratings scored)")
    if "guarded" in variant and s.flagged is None:
        s.unmeasured.append("the share of rated text the guard flags")
    if s.asr_gain is None:
        s.verdict, s.summary = NOT_MEASURED, "R- ASR not measured (nothing attacked)"
        return s
    if s.asr_gain == 0:
        gain = "R- ASR unchanged"
    else:
        gain = f"R- ASR {-100 * s.asr_gain:+.1f} points" + (
            f" ({s.paired})" if s.paired else "" if s.clear_gain or s.asr_gain < 0 else " (intervals overlap)")
    if s.asr_gain <= 0:
        s.verdict = NO_GAIN
        s.summary = gain + (f"; costs: {', '.join(s.costs)}" if s.costs else "")
    elif s.costs:
        s.verdict, s.summary = TRADE_OFF, f"{gain}, bought with: {', '.join(s.costs)}"
    elif s.unmeasured:
        s.verdict, s.summary = NOT_MEASURED, f"{gain}; not measured: {', '.join(s.unmeasured)}"
    elif not s.clear_gain:
        s.verdict, s.summary = UNCLEAR, f"{gain}: more samples decide"
    else:
        s.verdict, s.summary = RECOMMENDED, f"{gain} within the validity tolerance"
    return s


def victim_story(suite: str, name: str, victim: dict[str, Any], tol: Tolerance = DEFAULT_TOLERANCE) -> VictimStory:
    """Every available variant's story and the victim's one-line headline."""
    from robusteval.compare.report_md import LABEL

    entries = {v: e for v, e in victim["variants"].items() if e.get("available")}
    plain = entries.get("plain") or {}
    stories = [variant_story(v, e, plain, tol) for v, e in entries.items()]
    ok = [s for s in stories if s.verdict == RECOMMENDED]
    lower = [s for s in stories if s.asr_gain is not None and s.asr_gain > 0]
    if ok:
        best = min(ok, key=lambda s: rate_of(s.r_minus) or 0.0)
        headline = f"Recommended defense: {LABEL[best.variant]} ({best.summary})."
        return VictimStory(suite, name, victim.get("metric", ""), stories, best.variant, headline)
    if lower:
        low = min(lower, key=lambda s: rate_of(s.r_minus) or 0.0)
        headline = (f"No defense is recommended: none lowers the R- ASR clearly and within the validity "
                    f"tolerance. Lowest R- ASR: {LABEL[low.variant]}, {low.verdict} ({low.summary}).")
    else:
        headline = "No defense lowers the R- ASR."
    return VictimStory(suite, name, victim.get("metric", ""), stories, None, headline)


def stories(report: dict[str, Any], tol: Tolerance = DEFAULT_TOLERANCE) -> list[VictimStory]:
    return [victim_story(sname, vname, victim, tol)
            for sname, suite in report["suites"].items() for vname, victim in suite["victims"].items()]


def inverted_detectors(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Detectors whose suspicion ranks the suite's R- adversarial texts *below* held-out clean
    text (ROC AUC < 0.5, :func:`robusteval.compare.guarding.roc`): a random attacked text
    scores below a random clean one more often than not (which is not "at every threshold": the
    curve can cross the diagonal)."""
    out = []
    for suite, per in (report.get("guard") or {}).get("roc", {}).items():
        for det, r in per.items():
            if r.get("auc") is not None and r["auc"] < 0.5:
                out.append({"suite": suite, "detector": det, "auc": r["auc"], "ci": r.get("ci"),
                            "n_clean": r.get("n_clean"), "n_adversarial": r.get("n_adversarial")})
    return out
