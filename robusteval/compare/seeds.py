"""One comparison under several seeds (``robusteval compare --seeds '[0, 1, 2]'``): each seed is
an ordinary run in ``<out_dir>/seed-<k>/`` (its own fingerprint, resumable on its own); this
module reads their ``report.json`` files and puts the seeds side by side (``seeds.json``,
``seeds.md``).

A seed changes the split into train / validation / test contexts, training and the attacks'
own randomness, so the seeds are replications of the whole protocol. What is shown per suite,
victim and variant present in every seed:

* each seed's R- ASR and R+ invariance failures with that run's own 95 % interval and counts
  (``robusteval.asr``; never pooled across directions);
* across seeds: the mean of the per-seed rates with their smallest and largest value, and the
  mean Spearman with human judgments per seed and on average. A seed where a value is
  undefined (a direction with nothing attacked, no Spearman) is left out of that mean, and the
  cell says how many seeds it covers;
* for a defended variant, its R- change from ``plain``: ``(mean ASR - plain's mean ASR) /
  plain's mean ASR`` over the seeds (what a target such as "at least 30 % lower" is read
  against), and the range of the same ratio computed within each seed, ``(asr - plain) /
  plain``, as its spread (a seed where plain's ASR is 0 has no ratio and is left out of the
  range, counted).

With three seeds the spread is a range, not an interval: no interval is computed across seeds;
each seed's own intervals are in its cells.

``seeds.json``: ``{"seeds": [...], "rows": [{"suite", "victim", "variant", "per_seed": {"<k>":
{"R-", "R+" (the seed's by_direction entries), "mean_spearman", "r_minus_change_vs_plain"}},
"across": {"R-", "R+", "mean_spearman": {"mean", "min", "max", "seeds"} or null,
"r_minus_change_vs_plain": {"of_means", "min", "max", "seeds"} or null}}], "provenance"}``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from robusteval.compare.report_md import LABEL, num, pct, rate_cell, table

DIRECTIONS = ("R-", "R+")


def _keys(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(suite, victim, variant) for suite, s in report["suites"].items() for victim, v in s["victims"].items()
            for variant, e in v["variants"].items() if e.get("available")]


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"mean": round(statistics.fmean(values), 6), "min": min(values), "max": max(values), "seeds": len(values)}


def relative_change(asr: float | None, plain: float | None) -> float | None:
    """``(asr - plain) / plain``: -0.3 is "30 % lower than plain"; None when either is missing
    or plain is 0 (no relative change of nothing)."""
    if asr is None or plain is None or plain == 0:
        return None
    return round((asr - plain) / plain, 6)


def across_seeds(reports: Mapping[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (suite, victim, variant) present in every seed's report (module docstring)."""
    if not reports:
        raise ValueError("across_seeds needs at least one report")
    seeds = sorted(reports)
    common = set.intersection(*(set(_keys(reports[k])) for k in seeds))
    order = [key for key in _keys(reports[seeds[0]]) if key in common]
    rows = []
    for suite, victim, variant in order:
        per_seed: dict[int, dict[str, Any]] = {}
        for k in seeds:
            victims = reports[k]["suites"][suite]["victims"][victim]["variants"]
            entry = victims[variant]
            plain = (victims.get("plain") or {}).get("by_direction", {}).get("R-") or {}
            own = entry.get("by_direction", {})
            per_seed[k] = {"R-": own.get("R-"), "R+": own.get("R+"), "mean_spearman": entry.get("mean_spearman"),
                           "r_minus_change_vs_plain": None if variant == "plain" else
                           relative_change((own.get("R-") or {}).get("asr"), plain.get("asr"))}
        summary = {d: _spread([s[d]["asr"] for s in per_seed.values() if s[d] and s[d].get("n")]) for d in DIRECTIONS}
        summary["mean_spearman"] = _spread([s["mean_spearman"] for s in per_seed.values()
                                            if s["mean_spearman"] is not None])
        rows.append({"suite": suite, "victim": victim, "variant": variant, "per_seed": per_seed, "across": summary})
    plain_mean = {(r["suite"], r["victim"]): (r["across"]["R-"] or {}).get("mean") for r in rows
                  if r["variant"] == "plain"}
    for r in rows:
        change = None
        if r["variant"] != "plain":
            ratios = [x for s in r["per_seed"].values() if (x := s["r_minus_change_vs_plain"]) is not None]
            of_means = relative_change((r["across"]["R-"] or {}).get("mean"), plain_mean.get((r["suite"], r["victim"])))
            if of_means is not None or ratios:
                change = {"of_means": of_means, "min": min(ratios, default=None), "max": max(ratios, default=None),
                          "seeds": len(ratios)}
        r["across"]["r_minus_change_vs_plain"] = change
    return rows


def _covers(s: dict[str, Any], total: int) -> str:
    return "" if s["seeds"] == total else f"{s['seeds']} of {total} seeds"


def _spread_cell(s: dict[str, Any] | None, total: int, percent: bool = True) -> str:
    if not s:
        return "–"
    f = pct if percent else num
    covers = _covers(s, total)
    return f"{f(s['mean'])} [{f(s['min'])}, {f(s['max'])}]" + (f" ({covers})" if covers else "")


def _change_cell(s: dict[str, Any] | None, total: int) -> str:
    if not s:
        return "–"
    parts = [f"per seed {pct(s['min'])} to {pct(s['max'])}" if s["seeds"] else "no seed defines it"]
    if s["seeds"] and s["seeds"] != total:
        parts.append(_covers(s, total))
    return f"{pct(s['of_means'])} ({'; '.join(parts)})"


def markdown(rows: list[dict[str, Any]], seeds: list[int]) -> str:
    """``seeds.md``: per seed and across seeds (mean [min, max] over the seeds)."""
    head = ["suite", "victim", "variant",
            *(f"R- ASR % seed {k}" for k in seeds), "R- ASR % mean [min, max]",
            *(f"R+ failures % seed {k}" for k in seeds), "R+ failures % mean [min, max]",
            "R- change vs plain % (of the means; per-seed range)", "mean Spearman per seed",
            "mean Spearman mean [min, max]"]
    n = len(seeds)
    body = []
    for r in rows:
        ps, a = r["per_seed"], r["across"]
        body.append([r["suite"], r["victim"], LABEL.get(r["variant"], r["variant"]),
                     *(rate_cell(ps[k]["R-"]) for k in seeds), _spread_cell(a["R-"], n),
                     *(rate_cell(ps[k]["R+"]) for k in seeds), _spread_cell(a["R+"], n),
                     _change_cell(a["r_minus_change_vs_plain"], n),
                     ", ".join(num(ps[k]["mean_spearman"]) for k in seeds), _spread_cell(a["mean_spearman"], n, False)])
    intro = (f"# The comparison under {n} seeds ({', '.join(map(str, seeds))})\n\n"
             "Each seed is a full run (its own split, training and attacks) in `seed-<k>/`; its cells carry that "
             "run's 95 % interval and counts. Across seeds: the mean of the per-seed values and their range (no "
             "interval across so few seeds); a mean that leaves out a seed (nothing attacked, no Spearman) says "
             "how many seeds it covers. R- change vs plain: `(mean ASR - plain's mean ASR) / plain's mean ASR` "
             "(-30 % is 30 % lower), with the range of the same ratio within each seed.\n\n")
    return intro + "\n".join(table(head, body)) + "\n"
