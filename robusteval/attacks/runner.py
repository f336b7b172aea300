"""Run attacks over samples against a victim, append results as they finish, summarize ASR."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robusteval.attacks.base import Attack
from robusteval.attacks.criteria import Criteria, victim_aspect
from robusteval.attacks.victim import CachedVictim
from robusteval.errors import DataFormatError
from robusteval.results import JsonlLog, read_jsonl, write_json
from robusteval.types import Sample

CRITERIA = ("gold", "beats_reference", "expectation")


RESULT_FIELDS = ("attack", "family", "sample_id", "adversarial", "applicable", "direction")


def read_results(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], str | None]:
    """Rows of a ``results.jsonl`` written by :func:`run_attacks` (or its folder) and the
    dataset named by the ``summary.json`` beside it (None when there is none)."""
    p = Path(path)
    p = p / "results.jsonl" if p.is_dir() else p
    rows = read_jsonl(p)
    for n, row in enumerate(rows, 1):
        missing = [f for f in RESULT_FIELDS if f not in row]
        if missing:
            raise DataFormatError(p, "not an attack-runner results file", line=n, field=missing[0])
    summary = p.with_name("summary.json")
    dataset = json.loads(summary.read_text(encoding="utf-8")).get("dataset") if summary.is_file() else None
    return rows, dataset


def fooled(row: dict[str, Any]) -> bool:
    """True when an applicable result succeeded under at least one criterion."""
    return bool(row.get("applicable")) and any(bool(v) for v in (row.get("success") or {}).values())


def yardstick(sample: Sample, victim_metric: Any) -> str:
    """The text an R- result must score at least as high as to "beat the reference": the
    sample's reference, or the original response when there is none -- and also when the victim
    compares responses *with* the reference (BLEU, ROUGE, BERTScore against references), which
    would score the reference against itself and make the test unwinnable."""
    against_reference = bool(getattr(victim_metric, "requires_reference", False)) and \
        getattr(victim_metric, "against", "reference") == "reference"
    return sample.response if against_reference else (sample.reference or sample.response)


def result_key(attack: str, sample_id: str) -> str:
    return f"{attack}|{sample_id}"


def fit_attacks(attacks: Sequence[Attack], fit_on: Sequence[Sample], victim: CachedVictim,
                path: Path) -> dict[str, Any]:
    """Fit the attacks that need it (universal triggers) once; the fitted state is saved to
    ``path`` and reloaded on resume, so a resumed run attacks with the same trigger."""
    saved = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    for attack in attacks:
        if not getattr(attack, "needs_fit", False):
            continue
        if attack.name in saved:
            attack.load_fitted(saved[attack.name])  # type: ignore[attr-defined]
            continue
        attack.fit(fit_on, victim)  # type: ignore[attr-defined]
        saved[attack.name] = attack.fitted_state()  # type: ignore[attr-defined]
        saved[attack.name]["fitted_on"] = [s.id for s in fit_on]
        write_json(path, saved)
    return saved


def run_attacks(samples: Sequence[Sample], attacks: Sequence[Attack], victim_metric: Any,
                out_path: str | os.PathLike[str], resume: bool = False, budget: int = 300,
                gold_metric: Any = None, criteria: Criteria | None = None,
                progress: bool = True, fit_on: Sequence[Sample] | None = None,
                fit_size: int = 8) -> JsonlLog:
    """Attack every sample with every attack; one JSONL row per (attack, sample), appended as
    soon as it is done. With ``resume`` finished rows are kept and not recomputed.

    The beats-reference criterion compares with the sample's reference when it has one and
    with the original (human) response otherwise, as Vasselli & Watanabe do (see
    :func:`yardstick` for reference-based victims). Attacks that
    need fitting are fitted on ``fit_on`` (default: the first ``fit_size`` samples, whose
    rows are then marked ``fitting_sample`` and left out of the ASR summary).
    """
    from tqdm import tqdm

    criteria = criteria or Criteria()
    aspect_of_victim = victim_aspect(victim_metric)
    victim = CachedVictim(victim_metric)
    gold = CachedVictim(gold_metric) if gold_metric is not None else None
    log = JsonlLog(out_path, key="key", resume=resume)
    fit_on = list(fit_on) if fit_on is not None else list(samples[:fit_size])
    fitted = fit_attacks(attacks, fit_on, victim, Path(out_path).with_name("fitted.json"))
    fitting_ids = {sid for state in fitted.values() for sid in state.get("fitted_on", [])}
    for attack in attacks:
        if hasattr(attack, "prepare"):
            attack.prepare(samples)  # type: ignore[attr-defined]
    total = len(samples) * len(attacks)
    done = sum(1 for s in samples for a in attacks if result_key(a.name, s.id) in log)
    bar = tqdm(total=total, initial=done, desc=f"attacking {victim.name}", unit="run",
               disable=not progress, dynamic_ncols=True)
    for sample in samples:
        pending = [a for a in attacks if result_key(a.name, sample.id) not in log]
        if not pending:
            continue
        # the original and the reference in one victim call (the same text when there is no
        # separate reference, which the cache then scores once)
        before, reference_score = (float(v) for v in victim.score(
            sample, [sample.response, yardstick(sample, victim_metric)]))
        gold_before = gold.score_one(sample, sample.response) if gold else None
        # run every attack first; static perturbations need no victim, so their texts are
        # scored together in one batched victim call below
        results = []
        for attack in pending:
            calls0, hits0 = victim.counters()
            r = attack.run(sample, victim if attack.needs_victim else None, budget)
            calls1, hits1 = victim.counters()
            r.model_calls += calls1 - calls0
            r.cache_hits += hits1 - hits0
            results.append((attack, r))
        todo = [r for _, r in results if r.applicable and r.adversarial is not None and r.victim_after is None]
        if todo:
            scores, scored = victim.score_with_status(sample, [r.adversarial for r in todo])  # type: ignore[misc]
            for r, v, real in zip(todo, scores, scored, strict=True):
                r.victim_after = float(v)
                r.model_calls += int(real)  # the first result asking for a new text pays for it
                r.cache_hits += int(not real)
        if gold is not None:
            need_gold = [r for _, r in results if r.applicable and r.adversarial is not None and r.gold_after is None]
            if need_gold:
                for r, g in zip(need_gold, gold.score(sample, [r.adversarial for r in need_gold]), strict=True):
                    r.gold_after = float(g)
        rows = []
        for attack, r in results:
            r.victim_before = before if r.victim_before is None else r.victim_before
            r.gold_before = gold_before if r.gold_before is None else r.gold_before
            r.success = criteria.judge(r, reference_score, aspect_of_victim)
            r.meta.setdefault("reference_score", reference_score)
            guard_details = getattr(victim_metric, "details", None)
            if callable(guard_details):  # a guarded victim: its flags for both texts land in the row
                r.meta["guard"] = {"original": guard_details(sample),
                                   "adversarial": guard_details(sample.with_response(r.adversarial))
                                   if r.adversarial is not None else None}
            if getattr(attack, "needs_fit", False) and sample.id in fitting_ids:
                r.meta["fitting_sample"] = True
            rows.append({"key": result_key(attack.name, sample.id), **r.to_dict()})
            bar.update(1)
        log.append(rows)  # one sample's results at a time: a kill loses at most this sample
    bar.close()
    return log


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """ASR per attack under each criterion: successes / applicable results with a verdict."""
    by_attack: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("meta", {}).get("fitting_sample"):
            continue  # a trigger is judged on samples it was not fitted on
        by_attack.setdefault(row["attack"], []).append(row)
    out: dict[str, dict[str, Any]] = {}
    for name, group in sorted(by_attack.items()):
        app = [g for g in group if g["applicable"]]
        asr: dict[str, float | None] = {}
        counts: dict[str, list[int]] = {}
        for c in CRITERIA:
            verdicts = [g["success"].get(c) for g in app if g["success"].get(c) is not None]
            asr[c] = float(np.mean(verdicts)) if verdicts else None
            counts[c] = [int(sum(verdicts)), len(verdicts)]
        out[name] = {
            "family": group[0]["family"], "direction": group[0]["direction"], "n": len(group),
            "applicable": len(app), "asr": asr, "counts": counts,
            "mean_before": float(np.mean([g["victim_before"] for g in app])) if app else None,
            "mean_after": float(np.mean([g["victim_after"] for g in app])) if app else None,
            "model_calls": int(sum(g["model_calls"] for g in group)),
            "cache_hits": int(sum(g["cache_hits"] for g in group)),
        }
    return out


def summary_markdown(summary: dict[str, dict[str, Any]], victim: str) -> str:
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{100 * v:.1f}"

    lines = [f"# Attack success rates against {victim} (%)", "",
             "| attack | family | dir | applicable | mean before | mean after | ASR beats-ref | "
             "ASR expectation | ASR gold | calls | cache hits |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in summary.items():
        mb = "n/a" if s["mean_before"] is None else f"{s['mean_before']:.1f}"
        ma = "n/a" if s["mean_after"] is None else f"{s['mean_after']:.1f}"
        lines.append(f"| {name} | {s['family']} | {s['direction']} | {s['applicable']}/{s['n']} | {mb} | "
                     f"{ma} | {pct(s['asr']['beats_reference'])} | {pct(s['asr']['expectation'])} | "
                     f"{pct(s['asr']['gold'])} | {s['model_calls']} | {s['cache_hits']} |")
    return "\n".join(lines) + "\n"
