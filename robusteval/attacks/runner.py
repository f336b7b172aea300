"""Run attacks over samples against a victim, append results as they finish, summarize ASR."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robusteval import execution
from robusteval.aspects import metric_aspect
from robusteval.attacks.base import Attack, ResultRow
from robusteval.attacks.criteria import Criteria
from robusteval.attacks.victim import CachedVictim
from robusteval.errors import DataFormatError
from robusteval.metrics.identity import model_identity
from robusteval.metrics.inner import failed_since, failure_marks
from robusteval.results import (
    JsonlLog,
    counter_delta,
    counters,
    merge_counts,
    metric_identity,
    read_jsonl,
    run_fingerprint,
    samples_digest,
    write_json,
)
from robusteval.text import is_blank
from robusteval.types import Sample


def read_results(path: str | os.PathLike[str]) -> tuple[list[ResultRow], str | None]:
    """Rows of a ``results.jsonl`` written by :func:`run_attacks` (or its folder), typed, and
    the dataset they were run on (recorded in every row; None when the rows do not say)."""
    p = Path(path)
    p = p / "results.jsonl" if p.is_dir() else p
    if not p.is_file():
        raise DataFormatError(p, "no attack results here (expected a results.jsonl or its folder)")
    latest: dict[str, ResultRow] = {}  # a key written twice (two writers) is read once, its later row
    for n, raw in enumerate(read_jsonl(p, dedupe=False), 1):
        try:
            row = ResultRow.from_dict(raw)
        except (TypeError, ValueError) as exc:
            raise DataFormatError(p, f"not an attack-runner result row: {exc}", line=n + 1) from None
        latest[row.key or f"#{n}"] = row
    rows = list(latest.values())
    datasets = {r.dataset for r in rows if r.dataset}
    return rows, (datasets.pop() if len(datasets) == 1 else None)


def yardstick(sample: Sample, victim_metric: Any) -> str:
    """The text an R- result must score at least as high as to "beat the reference": the
    sample's reference, or the original response when there is none -- and also when the victim
    compares responses *with* the reference (BLEU, ROUGE, BERTScore against references), which
    would score the reference against itself and make the test unwinnable."""
    against_reference = bool(getattr(victim_metric, "requires_reference", False)) and \
        getattr(victim_metric, "against", "reference") in ("reference", "first_reference")
    return sample.response if against_reference else (sample.reference or sample.response)


def context_id(sample: Sample) -> str:
    """A short stable id of the sample's conversation (its context, unless the dataset rates
    several turns of one dialogue: :meth:`Sample.conversation_key`); rows sharing it are
    resampled together."""
    import hashlib

    return hashlib.sha1(sample.conversation_key().encode("utf-8", "surrogatepass")).hexdigest()[:12]


def result_key(attack: str, sample_id: str) -> str:
    return f"{attack}|{sample_id}"


def fit_attacks(attacks: Sequence[Attack], fit_on: Sequence[Sample], victim: CachedVictim,
                path: Path) -> dict[str, Any]:
    """Fit the attacks that need it (universal triggers) once; the fitted state is saved to
    ``path`` and reloaded on resume, so a resumed run attacks with the same trigger. A state
    fitted while a victim request failed (a midpoint fallback score steered the search) is saved
    with ``llm_failed`` and fitted again by a resume; the rows attacked with the old state are
    then made again (their ``meta.input_version`` is the state's digest: :meth:`Attack.row_version`)."""
    saved = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    for attack in attacks:
        if not getattr(attack, "needs_fit", False):
            continue
        if attack.name in saved and not saved[attack.name].get("llm_failed"):
            attack.load_fitted(saved[attack.name])  # type: ignore[attr-defined]
            continue
        marks = failure_marks(victim, attack)
        attack.fit(fit_on, victim)  # type: ignore[attr-defined]
        saved[attack.name] = attack.fitted_state()  # type: ignore[attr-defined]
        saved[attack.name]["fitted_on"] = [s.id for s in fit_on]
        if failed := sum(failed_since(marks, victim, attack).values()):
            saved[attack.name]["llm_failed"] = failed
        write_json(path, saved)
    return saved


def attack_identity(attack: Attack) -> dict[str, Any]:
    """An attack's name, class and constructor arguments, for run fingerprints. Runtime state
    (a search's pool, a fitted trigger) is left out: it does not change which run this is.
    Objects passed as arguments (a gold metric, a generator) enter by their reproducibility
    string or class; long values (a replay's recorded rows) by digest."""
    import hashlib

    def plain(v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        if isinstance(v, str):  # a local model (a classifier, an MLM, embeddings) by its weights, not its path
            named = model_identity(v)
            return named if named.startswith("local:") else v
        if v is None or isinstance(v, int | float | bool):
            return v
        return metric_identity(v)

    opts = plain(attack.init_options)
    for part in ("args", "kwargs"):
        items = opts[part].items() if part == "kwargs" else enumerate(opts[part])
        for k, v in list(items):
            text = json.dumps(v, ensure_ascii=False, sort_keys=True)
            if len(text) > 200:
                opts[part][k] = {"sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:20],
                                 "len": len(text)}
    return {"name": attack.name, "class": f"{type(attack).__module__}.{type(attack).__qualname__}", "options": opts}


BLANK_ORIGINAL = ("the clean original is empty or invisible-only: the metric scored it with its on_empty fallback, "
                  "so no attack on it can be judged")
FLOORING = ("floor", "sanitize")  # guard policies that score a flagged text 0


def original_floored(victim_metric: Any, sample: Sample, before: float) -> bool:
    """True when a guarded victim floored the clean original itself (its guard flagged it and
    the policy set its score to 0; ``sanitize`` floors what cleaning leaves flagged, as ``floor``
    does): an attack on it cannot be judged -- every text would tie with the floored original."""
    details = getattr(victim_metric, "details", None)
    found = details(sample) if callable(details) else None
    return bool(found and found.get("flagged")) and getattr(victim_metric, "policy", None) in FLOORING \
        and before == 0.0


def reference_guarded(victim: Any, victim_metric: Any, sample: Sample, ref_text: str,
                      reference_score: float) -> str | None:
    """``"floored"`` or ``"rejected"`` when the guard around the victim floored or refused the
    sample's reference (a text of its own, not the original response), else None. The R- test
    compares attack texts with that reference's score: a floored one (0) would be beaten by any
    text, a refused one stands in with the original's score, so neither can judge it."""
    if ref_text == sample.response:
        return None  # the original itself: original_floored / original_rejected handle it
    if victim.is_rejected(sample, ref_text):
        return "rejected"
    if original_floored(victim_metric, sample.with_response(ref_text), reference_score):
        return "floored"
    return None


def run_attacks(samples: Sequence[Sample], attacks: Sequence[Attack], victim_metric: Any,
                out_path: str | os.PathLike[str], resume: bool = False, budget: int = 300,
                gold_metric: Any = None, criteria: Criteria | None = None,
                progress: bool = True, fit_on: Sequence[Sample] | None = None,
                fit_size: int = 8, dataset: str | None = None,
                fingerprint: dict[str, Any] | None = None) -> JsonlLog:
    """Attack every sample with every attack; one JSONL row (:class:`ResultRow`) per
    (attack, sample), appended as soon as the sample is done. With ``resume`` finished rows
    are kept and not recomputed -- but only when the log was written by the same run: the
    victim's reproducibility string, the attacks and their options, the budget, the criteria,
    the samples (dataset, split, limit) and ``fingerprint`` (the caller's settings) must all
    match, else :class:`~robusteval.errors.RunMismatchError` names what differs. A sample during
    whose attacks a victim or gold request failed (a judge's ``on_llm_error="midpoint"``
    fallback, which may have decided any of its rows) has its rows marked ``meta.llm_failed``,
    and a resume attacks it again; its new last row takes over the old rows' ``victim_counters``.

    The beats-reference criterion compares with the sample's reference when it has one and
    with the original (human) response otherwise, as Vasselli & Watanabe do (see
    :func:`yardstick` for reference-based victims). Attacks that
    need fitting are fitted on ``fit_on`` (default: the first ``fit_size`` samples, whose
    rows are then marked ``fitting_sample`` and left out of the ASR summary).
    """
    from tqdm import tqdm

    from robusteval.metrics.function import ensure_metric

    victim_metric = ensure_metric(victim_metric)  # a name, module:attr or plain function works too
    if gold_metric is not None and not isinstance(gold_metric, CachedVictim):
        gold_metric = ensure_metric(gold_metric)
    criteria = criteria or Criteria()
    victim = CachedVictim(victim_metric)
    # a CachedVictim passed as the gold is used as is: one attack command with several victims
    # shares it, so the gold judges each (sample, text) once across victims
    gold = gold_metric if isinstance(gold_metric, CachedVictim) or gold_metric is None else CachedVictim(gold_metric)
    victim_repro = metric_identity(victim_metric)
    gold_identity = metric_identity(gold.metric) if gold is not None else None
    fp = run_fingerprint(victim=victim_repro, gold=gold_identity,
                         attacks=[attack_identity(a) for a in attacks], budget=budget,
                         criteria=criteria.describe(), dataset=dataset, samples=samples_digest(samples),
                         fit_size=fit_size, fit_on=[s.id for s in fit_on] if fit_on is not None else None,
                         **(fingerprint or {}))
    log = JsonlLog(out_path, key="key", resume=resume, fingerprint=fp)
    fit_on = list(fit_on) if fit_on is not None else list(samples[:fit_size])
    for attack in attacks:  # before fitting: a universal phrase fits on other responses
        if hasattr(attack, "prepare"):
            attack.prepare(samples)  # type: ignore[attr-defined]
    fitted = fit_attacks(attacks, fit_on, victim, Path(out_path).with_name("fitted.json"))
    fitting_ids = {sid for state in fitted.values() for sid in state.get("fitted_on", [])}
    for attack in attacks:
        if isinstance(getattr(attack, "criteria", None), Criteria):
            attack.criteria = criteria  # type: ignore[attr-defined]  # AdvEval stops at the run's criterion
    total = len(samples) * len(attacks)
    # a sample whose victim or gold request failed (a midpoint fallback score) is attacked again
    retry = {str(r["sample_id"]) for r in log if (r.get("meta") or {}).get("llm_failed")}

    def finished(attack: Attack, sample: Sample) -> bool:
        row = log.rows.get(result_key(attack.name, sample.id))
        return (row is not None and sample.id not in retry
                and (row.get("meta") or {}).get("input_version") == attack.row_version(sample))

    done = sum(1 for s in samples for a in attacks if finished(a, s))
    bar = tqdm(total=total, initial=done, desc=f"attacking {victim.name}", unit="run",
               disable=not progress, dynamic_ncols=True)
    units = [(sample, pending) for sample in samples
             if (pending := [a.name for a in attacks if not finished(a, sample)])]
    settings = AttackSettings(budget=budget, criteria=criteria, fitting_ids=frozenset(fitting_ids), dataset=dataset,
                              victim_repro=victim_repro)
    for _, rows in execution.current().map(AttackWorker, [victim, gold, list(attacks), settings], "run",
                                           units, desc=f"attacking {victim.name}",
                                           label=lambda unit: f"sample {unit[0].id!r}"):
        # rows made again keep the run's history: the counters of the rows they replace
        old = [log.rows[k]["meta"].get("victim_counters") or {} for k in (str(r["key"]) for r in rows)
               if k in log.rows]
        if any(old):
            meta = rows[-1]["meta"]
            meta["victim_counters"] = merge_counts(*old, meta.get("victim_counters") or {})
        log.append(rows, replace=True)  # one sample's results at a time: a kill loses at most those in flight
        bar.update(len(rows))
    bar.close()
    from robusteval.frames import export_tables

    export_tables(out_path, samples)  # results.csv and results.parquet beside it, with the texts
    return log


@dataclass(frozen=True)
class AttackSettings:
    """What every unit of one :func:`run_attacks` call shares, beside the victim and the attacks."""

    budget: int
    criteria: Criteria
    fitting_ids: frozenset[str]
    dataset: str | None
    victim_repro: str


class AttackWorker:
    """Attacks one sample with its pending attacks: the unit of :func:`run_attacks` an
    executor runs, built once per worker. In process it uses the caller's cached victim and
    gold, as the runner always did (their caches hold what fitting scored); another process
    gets them with empty caches (:meth:`CachedVictim.__reduce__`)."""

    def __init__(self, victim: CachedVictim, gold: CachedVictim | None, attacks: Sequence[Attack],
                 settings: AttackSettings) -> None:
        self.victim_metric = victim.metric
        self.victim = victim
        self.gold = gold
        self.attacks = {a.name: a for a in attacks}
        self.settings = settings
        self.aspect = metric_aspect(victim.metric)
        self.crit = settings.criteria.describe()  # once, not per sample

    def run(self, unit: tuple[Sample, list[str]]) -> list[dict[str, Any]]:
        sample, names = unit
        victim, gold, victim_metric, st = self.victim, self.gold, self.victim_metric, self.settings
        criteria, crit = st.criteria, self.crit
        # failures of the victim, the gold and any judge an attack holds (AdvEval's own)
        counters0 = counters(victim_metric)
        held = (victim_metric, gold, *(self.attacks[n] for n in names))
        marks = failure_marks(*held)
        # the original and the reference in one victim call (the same text when there is no
        # separate reference, which the cache then scores once)
        ref_text = yardstick(sample, victim_metric)
        before, reference_score = (float(v) for v in victim.score(sample, [sample.response, ref_text]))
        floored = original_floored(victim_metric, sample, before)
        blank = is_blank(sample.response)  # scored at all only by a metric's on_empty fallback
        refused = victim.is_rejected(sample, sample.response)
        ref_guarded = reference_guarded(victim, victim_metric, sample, ref_text, reference_score)
        gold_before = gold.score_one(sample, sample.response) if gold else None
        # run every attack first; static perturbations need no victim, so their texts are
        # scored together in one batched victim call below
        results = []
        for attack in (self.attacks[n] for n in names):
            if blank:  # nothing to attack: the original was scored only by the metric's fallback
                results.append((attack, attack.skipped(sample, BLANK_ORIGINAL)))
                continue
            calls0, hits0 = victim.counters()
            r = attack.run(sample, victim if attack.needs_victim else None, st.budget)
            calls1, hits1 = victim.counters()
            r.model_calls += calls1 - calls0
            r.cache_hits += hits1 - hits0
            results.append((attack, r))
        todo = [r for _, r in results if r.outcome == "attacked" and r.adversarial is not None
                and r.victim_after is None]
        if todo:
            scores, scored = victim.score_with_status(sample, [r.adversarial for r in todo])  # type: ignore[misc]
            for r, v, real in zip(todo, scores, scored, strict=True):
                r.victim_after = float(v)
                r.model_calls += int(real)  # the first result asking for a new text pays for it
                r.cache_hits += int(not real)
        if gold is not None:
            for _, r in results:  # the configured gold judges every text, AdvEval's included
                if r.gold_after is not None:
                    r.meta["attack_gold_after"], r.gold_after = r.gold_after, None
            need_gold = [r for _, r in results if r.outcome == "attacked" and r.adversarial is not None]
            if need_gold:
                for r, g in zip(need_gold, gold.score(sample, [r.adversarial for r in need_gold]), strict=True):
                    r.gold_after = float(g)
        rows = []
        for attack, r in results:
            # always the clean original's scores from this run's victim and gold; an attack's own
            # view (AdvEval's internal judge, a search's start text) stays in its meta
            if r.victim_before is not None and r.victim_before != before:
                r.meta["attack_victim_before"] = r.victim_before
            if r.gold_before is not None and gold is not None:
                r.meta["attack_gold_before"] = r.gold_before
            r.victim_before = before
            r.gold_before = gold_before if gold is not None else r.gold_before
            if refused and r.outcome == "attacked":
                r.outcome, r.note, r.victim_before = ("original_rejected", "the guard refused the clean original",
                                                      None)
                r.victim_after = None
            elif floored and r.outcome == "attacked":
                r.outcome, r.note = "original_floored", "the guard floored the clean original to 0"
            elif r.outcome == "attacked" and victim.is_rejected(sample, r.adversarial):
                r.outcome, r.note, r.victim_after = "rejected", "the guard refused the adversarial text", None
            r.success = criteria.judge(r, None if ref_guarded else reference_score, self.aspect)
            r.meta.setdefault("reference_score", reference_score)
            # a refused text's row too: it leaves the column's n for the same reason
            if ref_guarded and r.direction == "R-" and r.outcome in ("attacked", "rejected"):
                r.meta["reference_guarded"] = ref_guarded
                r.note = (r.note + "; " if r.note else "") + (f"the guard {ref_guarded} the reference the "
                                                              "R- test compares with: no beats-reference verdict")
            guard_details = getattr(victim_metric, "details", None)
            if callable(guard_details):  # a guarded victim: its flags for both texts land in the row
                r.meta["guard"] = {"policy": getattr(victim_metric, "policy", None),
                                   "original": guard_details(sample),
                                   "adversarial": guard_details(sample.with_response(r.adversarial))
                                   if r.adversarial is not None else None}
            if getattr(attack, "needs_fit", False) and sample.id in st.fitting_ids:
                r.meta["fitting_sample"] = True
            r.key, r.dataset, r.victim, r.victim_repro = (result_key(attack.name, sample.id), st.dataset,
                                                           victim.name, st.victim_repro)
            r.context_id, r.criteria = context_id(sample), crit
            if (version := attack.row_version(sample)) is not None:
                r.meta["input_version"] = version
            rows.append(r.to_dict())
        delta = counter_delta(counters0, counters(victim_metric))
        if delta and rows:
            rows[-1]["meta"]["victim_counters"] = delta
        failed = failed_since(marks, *held)[sample.id]  # a judge an attack built meanwhile too
        if failed:  # a fallback score may have decided any of them: a resume attacks the sample again
            for row in rows:
                row["meta"]["llm_failed"] = failed
        return rows
