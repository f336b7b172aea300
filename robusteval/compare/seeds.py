"""One comparison under several seeds (``robusteval compare --seeds 0 1 2``): each seed is an
ordinary run in ``<out_dir>/seed-<k>/`` (resumable on its own); this module reads their
``report.json`` files and puts the seeds side by side (``seeds.json``, ``seeds.md``).

A seed changes the split into train / validation / test contexts, training and the attacks'
own randomness, so the seeds are replications of the whole protocol. What is shown per suite,
victim and variant:

* each seed's R- ASR and R+ invariance failures with that run's own 95 % interval and counts
  (``robusteval.asr``; never pooled across directions);
* across seeds: the mean of the per-seed rates, their smallest and largest value, and the
  mean Spearman with human judgments per seed and on average;
* for a defended variant, the relative change of its R- ASR from ``plain`` in the same seed,
  ``(asr - plain) / plain``, per seed and on average (what targets such as "at least 30 %
  lower" are about). Undefined (None) when plain's ASR is 0 in that seed.

With three seeds the spread is a range, not an interval: no interval is computed across seeds.
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
        summary["r_minus_change_vs_plain"] = _spread([s["r_minus_change_vs_plain"] for s in per_seed.values()
                                                      if s["r_minus_change_vs_plain"] is not None])
        rows.append({"suite": suite, "victim": victim, "variant": variant, "per_seed": per_seed, "across": summary})
    return rows


def _spread_cell(s: dict[str, float] | None, percent: bool = True) -> str:
    if not s:
        return "–"
    f = pct if percent else num
    return f"{f(s['mean'])} [{f(s['min'])}, {f(s['max'])}]"


def markdown(rows: list[dict[str, Any]], seeds: list[int]) -> str:
    """``seeds.md``: per seed and across seeds (mean [min, max] over the seeds)."""
    head = ["suite", "victim", "variant",
            *(f"R- ASR % seed {k}" for k in seeds), "R- ASR % mean [min, max]",
            *(f"R+ failures % seed {k}" for k in seeds), "R+ failures % mean [min, max]",
            "R- change vs plain % mean [min, max]", "mean Spearman per seed", "mean Spearman mean [min, max]"]
    body = []
    for r in rows:
        ps, a = r["per_seed"], r["across"]
        body.append([r["suite"], r["victim"], LABEL.get(r["variant"], r["variant"]),
                     *(rate_cell(ps[k]["R-"]) for k in seeds), _spread_cell(a["R-"]),
                     *(rate_cell(ps[k]["R+"]) for k in seeds), _spread_cell(a["R+"]),
                     _spread_cell(a["r_minus_change_vs_plain"]),
                     ", ".join(num(ps[k]["mean_spearman"]) for k in seeds), _spread_cell(a["mean_spearman"], False)])
    intro = (f"# The comparison under {len(seeds)} seeds ({', '.join(map(str, seeds))})\n\n"
             "Each seed is a full run (its own split, training and attacks) in `seed-<k>/`; its cells carry that "
             "run's 95 % interval and counts. Across seeds: the mean of the per-seed values and their range (no "
             "interval across so few seeds). R- change vs plain: `(ASR - plain's ASR) / plain's ASR` in the same "
             "seed (-30 % is 30 % lower).\n\n")
    return intro + "\n".join(table(head, body)) + "\n"
