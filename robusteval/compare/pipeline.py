"""``compare``: attack every victim in up to eight variants, measure validity, write the report.

Variants of each victim metric:

* ``plain`` — the metric as configured (for a learned victim: the base model trained on
  human judgments only);
* ``guarded`` — ``plain`` behind the configured detectors and policy;
* ``trained`` — learned victims only: the base adversarially trained (see
  :mod:`robusteval.compare.learned`);
* ``guarded+trained`` — ``trained`` behind the guard;
* ``smoothed`` / ``smoothed+trained`` — with a ``smoothing:`` block: ``plain`` / ``trained``
  smoothed by the median over random perturbations (:func:`robusteval.defenses.smooth`), with
  the share of test contexts certified within the tolerance at each radius;
* ``guarded+smoothed`` / ``guarded+smoothed+trained`` — the smoothed variant behind the guard
  (both defenses at once: the guard screens the submitted text, the median is taken over the
  perturbations of what passes).

Plain and trained variants are attacked directly (search attacks query them). A defended
variant (guarded, smoothed) is measured twice: *transfer* replays the adversarial texts found
against its undefended base, scored by the defended metric; *adaptive* reruns attacks that know
the defense -- guard-aware versions of the search and R- attacks against a guard
(:mod:`robusteval.attacks.evasion`), the search attacks scoring every candidate through the
smoothed metric (for the guarded smoothed variants: the guard-aware versions, scoring through
the guarded smoothed metric). Its headline ASR takes the adaptive rows where they exist and the transfer
rows otherwise. Every stage logs append-only under ``--out-dir`` and resumes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robusteval.asr import asr_table, by_direction, counted, direction_of, overall, paired_change
from robusteval.compare.config import CompareConfig, SuiteSpec, VictimSpec
from robusteval.compare.guarding import (
    adversarial_suspicion,
    build_detectors,
    clean_suspicion,
    false_positive_rates,
    roc,
    thresholds_source,
)
from robusteval.compare.judges import flip_checks, phrase_transfer
from robusteval.config.compare import SHIPPED, CorrelationSpec
from robusteval.errors import InputError, RobustevalError
from robusteval.results import fingerprint_data_dir, samples_digest
from robusteval.stats import scoped
from robusteval.types import Sample

VARIANTS = ("plain", "guarded", "trained", "guarded+trained", "smoothed", "smoothed+trained", "guarded+smoothed",
            "guarded+smoothed+trained")
# a defended variant -> the undefended one whose adversarial texts it replays (transfer)
BASE_OF = {"guarded": "plain", "guarded+trained": "trained", "smoothed": "plain", "smoothed+trained": "trained",
           "guarded+smoothed": "plain", "guarded+smoothed+trained": "trained"}
UNAVAILABLE = {"trained": "only learned victims (with a train: block) are adversarially trained",
               "smoothed": "no smoothing: block in the config"}


def _r(x: float | None, nd: int = 6) -> float | None:
    """``nd`` decimals; six significant digits for tiny non-zero values (a calibrated threshold
    just above 0 must not print as 0, which would mean "flag everything")."""
    if x is None or not np.isfinite(x):
        return None
    x = float(x)
    return float(f"{x:.6g}") if 0 < abs(x) < 10.0 ** -nd else round(x, nd)


EXACT = ("threshold", "thresholds")  # kept exact: 1 + 1 ulp means "never fires", not 1


def _rounded(obj: Any) -> Any:
    """Floats rounded (see :func:`_r`) throughout, detector thresholds excepted."""
    if isinstance(obj, float):
        return _r(obj)
    if isinstance(obj, dict):
        return {k: v if k in EXACT else _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_rounded(v) for v in obj]
    return obj


class SuiteData:
    """A suite's samples: the attacked test contexts, the train contexts, correlation sets."""

    def __init__(self, suite: SuiteSpec, cfg: CompareConfig, data_dir: str | None, training: bool = True) -> None:
        """``training=False`` (re-rendering a finished run) checks only the test split: the train
        and val checks guard a run that is about to train."""
        from robusteval import data
        from robusteval.data.select import select
        from robusteval.training.data import split_of

        folder = data_dir or cfg.data_dir
        everything = data.load(suite.dataset, folder)
        vf, tf = suite.split["val_fraction"], suite.split["test_fraction"]
        split = {s.id: split_of(suite.dataset, s, vf, tf, cfg.seed) for s in everything}
        parts = suite_splits(suite, select(everything, suite.select, suite.select_aspect), cfg.seed, training)
        self.train, self.val, self.test = parts["train"], parts["val"], parts["test"][: suite.limit]
        self.correlation: dict[str, list[Sample]] = {}
        for entry in suite.correlation:
            name, test_only = correlation_target(entry, suite.dataset)
            if name == suite.dataset:  # in-domain: every rated response of the test contexts
                self.correlation[f"{name} (test split)"] = [s for s in everything if split[s.id] == "test"]
            elif test_only:  # another in-domain set: its test contexts, split as training splits it
                other = data.load(name, folder)
                self.correlation[f"{name} (test split)"] = [
                    s for s in other if split_of(name, s, vf, tf, cfg.seed) == "test"]
            else:
                self.correlation[name] = data.load(name, folder)


def suite_splits(suite: SuiteSpec, chosen: Sequence[Sample], seed: int,
                 training: bool = True) -> dict[str, list[Sample]]:
    """The suite's selected samples split by conversation for ``seed``; refused (before any work) if
    the test split is empty, or, for a suite with a learned victim (unless ``training`` is
    False), train or val: the rounds train on train and choose on val
    (:func:`robusteval.training.data.check_splits`, as ``robusteval harden`` checks)."""
    from robusteval.training.data import check_splits, split_of

    vf, tf = suite.split["val_fraction"], suite.split["test_fraction"]
    parts: dict[str, list[Sample]] = {"train": [], "val": [], "test": []}
    for s in chosen:
        parts[split_of(suite.dataset, s, vf, tf, seed)].append(s)
    learned = training and any(v.train is not None for v in suite.victims if isinstance(v, VictimSpec))
    check_splits(parts, suite.dataset, vf, tf, seed, f"compare, suite {suite.name}",
                 ("train", "val", "test") if learned else ("test",))
    return parts


def check_seed_splits(cfg: CompareConfig, seeds: Sequence[int], data_dir: str | None = None) -> None:
    """Every suite's split under every seed of a ``--seeds`` run, before the first seed runs:
    seed 5 must not fail after seeds 0-4 took hours."""
    from robusteval import data
    from robusteval.data.select import select

    for suite in cfg.suites:
        chosen = select(data.load(suite.dataset, data_dir or cfg.data_dir), suite.select, suite.select_aspect)
        for seed in seeds:
            suite_splits(suite, chosen, seed)


def correlation_target(entry: str | CorrelationSpec | dict[str, Any], suite_dataset: str) -> tuple[str, bool]:
    """A suite's ``correlation:`` entry -> (the dataset, only its test split). A mapping
    ``{dataset, split}`` says it outright. A string is a dataset name as a whole (``hf:NAME``,
    ``module:attr``, ``dir/a:b.jsonl`` keep their ':'), unless it ends in ``:test``, is no
    dataset itself and the part before ``:test`` is one: then that set's test split. The suite's
    own dataset always means its test split."""
    if isinstance(entry, dict):
        entry = CorrelationSpec(**entry)
    if isinstance(entry, CorrelationSpec):
        return entry.dataset, entry.split == "test" or entry.dataset == suite_dataset
    if entry == suite_dataset:
        return entry, True
    from robusteval import data

    base = entry.removesuffix(":test")
    if base != entry and (base == suite_dataset or data.split_suffix(entry) == (base, "test")):
        return base, True
    return entry, False


def effective_rows(direct: Sequence[dict[str, Any]] | None, transfer: Sequence[dict[str, Any]] | None,
                   adaptive: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The rows a variant's headline ASR is computed from (see the module docstring)."""
    if direct is not None:
        return list(direct)
    redone = {r["attack"] for r in adaptive or []}
    return [r for r in transfer or [] if r["attack"] not in redone] + list(adaptive or [])


#: the fields of a result row that the figures of a variant are computed from (the ASR tables,
#: the score changes and their context clusters, the paired tests, the score distributions);
#: timings, call and cache counts (they depend on where the work ran) and the victim's
#: description (which names local paths) are left out
DIGESTED = ("attack", "family", "dataset", "sample_id", "context_id", "direction", "outcome", "original",
            "adversarial", "victim_before", "victim_after", "gold_before", "gold_after", "success")
DIGESTED_META = ("reference_guarded", "fitting_sample")


def rows_digest(rows: Sequence[dict[str, Any]]) -> str:
    """A SHA-256 of the rows behind a variant's figures, recorded in report.json as
    ``rows_sha256``: a later re-render reads the attack logs back only if they still hold
    exactly these rows (:func:`robusteval.compare.render.rows_of_record`). Only
    :data:`DIGESTED` fields count, floats rounded as the report rounds them, rows in a fixed
    order, values serialized as the logs serialize them; so re-reading a run's own logs gives
    its digest whatever the timings or the folder. (Two separate runs may still differ where a
    score differs in its last float32 digits between processes.)"""
    import hashlib

    from robusteval.results import _jsonable

    picked = [{**{k: r.get(k) for k in DIGESTED},
               "meta": {k: (r.get("meta") or {}).get(k) for k in DIGESTED_META}} for r in rows]
    picked.sort(key=lambda r: (str(r["attack"]), str(r["sample_id"]), str(r["direction"])))
    text = json.dumps(_rounded(json.loads(json.dumps(picked, default=_jsonable))), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def score_distributions(rows: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Victim scores of the clean originals (one per attacked sample) and of their R-
    adversarial versions. ``victim_before`` is always the clean original's score: the runner
    sets it, and a search's own start text (another context's response) is kept apart in
    ``meta["start_score"]``."""
    rm = [r for r in counted(rows) if r.direction == "R-" and r.victim_after is not None]
    clean: dict[str, float] = {}
    for r in rm:
        assert r.victim_before is not None
        # one process gives the same float every time; rows from different processes (the
        # transfer and adaptive stages on different Ray workers, or machines) may differ in the
        # last float32 digits of a model's score (~1e-6 points), which is no disagreement
        if abs(clean.setdefault(r.sample_id, r.victim_before) - r.victim_before) > 1e-3:
            raise RobustevalError(f"sample {r.sample_id!r}: rows disagree on the clean original's score "
                                  f"({clean[r.sample_id]} vs {r.victim_before}, attack {r.attack})")
    return {"clean": [round(float(clean[k]), 3) for k in sorted(clean)],
            "adversarial": sorted(round(float(r.victim_after), 3) for r in rm if r.victim_after is not None)}


def correlations(metric: Any, sets: dict[str, list[Sample]], folder: Path, resume: bool, n_boot: int,
                 seed: int) -> dict[str, Any]:
    from robusteval.metaeval import metaevaluate
    from robusteval.results import read_jsonl, score_with_log, slug

    out: dict[str, Any] = {}
    for name, samples in sets.items():
        log = folder / f"{slug(name)}.jsonl"
        try:
            scores = score_with_log(metric, samples, log, resume, desc=f"scoring {name} with {metric.name}")
        except InputError as exc:  # e.g. a reference-based metric on a set without references
            out[name] = {"_skipped": f"{metric.name} cannot score {name}: {exc}"}
            continue
        out[name] = metaevaluate(samples, scores, n_boot=n_boot, seed=seed)
        if hasattr(metric, "details"):  # guarded: which rated responses the guard touched (from the log,
            rows = {r["id"]: r for r in read_jsonl(log)}  # so a resumed run reports the same)
            flags = [bool((rows[s.id].get("guard") or {}).get("flagged")) for s in samples]
            out[name]["_flagged"] = flagged_summary(samples, flags)
    return out


def flagged_summary(samples: Sequence[Sample], flags: Sequence[bool]) -> dict[str, Any]:
    """Share of the rated responses the guard flagged, and the mean human rating (first aspect,
    normalized to [0, 1] with the dataset's scale) of flagged vs unflagged ones: a guard that
    flags mostly poorly rated text costs little validity."""
    from robusteval.stats import flag_rate
    from robusteval.training.data import normalized

    aspect = next(iter(samples[0].human), None) if samples else None

    def mean_rating(want: bool) -> float | None:
        vals = [normalized(s, aspect) for s, f in zip(samples, flags, strict=True) if f == want and aspect]
        vals = [v for v in vals if v is not None]
        return _r(float(np.mean(vals))) if vals else None

    keys = [s.conversation_key() for s in samples]
    per_context: dict[Any, list[int]] = {}
    for key, f in zip(keys, flags, strict=True):
        c = per_context.setdefault(key, [0, 0])
        c[0] += 1
        c[1] += bool(f)
    return {**flag_rate(flags, keys), "aspect": aspect,
            # [responses, flagged] per conversation, so flags pooled over sets keep their clustering
            "contexts": sorted(per_context.values(), key=lambda c: (-c[1], -c[0])),
            "mean_rating_flagged": mean_rating(True), "mean_rating_unflagged": mean_rating(False)}


def mean_spearman(corr: dict[str, Any]) -> float | None:
    vals = [a["spearman"]["r"] for per in corr.values() for k, a in per.items()
            if not k.startswith("_") and isinstance(a, dict) and a.get("spearman") and a["spearman"]["r"] is not None]
    return _r(float(np.mean(vals))) if vals else None


def adaptive_attacks(suite: SuiteSpec, cfg: CompareConfig) -> list[str]:
    """The attacks rerun guard-aware against guarded variants
    (:class:`robusteval.attacks.evasion.Evasive`): ``suite.adaptive``, by default every
    configured attack that queries its victim or lowers quality (R-); a static R+ rewrite has
    nothing to evade, so its transferred rows stand."""
    from robusteval import attacks

    chosen = attacks.select(suite.attacks, cfg.seed, suite.attack_options)
    if suite.adaptive is None:
        from robusteval.attacks.evasion import worth_rerunning

        return [a.name for a in worth_rerunning(chosen)]
    extra = set(suite.adaptive) - {a.name for a in chosen}
    if extra:
        raise RobustevalError(f"suite {suite.name}: adaptive attacks {sorted(extra)} are not among its attacks")
    return list(suite.adaptive)


def run_victim(victim: VictimSpec, suite: SuiteSpec, sd: SuiteData, cfg: CompareConfig, dets: list[Any],
               thresholds: str | None, adaptive_names: list[str], out: Path, resume: bool,
               data_dir: str | None, built: Any = None) -> tuple[dict[str, Any], list[dict[str, Any]], Any]:
    """The victim's report entry, the guarded variant's transfer rows (their detector
    suspicions of the adversarial texts feed the suite's ROC curves) and the plain metric
    (``built``: the victim already built by :func:`check_victims`, else built here)."""
    from robusteval import attacks, detectors, metrics
    from robusteval.attacks.evasion import evasive
    from robusteval.attacks.runner import run_attacks
    from robusteval.compare.learned import train_victim
    from robusteval.compare.replay import replays
    from robusteval.defenses import smooth
    from robusteval.frames import write_tables

    models: dict[str, Any] = {}
    training: dict[str, Any] | None = None
    family_models: dict[str, Any] = {}
    ablation_models: dict[str, Any] = {}
    if victim.train is not None:
        from robusteval.training.rounds import load_victim

        expected = {"cross-encoder": "cross-encoder", "boolqa": "unieval"}.get(victim.train.module)
        if victim.name != expected:
            raise RobustevalError(f"victim {victim.label}: train.module {victim.train.module!r} trains the "
                                  f"{expected!r} metric, not {victim.name!r}")
        train_spec = victim.train

        def load(export: str) -> Any:
            return load_victim(train_spec.module, export, train_spec.model, victim.options)

        training, models["plain"] = train_victim(victim.train, suite, cfg, {"train": sd.train, "val": sd.val},
                                                 suite.attacks, out / "training", resume, data_dir, load)
        models["trained"] = load(training["trained"]["export"])
        family_models = {f: load(rec["export"]) for f, rec in training["by_family"].items()}
        ablation_models = {a: load(rec["export"]) for a, rec in training["ablations"].items()}
    else:
        models["plain"] = built if built is not None else metrics.load(victim.name, **victim.options)
    for base in list(models):
        models[f"guarded+{base}" if base == "trained" else "guarded"] = detectors.guard(
            models[base], dets, policy=cfg.guard.policy, penalty=cfg.guard.penalty, thresholds=thresholds)
        if cfg.smoothing is not None:
            name = "smoothed+trained" if base == "trained" else "smoothed"
            models[name] = smooth(models[base], cfg.smoothing.perturbation, n=cfg.smoothing.n, seed=cfg.seed,
                                  alpha=cfg.smoothing.alpha, **cfg.smoothing.options)
            models[f"guarded+{name}"] = detectors.guard(models[name], dets, policy=cfg.guard.policy,
                                                        penalty=cfg.guard.penalty, thresholds=thresholds)
    search_names = [a.name for a in attacks.select(adaptive_names, cfg.seed, suite.attack_options) if a.needs_victim]

    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    variants: dict[str, Any] = {}
    counted_rows: dict[str, list[dict[str, Any]]] = {}  # each variant's rows behind its ASR
    for variant in VARIANTS:
        if variant not in models:
            why = "smoothed" if "smoothed" in variant and cfg.smoothing is None else "trained"
            variants[variant] = {"available": False, "reason": UNAVAILABLE[why]}
            continue
        metric, vdir = models[variant], out / variant.replace("+", "_")
        if variant in BASE_OF:
            base_rows = rows[BASE_OF[variant]]["direct"]
            transfer = list(run_attacks(sd.test, replays(base_rows), metric, vdir / "transfer" / "results.jsonl",
                                        resume=resume, budget=cfg.budget, dataset=suite.dataset,
                                      criteria=cfg.criteria))
            adaptive: list[dict[str, Any]] = []
            smoothed = variant.startswith("smoothed")
            if search_names if smoothed else adaptive_names:
                fresh = (attacks.select(search_names, cfg.seed, suite.attack_options) if smoothed else
                         evasive(attacks.select(adaptive_names, cfg.seed, suite.attack_options), **suite.evasion))
                adaptive = list(run_attacks(sd.test, fresh, metric, vdir / "adaptive" / "results.jsonl",
                                            resume=resume, budget=cfg.budget, dataset=suite.dataset,
                                            criteria=cfg.criteria))
            rows[variant] = {"transfer": transfer, "adaptive": adaptive}
            used = effective_rows(None, transfer, adaptive)
        else:
            fresh = attacks.select(suite.attacks, cfg.seed, suite.attack_options)
            direct = list(run_attacks(sd.test, fresh, metric, vdir / "attacks" / "results.jsonl",
                                      resume=resume, budget=cfg.budget, dataset=suite.dataset,
                                      criteria=cfg.criteria))
            rows[variant] = {"direct": direct}
            used = direct
        write_tables(used, vdir / "results", samples=sd.test)  # the rows behind its ASR, texts included
        counted_rows[variant] = used
        corr = correlations(metric, sd.correlation, vdir / "scores", resume, cfg.n_boot, cfg.seed)
        entry: dict[str, Any] = {"available": True, "asr": asr_table(used), "overall": overall(used),
                                 "by_direction": by_direction(used),
                                 "correlation": corr, "mean_spearman": mean_spearman(corr),
                                 "scores": score_distributions(used),
                                 "model_calls": int(sum(r["model_calls"] for r in used)),
                                 "rows_sha256": rows_digest(used)}
        if variant != "plain" and "plain" in counted_rows:
            # the same attacks on the same test samples: paired, per direction (the verdict's test)
            entry["paired_vs_plain"] = paired_change([(counted_rows["plain"], used)], key=direction_of)
        if variant in BASE_OF:
            entry["transfer_vs_adaptive"] = transfer_vs_adaptive(rows[variant]["transfer"], rows[variant]["adaptive"])
        if variant.startswith("smoothed") and cfg.smoothing is not None:
            entry["certified"] = certified(metric, sd.test, cfg)
        variants[variant] = entry
    add_validity(variants, out, sd.correlation, cfg.n_boot, cfg.seed)
    result: dict[str, Any] = {"metric": victim.name, "options": victim.options, "learned": training is not None,
                              "variants": variants}
    if training is not None:
        result["training"] = training_summary(training, out)
        result["generalization"] = generalization(victim, suite, sd, cfg, rows, family_models, out, resume)
        result["ablation"] = ablation(suite, sd, cfg, rows, ablation_models, training, out, resume)
    flips = flip_checks(models["plain"], sd.test, suite.judges)
    if flips is not None:
        result["judge_flips"] = flips
    return result, rows["guarded"]["transfer"], models["plain"]


def add_validity(variants: dict[str, Any], out: Path, sets: dict[str, list[Sample]], n_boot: int, seed: int) -> None:
    """Adds ``validity`` to every available variant: its mean Spearman (over the sets and
    aspects, as :func:`mean_spearman`) with a 95 % interval and, for every variant but plain,
    the change from plain's with a *paired* interval: on the (set, aspect) correlations both
    have (``n_pairs``; ``unpaired`` names the ones only one has), and per set and aspect
    (``per_set[set][aspect]``: ``{change, ci}``). One cluster-bootstrap plan per set
    (whole contexts resampled, :func:`robusteval.stats.cluster_bootstrap_indices`) is shared by
    every variant, each correlation is :func:`robusteval.metaeval.correlation`, and the scores
    are the ones logged under ``<variant>/scores/`` (so a finished run can get them later)."""
    from robusteval.metaeval import correlation, correlation_draws
    from robusteval.metaeval import percentile_interval as interval
    from robusteval.results import read_jsonl, slug
    from robusteval.stats import cluster_bootstrap_indices

    names = [v for v, e in variants.items() if e.get("available")]
    if "plain" not in names or not n_boot:
        return
    # (set, aspect) -> that correlation on the whole set and on each bootstrap draw, per variant:
    # variants pair by key, never by position (one may lack a set or an aspect another has)
    point: dict[str, dict[tuple[str, str], float]] = {v: {} for v in names}
    draws: dict[str, dict[tuple[str, str], list[float]]] = {v: {} for v in names}
    for k, (set_name, samples) in enumerate(sets.items()):
        logs = {v: out / v.replace("+", "_") / "scores" / f"{slug(set_name)}.jsonl" for v in names}
        scores = {}
        for v, p in logs.items():
            if samples and p.is_file():  # no log: the variant's metric cannot score this set
                got = {r["id"]: r.get("score") for r in read_jsonl(p) if "id" in r}
                scores[v] = np.array([np.nan if got.get(s.id) is None else got[s.id] for s in samples], dtype=float)
        if not scores:
            continue
        for a, aspect in enumerate(dict.fromkeys(a for s in samples for a in s.human)):
            idx = np.array([i for i, s in enumerate(samples) if aspect in s.human])
            human = np.array([samples[i].human[aspect] for i in idx], dtype=float)
            plan = cluster_bootstrap_indices([samples[i].conversation_key() for i in idx], n_boot, seed + 7919 * k + a)
            for v, sc in scores.items():
                x = sc[idx]
                whole = correlation(x[np.isfinite(x)], human[np.isfinite(x)], "spearman")
                if whole is None:
                    continue  # not in mean_spearman either
                point[v][(set_name, aspect)] = whole
                draws[v][(set_name, aspect)] = correlation_draws(x, human, plan)

    def means(v: str, keys: Sequence[tuple[str, str]]) -> list[float]:
        """Per draw: the mean over ``keys`` of ``v``'s correlations (NaN when none is defined)."""
        if not keys:
            return [np.nan] * n_boot
        table = np.array([draws[v][key] for key in keys], dtype=float)
        defined = ~np.all(np.isnan(table), axis=0)
        return [float(np.nanmean(table[:, b])) if defined[b] else np.nan for b in range(n_boot)]

    def per_set_changes(v: str, keys: Sequence[tuple[str, str]]) -> dict[str, dict[str, Any]]:
        """Per set and aspect: ``v``'s Spearman minus plain's with the paired interval of the
        per-draw differences (the issue targets bound the drop on *every* set, not the mean)."""
        out: dict[str, dict[str, Any]] = {}
        for set_name, aspect in keys:
            diff = np.array(draws[v][(set_name, aspect)]) - np.array(draws["plain"][(set_name, aspect)])
            out.setdefault(set_name, {})[aspect] = {
                "change": _r(point[v][(set_name, aspect)] - point["plain"][(set_name, aspect)]),
                "ci": interval(diff.tolist())}
        return out

    for v in names:
        entry = {"mean_spearman": {"mean": variants[v].get("mean_spearman"), "ci": interval(means(v, list(draws[v]))),
                                   "ci_method": "context-bootstrap", "n_boot": n_boot}}
        shared = [key for key in draws["plain"] if key in draws[v]]
        if v != "plain" and shared:
            entry["change_vs_plain"] = {
                "mean": _r(float(np.mean([point[v][key] - point["plain"][key] for key in shared]))),
                "ci": interval([m - p for m, p in zip(means(v, shared), means("plain", shared), strict=True)]),
                "ci_method": "paired context-bootstrap", "n_boot": n_boot, "n_pairs": len(shared),
                "unpaired": sorted(f"{s}/{a}" for s, a in set(draws[v]) ^ set(draws["plain"])),
                "per_set": per_set_changes(v, shared)}
        variants[v]["validity"] = entry


def certified(metric: Any, samples: Sequence[Sample], cfg: CompareConfig) -> dict[str, Any]:
    """Share of the attacked test contexts whose smoothed score is certified within
    ``smoothing.tolerance`` points at each of ``smoothing.radii`` (or why there is no certificate)."""
    from robusteval.defenses import certified_fraction

    spec = cfg.smoothing
    assert spec is not None
    if metric.perturbation.certifies is None:
        return {"tolerance": spec.tolerance, "note": f"the {spec.perturbation} perturbation has no certificate"}
    radii = metric.certified_radius(samples, spec.tolerance, max_radius=max(spec.radii, default=0))
    return {"tolerance": spec.tolerance, "alpha": spec.alpha, "covers": metric.perturbation.certifies,
            "radius": {str(r): certified_fraction(radii, r, [s.conversation_key() for s in samples])
                       for r in spec.radii}}


def transfer_vs_adaptive(transfer: list[dict[str, Any]], adaptive: list[dict[str, Any]]) -> dict[str, Any]:
    """Per adaptive attack: ASR of the replayed texts and of the rerun with the guard in the loop."""
    from robusteval.asr import attack_key

    names = sorted({r["attack"] for r in adaptive})
    t, a = asr_table([r for r in transfer if r["attack"] in names], attack_key), asr_table(adaptive, attack_key)
    return {n: {"family": next(r["family"] for r in adaptive if r["attack"] == n),
                "transfer": (t.get(n) or {}).get("primary"), "adaptive": (a.get(n) or {}).get("primary")}
            for n in names}


def generalization(victim: VictimSpec, suite: SuiteSpec, sd: SuiteData, cfg: CompareConfig,
                   rows: dict[str, dict[str, list[dict[str, Any]]]], family_models: dict[str, Any], out: Path,
                   resume: bool) -> dict[str, Any]:
    """ASR (primary criterion) per attack family Y of models trained on family X's examples,
    with ``none`` (the base) and ``all`` (the trained variant) as reference rows."""
    from robusteval import attacks
    from robusteval.attacks.runner import run_attacks

    table: dict[str, dict[str, Any]] = {"none": asr_table(rows["plain"]["direct"])}
    for fam, metric in family_models.items():
        fresh = attacks.select(suite.attacks, cfg.seed, suite.attack_options)
        log = run_attacks(sd.test, fresh, metric, out / "generalization" / fam / "results.jsonl", resume=resume,
                          budget=cfg.budget, dataset=suite.dataset, criteria=cfg.criteria)
        table[f"trained on {fam}"] = asr_table(list(log))
    table["all"] = asr_table(rows["trained"]["direct"])
    columns = sorted({k for t in table.values() for k in t})
    return {"train_families": list(family_models), "attack_families": columns,
            "asr": {row: {c: (t.get(c) or {}).get("primary", {}).get("asr") for c in columns}
                    for row, t in table.items()},
            "primary": {row: {c: (t.get(c) or {}).get("primary") for c in columns} for row, t in table.items()}}


def ablation(suite: SuiteSpec, sd: SuiteData, cfg: CompareConfig, rows: dict[str, dict[str, list[dict[str, Any]]]],
             models: dict[str, Any], training: dict[str, Any], out: Path, resume: bool) -> dict[str, Any]:
    """ASR per attack family (primary criterion, with intervals) and test Spearman of the hardened
    model with one part switched off, beside the base and the full hardened model."""
    from robusteval import attacks
    from robusteval.attacks.runner import run_attacks

    if not models:
        return {}
    logs = {"base": rows["plain"]["direct"], "hardened": rows["trained"]["direct"]}
    spearman = {"base": training["base"]["test"].get("test_spearman"),
                "hardened": training["trained"]["test"].get("test_spearman")}
    for name, metric in models.items():
        fresh = attacks.select(suite.attacks, cfg.seed, suite.attack_options)
        log = run_attacks(sd.test, fresh, metric, out / "ablation" / name / "results.jsonl", resume=resume,
                          budget=cfg.budget, dataset=suite.dataset, criteria=cfg.criteria)
        logs[name] = list(log)
        spearman[name] = training["ablations"][name]["test"].get("test_spearman")
    tables = {name: asr_table(rows_) for name, rows_ in logs.items()}
    columns = sorted({k for t in tables.values() for k in t})
    return {"rows": list(tables), "attack_families": columns, "test_spearman": spearman,
            "primary": {row: {c: (t.get(c) or {}).get("primary") for c in columns} for row, t in tables.items()},
            "by_direction": {row: by_direction(rows_) for row, rows_ in logs.items()}}


def training_summary(training: dict[str, Any], out: Path) -> dict[str, Any]:
    def rel_path(p: str | None) -> str | None:
        return p if not p or not Path(p).is_relative_to(out) else str(Path(p).relative_to(out))

    def rel(rec: dict[str, Any]) -> dict[str, Any]:
        return {**rec, "export": rel_path(rec["export"])}

    return {"base": rel(training["base"]), "trained": rel(training["trained"]),
            "by_family": {k: rel(v) for k, v in training["by_family"].items()},
            "ablations": {k: rel(v) for k, v in training["ablations"].items()},
            **{k: training[k] for k in ("module", "train_attacks", "held_out", "train_contexts_attacked",
                                         "val_contexts_attacked")}}


def check_names(cfg: CompareConfig) -> None:
    """Every dataset, metric, attack, detector and clean set the config names exists: fail in a
    second, not after an hour of calibration."""
    from robusteval import data, detectors, metrics
    from robusteval.config.parsing import ConfigError, split_csv
    from robusteval.detectors.clean import check_clean
    from robusteval.errors import UnknownNameError
    from robusteval.training.data import parse_spec

    listed: list[str] = []
    for d in cfg.guard.detectors:
        name = d if isinstance(d, str) else (d.get("name") if isinstance(d, dict) else None)
        try:
            entry = detectors.info(str(name))["name"]  # registered, a plugin's entry point or module:attr
        except UnknownNameError as exc:
            raise UnknownNameError(f"guard.detectors: {exc}") from None
        # keyed as the guard keys it, by the detector's own name: "nonalnum" and its class as
        # module:Class are one detector twice
        own = getattr(detectors.DETECTORS.get(str(name)), "name", None)
        listed.append(own if isinstance(own, str) else entry)
    twice = sorted({n for n in listed if listed.count(n) > 1})
    if twice:  # what detectors.guard refuses (robusteval.detectors.base.check_unique), here before any work
        from robusteval.detectors.base import ONCE

        raise ConfigError(f"guard.detectors lists {twice[0]!r} {listed.count(twice[0])} times: {ONCE}")
    if cfg.guard.thresholds and cfg.guard.thresholds != SHIPPED:
        # a missing or malformed file, or thresholds calibrated for other detector settings, fail
        # before the run folder is claimed; so does one fitted on other clean halves than the
        # held-out ones the run measures false positives on
        detectors.resolve(cfg.guard.detectors, str(cfg.guard.thresholds))
        from robusteval.detectors.clean import check_clean_split

        check_clean_split(str(cfg.guard.thresholds))
    for name in [*split_csv(cfg.guard.calibrate.get("clean")), *cfg.guard.fpr_sets]:
        check_clean(name)  # a shipped clean set, or any dataset: a file, hf:NAME, module:attr
    for suite in cfg.suites:
        data.info(suite.dataset)
        for entry in suite.correlation:
            data.info(correlation_target(entry, suite.dataset)[0])
        adaptive_attacks(suite, cfg)  # unknown attacks and adaptive names outside the suite fail here
        for v in suite.victims:
            metrics.info(v.name)
            if v.train is not None:
                for spec in v.train.data.get("datasets", []):
                    data.info(parse_spec(spec)[0])


def check_victims(cfg: CompareConfig, suite_data: dict[str, SuiteData]) -> dict[tuple[str, str], Any]:
    """Every victim that is not trained in the run can score every test sample of its suite
    (``Metric.check_sample``: a reference-based metric on a set without references, a judge
    against a missing fact), checked before the run folder is claimed: otherwise the first
    victims' attacks run for an hour and the run stops at that victim. The error names the
    suite, the victim, the sample and the field. A trained victim is built by the run. (A
    correlation set a metric cannot score is reported as skipped, not refused.)

    Returns the metrics of the **first** suite, by (suite, victim label), for the run to use
    rather than load them again. A later suite's victims are built for the check and released:
    the run builds each again just before its suite, so the models of every suite are never in
    memory at once (a second load costs seconds; several suites of large models could exhaust
    the memory)."""
    import gc

    from robusteval import metrics
    from robusteval.config.parsing import ConfigError

    def checked(suite: Any, v: Any) -> Any:
        metric = metrics.load(v.name, **v.options)
        check = getattr(metric, "check_sample", None)
        for sample in suite_data[suite.name].test if callable(check) else ():
            try:
                check(sample)
            except InputError as exc:
                raise ConfigError(f"suite {suite.name!r}: victim {v.label!r} cannot score the suite's test "
                                  f"samples ({exc}); change its options (e.g. against: context, or a "
                                  "baseline for a pairwise judge) or the dataset") from None
        return metric

    built: dict[tuple[str, str], Any] = {}
    for i, suite in enumerate(cfg.suites):
        for v in suite.victims:
            if v.train is not None:
                continue
            if i == 0:
                built[(suite.name, v.label)] = checked(suite, v)
            else:  # no reference is left once it returns (its bound check_sample included)
                checked(suite, v)
                gc.collect()  # a model held in reference cycles goes now, before the next loads
    return built


def run_compare(cfg: CompareConfig, out_dir: str | Path, resume: bool = False,
                data_dir: str | None = None) -> dict[str, Any]:
    """Everything in the module docstring; returns the report (also written as report.json)."""
    from robusteval.results import JsonlLog, claim_folder, refuse_occupied, run_fingerprint, slug

    check_names(cfg)
    refuse_occupied(Path(out_dir), resume)
    # the data and its splits before the run folder is made: a split that cannot work fails now,
    # and the fixed config is not refused as "another run" in the same folder
    suite_data = {suite.name: SuiteData(suite, cfg, data_dir) for suite in cfg.suites}
    built = check_victims(cfg, suite_data)

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    folder = fingerprint_data_dir(data_dir or cfg.data_dir)
    from robusteval.compare.learned import data_args
    from robusteval.detectors.clean import CLEAN_SPLIT
    from robusteval.detectors.defaults import version
    from robusteval.training.data import SPLIT_SCHEME, read_digest

    # what each suite read: its attacked contexts, and every dataset a learned victim trains or
    # tests on, ratings included: a dataset edited in place is another run, not one whose
    # trained models and logs are reused
    read = {suite.name: {"attacked": samples_digest(suite_data[suite.name].test),
                         **{f"trained {v.label}": read_digest(data_args(v.train, suite, cfg, data_dir),
                                                              v.train.pretrain)
                            for v in suite.victims if isinstance(v, VictimSpec) and v.train is not None}}
            for suite in cfg.suites}
    # the package's default thresholds apply to every detector a config leaves at its default;
    # a guard calibrated in the run (guard/thresholds.json, reused on resume) fits one clean half
    claim_folder(out, run_fingerprint(command="compare", config=cfg.raw, data_dir=folder,
                                      shipped_thresholds=version(), split=SPLIT_SCHEME,
                                      clean_split=CLEAN_SPLIT, suites_read=read), resume)
    glog = JsonlLog(out / "guard" / "suspicion.jsonl", key="key", resume=resume)
    dets, thresholds = build_detectors(cfg, out / "guard", glog, data_dir)
    clean, clean_clusters = clean_suspicion(dets, cfg, glog, data_dir)
    per_detector, source = thresholds_source(dets, thresholds, out)
    guard: dict[str, Any] = {
        "detectors": [d.name for d in dets], "policy": cfg.guard.policy, "penalty": cfg.guard.penalty,
        "thresholds": per_detector, "thresholds_file": source,
        "false_positive_rate": false_positive_rates(dets, clean, clean_clusters), "roc": {}}
    pooled_clean = {d.name: np.concatenate([c[d.name][0] for c in clean.values()]) if clean else np.array([])
                    for d in dets}
    pooled_keys = [scoped(set_name, k) for set_name in clean for k in clean_clusters[set_name]]
    suites: dict[str, Any] = {}
    for suite in cfg.suites:
        sd = suite_data[suite.name]
        adaptive = adaptive_attacks(suite, cfg)
        victims: dict[str, Any] = {}
        guarded_rows: list[dict[str, Any]] = []
        plain: dict[str, Any] = {}
        dirs: dict[str, Path] = {}
        for victim in suite.victims:
            vout = dirs[victim.label] = out / slug(suite.name) / slug(victim.label)
            victims[victim.label], transfer, plain[victim.label] = run_victim(
                victim, suite, sd, cfg, dets, thresholds, adaptive, vout, resume, data_dir,
                built.pop((suite.name, victim.label), None))
            guarded_rows = guarded_rows or transfer  # the first victim's adversarial texts make the ROC positives
        phrase = phrase_transfer(sd.test, plain, dirs, out / slug(suite.name) / "phrase-transfer", resume,
                                 cfg.budget, suite.dataset, cfg.criteria, cfg.seed) if len(plain) > 1 else {}
        adv, adv_keys = adversarial_suspicion(guarded_rows, [d.name for d in dets])
        guard["roc"][suite.name] = {d.name: {**roc(pooled_clean[d.name], adv[d.name], negative_clusters=pooled_keys,
                                                   positive_clusters=adv_keys, n_boot=cfg.n_boot),
                                             "threshold": per_detector[d.name]} for d in dets}
        # n_attacked counts responses (one per context under best-per-context, several under
        # select: all); the conversations they come from are what the intervals resample
        suites[suite.name] = {"dataset": suite.dataset, "n_attacked": len(sd.test),
                              "n_attacked_conversations": len({s.conversation_key() for s in sd.test}),
                              "n_train_contexts": len(sd.train),
                              "attacks": suite.attacks, "adaptive": adaptive,
                              "correlation_sets": {k: len(v) for k, v in sd.correlation.items()},
                              "victims": victims, **({"phrase_transfer": phrase} if phrase else {})}
    # rows that rest on a failed LLM request (a judge under on_llm_error: midpoint): the report
    # names them, and a resume asks again for exactly those
    from robusteval.results import failed_rows

    failed = failed_rows(out)
    # "split": what the train / val / test split keeps together (runs split otherwise do not pair)
    return _rounded({"schema": "robusteval.compare/2", "name": cfg.name, "seed": cfg.seed, "budget": cfg.budget,
                     "criteria": cfg.criteria.describe(), "split": SPLIT_SCHEME,
                     "variants": list(VARIANTS), "guard": guard, "suites": suites,
                     **({"llm_failed": failed} if failed else {})})
