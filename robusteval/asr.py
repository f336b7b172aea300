"""Attack success rate, computed here and nowhere else (the CLI's summaries, ``compare``,
``harden`` and training validation all call this module).

ASR = fooled / attacked, with a 95 % interval (:func:`robusteval.stats.proportion`: Wilson,
or a bootstrap over contexts when several rows of a group share a context). The
denominator is every row whose attack ran (outcome ``attacked``), including searches that
exhausted their budget without fooling the victim and texts a ``reject`` guard refused
(``rejected``: ran, fooled nothing); rows the attack could not apply to
(``skipped``), rows whose clean original a guard had already floored or refused
(``original_floored``, ``original_rejected``) and the fitting samples of a universal trigger
are counted apart and never enter it.

The *primary* criterion depends on the direction (see :mod:`robusteval.attacks.criteria`):
R- texts fool the victim when they score at least as high as the reference (Vasselli &
Watanabe's beats-reference test); R+ texts when their score moves by more than the
invariance tolerance (robusteval's invariance criterion).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from robusteval.attacks.base import COUNTED_OUTCOMES, ResultRow
from robusteval.attacks.criteria import CRITERIA, PRIMARY
from robusteval.stats import mean_ci, proportion, scoped, sign_test

ASR_NAMES = ("successes", "asr")


def as_row(row: ResultRow | Mapping[str, Any]) -> ResultRow:
    return row if isinstance(row, ResultRow) else ResultRow.from_dict(dict(row))


def family_key(row: ResultRow) -> str:
    return f"{row.family} ({row.direction})"


def attack_key(row: ResultRow) -> str:
    return row.attack


def direction_of(row: ResultRow) -> str:
    return row.direction


def is_fitting(row: ResultRow) -> bool:
    return bool(row.meta.get("fitting_sample"))


def is_counted(row: ResultRow) -> bool:
    """In ASR denominators: the attack ran (``attacked``, or ``rejected`` by a guard: ran and
    did not fool) on a sample it was not fitted on."""
    return row.outcome in COUNTED_OUTCOMES and not is_fitting(row)


def counted(rows: Iterable[ResultRow | Mapping[str, Any]]) -> list[ResultRow]:
    """The rows in ASR denominators (:func:`is_counted`)."""
    return [r for r in map(as_row, rows) if is_counted(r)]


def fooled(row: ResultRow | Mapping[str, Any], criterion: str | None = None) -> bool:
    """Did this row fool its victim under ``criterion`` (default: the primary one for its
    direction; ``"any"``: under at least one criterion)? Only attacked rows can."""
    r = as_row(row)
    if r.outcome != "attacked":
        return False
    if criterion == "any":
        return any(bool(v) for v in r.success.values())
    return bool(r.success.get(criterion or PRIMARY[r.direction]))


def changed(row: ResultRow) -> bool:
    """The row holds a new text: not the clean original, nor a search's unchanged start text."""
    return row.adversarial is not None and row.adversarial not in (row.original, row.meta.get("start_text"))


def training_example(row: ResultRow | Mapping[str, Any]) -> bool:
    """An attacked row (no fitting sample) whose new text fooled its victim under any
    criterion: what adversarial training and the guard's detection tables take."""
    r = as_row(row)
    return is_counted(r) and changed(r) and fooled(r, "any")


def in_denominator(row: ResultRow | Mapping[str, Any], criterion: str | None = None) -> bool:
    """Is this row in n of :func:`asr` under ``criterion`` (default: the row's primary one;
    ``"any"``: at least one)? It is counted (:func:`is_counted`) and has a verdict under the
    criterion: a row with none (gold without a gold evaluator, a rejected text with no
    reference score) is left out."""
    r = as_row(row)
    if not is_counted(r):
        return False
    if criterion == "any":
        return any(v is not None for v in r.success.values())
    return r.success.get(criterion or PRIMARY[r.direction]) is not None


def cluster_of(row: ResultRow) -> str:
    """What an interval resamples a row with: its conversation (``context_id``, else the sample),
    within its dataset: two sets' conversations that share an opener ("Hello") or ids ("1") are
    not one cluster when their rows are pooled."""
    return scoped(row.dataset, row.context_id or row.sample_id)


def asr(rows: Sequence[ResultRow], criterion: str | None = None) -> dict[str, Any]:
    """``{successes, n, asr, ci, ci_method}`` of counted rows under ``criterion`` (default:
    each row's primary criterion; ``"any"``: at least one); n is the rows
    :func:`in_denominator` keeps."""
    judged = [r for r in map(as_row, rows) if in_denominator(r, criterion)]
    return proportion([fooled(r, criterion) for r in judged], [cluster_of(r) for r in judged], names=ASR_NAMES)


def asr_table(rows: Iterable[ResultRow | Mapping[str, Any]],
              key: Callable[[ResultRow], str] = family_key) -> dict[str, dict[str, Any]]:
    """``key(row)`` -> ``{direction, attacked, skipped, original_floored, original_rejected,
    reference_guarded, fitting, primary, criteria: {criterion: ...}, score_change}``, the rates
    and the mean score change (:func:`score_change`) with their intervals."""
    groups: dict[str, list[ResultRow]] = {}
    for r in map(as_row, rows):
        groups.setdefault(key(r), []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(groups):
        group = groups[name]
        used = counted(group)
        out[name] = {
            "direction": group[0].direction,
            "family": group[0].family,
            "attacked": len(used),
            "skipped": sum(r.outcome == "skipped" for r in group),
            "rejected": sum(r.outcome == "rejected" for r in used),
            "original_floored": sum(r.outcome == "original_floored" for r in group),
            "original_rejected": sum(r.outcome == "original_rejected" for r in group),
            # attacked R- rows with no beats-reference verdict: the guard floored or refused the reference
            "reference_guarded": sum(bool(r.meta.get("reference_guarded")) for r in used),
            "fitting": sum(is_fitting(r) and r.outcome in COUNTED_OUTCOMES for r in group),
            "primary": asr(used),
            "criteria": {c: asr(used, c) for c in CRITERIA},
            "score_change": score_change(used),
        }
    return out


def overall(rows: Iterable[ResultRow | Mapping[str, Any]]) -> dict[str, Any]:
    """Primary ASR over every counted row."""
    return asr(counted(rows))


def by_direction(rows: Iterable[ResultRow | Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Primary ASR per direction: ``R-`` (text made bad and not scored lower: the attack
    success rate proper) and ``R+`` (meaning kept and the score moved: invariance failures)."""
    typed = counted(rows)
    return {d: asr([r for r in typed if r.direction == d]) for d in ("R-", "R+")}


def summarize(rows: Iterable[ResultRow | Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per attack: the ASR table entry plus mean victim score before/after and query counts."""
    typed = [as_row(r) for r in rows]
    table = asr_table(typed, attack_key)
    for name, entry in table.items():
        group = [r for r in typed if r.attack == name]
        used = counted(group)
        entry["n"] = len(group)
        # both means over the rows score_change pairs (a refused row has no after score, and the
        # before mean of every row beside the after mean of some read as a change nobody measured)
        paired, _ = scored_pairs(used)
        entry["mean_before"] = float(np.mean([r.victim_before for r in paired])) if paired else None
        entry["mean_after"] = float(np.mean([r.victim_after for r in paired])) if paired else None
        entry["n_scored"] = len(paired)
        entry["mean_drop"] = negated(entry["score_change"])  # the same rows (counted) and bootstrap
        entry["model_calls"] = int(sum(r.model_calls for r in group))
        entry["cache_hits"] = int(sum(r.cache_hits for r in group))
    return table


def score_change(rows: Iterable[ResultRow | Mapping[str, Any]]) -> dict[str, Any]:
    """The paired mean change of the victim's score, ``victim_after - victim_before`` in points,
    with its context-clustered interval: how much an attack pays. For an R- family (text made
    worse) a change above 0 means the worse text scored *higher* on average; a guard that floors
    flagged text pulls the change down. Rows refused by a guard (policy ``reject``) have no after
    score and are left out, so such a variant averages over the texts that got through (``n``
    counts the rows averaged; the ASR table beside it counts the refused ones).

    Computed as ``victim_after - victim_before`` averaged over the counted rows whose attack
    produced a scored text, with its interval (:func:`robusteval.stats.mean_ci`, clustered by
    context). A pair with a non-finite score (no path writes one today: metrics refuse them) is
    left out and counted in ``nonfinite`` rather than stopping every ASR table."""
    used, nonfinite = scored_pairs(counted(rows))
    out = mean_ci([float(r.victim_after) - float(r.victim_before) for r in used],  # type: ignore[arg-type]
                  [cluster_of(r) for r in used])
    if nonfinite:
        out["nonfinite"] = nonfinite
    return out


def scored_pairs(rows: Iterable[ResultRow]) -> tuple[list[ResultRow], int]:
    """The rows with a finite victim score both before and after the attack -- the pairs
    :func:`score_change` averages, and the rows of :func:`summarize`'s mean before / after --
    and how many rows had both scores with one of them non-finite (left out, counted)."""
    both = [r for r in rows if r.victim_after is not None and r.victim_before is not None]
    used = [r for r in both if math.isfinite(float(r.victim_after)) and math.isfinite(float(r.victim_before))]
    return used, len(both) - len(used)


def mean_drop(rows: Iterable[ResultRow | Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`score_change` with the sign turned, ``victim_before - victim_after``: Hu et al.'s
    Table 21 statistic (2024, App. D.1) on robusteval's 0-100 scale. Positive: the score fell."""
    return negated(score_change(rows))


def negated(change: dict[str, Any]) -> dict[str, Any]:
    """A :func:`score_change` result with its sign turned: the mean negated and the interval's
    ends negated and swapped (the same bootstrap, so ``mean_drop`` never resamples again)."""
    out = dict(change)
    if out.get("mean") is not None:
        out["mean"] = 0.0 - out["mean"]  # 0.0 - 0.0 is 0.0, never -0.0
    if out.get("ci") is not None:
        lo, hi = out["ci"]
        out["ci"] = [0.0 - hi, 0.0 - lo]
    return out


def _by_attack_and_sample(rows: Iterable[ResultRow | Mapping[str, Any]], criterion: str | None,
                          side: str) -> dict[tuple[str, str], ResultRow]:
    out: dict[tuple[str, str], ResultRow] = {}
    for r in map(as_row, rows):
        if not in_denominator(r, criterion):
            continue
        if (r.attack, r.sample_id) in out:
            raise ValueError(f"{side}: two rows of attack {r.attack!r} on sample {r.sample_id!r}: "
                             "one run's rows pair, not a concatenation")
        out[(r.attack, r.sample_id)] = r
    return out


def paired_change(pairs: Sequence[tuple[Iterable[ResultRow | Mapping[str, Any]],
                                         Iterable[ResultRow | Mapping[str, Any]]]],
                  key: Callable[[ResultRow], str] = family_key,
                  criterion: str | None = None) -> dict[str, dict[str, Any]]:
    """The change in ASR from ``before`` to ``after`` rows of the *same* attacks on the *same*
    samples, per ``key(row)`` group: e.g. two evaluators attacked on one test split, or several
    such pairs (one per seed) pooled.

    Rows are matched by attack and sample within each pair; only rows in the
    denominator on both sides (:func:`in_denominator`) are compared. Per group:
    ``{n_pairs, before, after, only_before, only_after, change, unmatched}``: the successes of
    each side on the matched rows, the rows only ``before`` (only ``after``) was fooled on, and
    the mean of ``fooled(after) - fooled(before)`` with its 95 % interval, a bootstrap over
    contexts (:func:`robusteval.stats.mean_ci`; the contexts of different pairs are different
    clusters, so pooled seeds resample each seed's contexts, and a context in two seeds' test
    splits counts twice: the models of different seeds differ), and ``sign_test``: the exact
    sign test over those contexts (:func:`robusteval.stats.sign_test`: how many contexts were
    fooled less, how many more, and the two-sided p). With a few contexts the percentile
    bootstrap is too ready to exclude 0; call a change clear only when the sign test agrees.
    Negative: ``after`` is fooled less. ``unmatched`` counts the rows of the group that only
    one side has in its denominator.
    Two rows of one attack on one sample on a side are refused (ValueError).
    """
    diffs: dict[str, list[float]] = {}
    clusters: dict[str, list[str]] = {}
    tallies: dict[str, dict[str, int]] = {}
    for i, (before, after) in enumerate(pairs):
        a, b = _by_attack_and_sample(before, criterion, f"pair {i + 1}, before"), \
            _by_attack_and_sample(after, criterion, f"pair {i + 1}, after")
        for k in sorted(set(a) | set(b)):
            row = a.get(k) or b[k]
            t = tallies.setdefault(key(row), {"before": 0, "after": 0, "only_before": 0, "only_after": 0,
                                              "unmatched": 0})
            if k not in a or k not in b:
                t["unmatched"] += 1
                continue
            fa, fb = fooled(a[k], criterion), fooled(b[k], criterion)
            t["before"] += fa
            t["after"] += fb
            t["only_before"] += fa and not fb
            t["only_after"] += fb and not fa
            diffs.setdefault(key(row), []).append(float(fb) - float(fa))
            clusters.setdefault(key(row), []).append(f"{i}|{cluster_of(row)}")
    return {g: {"n_pairs": len(diffs.get(g, [])), **t,
                "change": mean_ci(diffs.get(g, []), clusters.get(g, [])),
                "sign_test": sign_test(diffs.get(g, []), clusters.get(g, []))}
            for g, t in sorted(tallies.items())}


def summary_markdown(summary: dict[str, dict[str, Any]], victim: str) -> str:
    from robusteval.stats import pct

    lines = [f"# Attack success rates against {victim} (%, 95 % interval)", "",
             "ASR = fooled / attacked (searches that exhausted their budget, and texts a reject guard "
             "refused, count as attacked, not fooled).", "",
             "Mean before / after: the victim's mean score on the same rows, those scored both before and "
             "after the attack (n scored; a refused text has no after score).", "",
             "| attack | family | dir | attacked | refused by guard | skipped | orig. floored / refused | "
             "mean before | mean after (n scored) | ASR beats-ref | ASR expectation | ASR invariance | ASR gold "
             "| calls | cache hits |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in summary.items():
        mb = "n/a" if s["mean_before"] is None else f"{s['mean_before']:.1f}"
        ma = "n/a" if s["mean_after"] is None else f"{s['mean_after']:.1f} ({s['n_scored']})"
        c = s["criteria"]
        lines.append(f"| {name} | {s['family']} | {s['direction']} | {s['attacked']}/{s['n']} | "
                     f"{s['rejected']} | "
                     f"{s['skipped']} | {s['original_floored']} / {s['original_rejected']} | {mb} | {ma} | "
                     f"{pct(c['beats_reference'])} | "
                     f"{pct(c['expectation'])} | {pct(c['invariance'])} | {pct(c['gold'])} | "
                     f"{s['model_calls']} | {s['cache_hits']} |")
    guarded_refs = {n: s["reference_guarded"] for n, s in summary.items() if s.get("reference_guarded")}
    if guarded_refs:
        lines += ["", "Attacked rows without a beats-reference verdict, because the guard floored or refused "
                  "the reference they are compared with (left out of that column's n): "
                  + ", ".join(f"{n} {k}" for n, k in guarded_refs.items()) + "."]
    levels = {n: s["system_level"] for n, s in summary.items() if s.get("system_level", {}).get("n_docs")}
    if levels:
        lines += ["", "System level (Mu & Lim §2.5: the attack's mean beats every published system's mean "
                  "on the same documents):", "",
                  "| attack | documents | attack mean | best system (mean) | rank | beats every system |",
                  "|---|---|---|---|---|---|"]
        for name, lv in levels.items():
            top = max(lv["systems"].items(), key=lambda kv: kv[1])
            lines.append(f"| {name} | {lv['n_docs']} | {lv['attack_mean']:.1f} | {top[0]} ({top[1]:.1f}) | "
                         f"{lv['rank']} of {lv['of']} | {'yes' if lv['success'] else 'no'} |")
    return "\n".join(lines) + "\n"


def system_level(rows: Iterable[ResultRow | Mapping[str, Any]],
                 system_scores: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """Mu & Lim's system-level success (§2.5): an attack succeeds when its mean score over the
    documents beats the mean of every published system on the same documents.

    ``rows``: one attack's rows (their ``sample_id`` names the document's attacked sample,
    ``meta["doc"]`` or the sample id keys the document); ``system_scores``: system -> document
    key -> the victim's score of that system's output. Only documents that the attack changed
    and every system covers are used, so both sides average over the same documents."""
    used = [r for r in counted(rows) if r.victim_after is not None]
    by_doc = {str(r.meta.get("doc", r.sample_id)): float(r.victim_after) for r in used}  # type: ignore[arg-type]
    docs = sorted(d for d in by_doc if all(d in s for s in system_scores.values()))
    if not docs or not system_scores:
        return {"n_docs": 0, "attack_mean": None, "systems": {}, "rank": None, "beats": [], "success": None}
    attack_mean = float(np.mean([by_doc[d] for d in docs]))
    means = {name: float(np.mean([s[d] for d in docs])) for name, s in system_scores.items()}
    beaten = sorted(n for n, m in means.items() if attack_mean > m)
    return {"n_docs": len(docs), "attack_mean": attack_mean, "systems": dict(sorted(means.items())),
            "rank": 1 + sum(m >= attack_mean for m in means.values()), "of": len(means) + 1,
            "beats": beaten, "success": len(beaten) == len(means)}
