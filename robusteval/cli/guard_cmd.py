"""``robusteval guard calibrate | evaluate`` and ``robusteval detectors list``.

``guard calibrate`` fits each detector's threshold on the calibration half of the clean sets
(human references and well-rated human responses) to a target false-positive rate and writes
``<out-dir>/thresholds.json``, which ``guard(..., thresholds=)`` and ``load(...,
thresholds=)`` read. ``guard evaluate`` reads attack-runner results (``results.jsonl`` or its
folder; the dataset comes from the ``summary.json`` beside it) and reports, per detector and
for their combination, the detection rate per attack family and the false-positive rate on
the held-out half of the clean sets: ``evaluation.json`` and ``evaluation.md``. Both keep
every computed suspicion in ``<out-dir>/suspicion.jsonl``; ``--resume`` reuses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robusteval.cli.common import Command, json_flag, print_listing, provenance, write_outputs
from robusteval.config.guard import CALIBRATE_ALIASES, EVALUATE_ALIASES, CalibrateConfig, EvaluateConfig, GuardCommon
from robusteval.config.parsing import to_dict
from robusteval.errors import RobustevalError
from robusteval.results import JsonlLog, write_json


def _detector_specs(cfg: GuardCommon) -> list[Any]:
    if cfg.detectors:
        return list(cfg.detectors)
    from robusteval import detectors

    return detectors.names()


def clean_set(spec: str, split: str, data_dir: str | None) -> list[Any]:
    """A shipped clean set (``robusteval.detectors.clean``), or any dataset -- a name, a file,
    hf:NAME, module:attr -- whose texts are taken as clean, halved the same way (by conversation)."""
    from robusteval.detectors.clean import load_clean

    return load_clean(spec, split, data_dir)


def _clean(cfg: GuardCommon, split: str) -> dict[str, list[Any]]:
    return {n: clean_set(n, split, cfg.data_dir) for n in cfg.clean}


def run_calibrate(cfg: CalibrateConfig) -> int:
    from robusteval import detectors
    from robusteval.detectors.calibrate import calibrate, calibrate_groups

    assert cfg.out_dir is not None  # validated
    dets = detectors.resolve(_detector_specs(cfg))
    clean = _clean(cfg, "calibration")
    out = Path(cfg.out_dir)
    log = JsonlLog(out / "suspicion.jsonl", key="key", resume=cfg.resume)
    if cfg.by_group:
        table = calibrate_groups(dets, clean, cfg.target_fpr, combined=cfg.combined, log=log, min_n=cfg.min_n,
                                 floor_at_default=cfg.floor_at_default, confidence=cfg.confidence)
    else:
        table = calibrate(dets, clean, cfg.target_fpr, combined=cfg.combined, log=log, confidence=cfg.confidence)
    table["provenance"] = provenance(to_dict(cfg))
    write_json(out / "thresholds.json", table)
    for name, entry in table["detectors"].items():
        never = "  (never fires on clean data at this rate)" if entry["never_fires"] else ""
        bound = (f" (upper bound {100 * entry['fpr_upper_bound']:.2f}% at "
                 f"{100 * table['per_detector_confidence']:.4g} % confidence)" if "fpr_upper_bound" in entry else "")
        print(f"{name:<16} threshold {entry['threshold']:.4g}  calibration FPR "
              f"{100 * entry['calibration_fpr']:.2f}% of {entry['n']}{bound}{never}")
    for group, entry in (table.get("groups") or {}).items():
        cells = ", ".join(f"{n} {e['threshold']:.3g}" + (f" (bound {100 * e['fpr_upper_bound']:.2f}%)"
                                                         if "fpr_upper_bound" in e else "")
                          for n, e in entry["detectors"].items())
        print(f"  {group} (n={entry['n']}): {cells}")
    if table.get("groups_too_small"):
        print(f"  groups below --min-n, pooled only: {table['groups_too_small']}")
    print(f"wrote {out / 'thresholds.json'}")
    return 0


def _check_calibration(cfg: EvaluateConfig) -> None:
    """A config shared with ``guard calibrate`` names the calibration (``target_fpr``,
    ``combined``, ``confidence``): the thresholds file must have been made with it."""
    wanted = {k: v for k, v in (("target_fpr", cfg.target_fpr), ("combined", cfg.combined),
                                ("confidence", cfg.confidence)) if v is not None}
    if not wanted:
        return
    if not cfg.thresholds:
        raise RobustevalError(f"the config names a calibration ({', '.join(f'{k}={v}' for k, v in wanted.items())}) "
                              "but no --thresholds file to evaluate; run `robusteval guard calibrate` first")
    from robusteval.detectors.base import read_thresholds_header

    made = read_thresholds_header(cfg.thresholds)
    for key, value in wanted.items():
        if key not in made or made[key] != value:
            raise RobustevalError(f"{cfg.thresholds}: calibrated with {key}={made.get(key)!r}, but the config asks "
                                  f"for {key}={value!r}; recalibrate or drop {key} from the config")


def run_evaluate(cfg: EvaluateConfig) -> int:
    from robusteval import detectors
    from robusteval.attacks.runner import read_results
    from robusteval.config.common import load_samples
    from robusteval.detectors.calibrate import adversarial_samples, evaluate, evaluation_markdown

    assert cfg.out_dir is not None  # validated
    _check_calibration(cfg)
    if cfg.thresholds:
        from robusteval.detectors.clean import check_clean_split

        check_clean_split(cfg.thresholds)
    dets = detectors.resolve(_detector_specs(cfg), cfg.thresholds)
    attacked: list[Any] = []
    for path in cfg.attack_results:
        rows, dataset = read_results(path)
        dataset = cfg.dataset or dataset
        if not dataset:
            raise RobustevalError(f"{path}: the result rows name no single dataset; pass --dataset")
        by_id = {s.id: s for s in load_samples(dataset, data_dir=cfg.data_dir)}
        attacked += adversarial_samples(rows, by_id, dataset)
    clean = _clean(cfg, "heldout")
    out = Path(cfg.out_dir)
    log = JsonlLog(out / "suspicion.jsonl", key="key", resume=cfg.resume)
    result = evaluate(dets, attacked, clean, log=log)
    result["attack_results"] = list(cfg.attack_results)
    result["thresholds_file"] = cfg.thresholds
    result["provenance"] = provenance(to_dict(cfg))
    write_outputs(out, "evaluation", result, evaluation_markdown(result))
    return 0


def run_list(args: Any) -> int:
    from robusteval import detectors

    rows = [detectors.info(n) for n in detectors.names()]
    print_listing(rows, args.json, [("name", 16), ("family", 10), ("origin", 10), ("summary", 0)])
    return 0


COMMANDS = [
    Command("guard calibrate", "fit detector thresholds on clean text", run_calibrate, CalibrateConfig, __doc__,
            CALIBRATE_ALIASES),
    Command("guard evaluate", "detection and false-positive rates", run_evaluate, EvaluateConfig, __doc__,
            EVALUATE_ALIASES),
    Command("detectors list", "registered detectors", run_list, flags=json_flag),
]
