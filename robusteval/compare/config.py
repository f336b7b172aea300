"""The ``compare`` config: suites of (dataset, attacks, victims), a guard, a seed.

Schema (YAML; ``docs/compare.md`` has the annotated version)::

    name: quickstart            # shown in the report
    seed: 0                     # attacks, splits, training, bootstrap
    budget: 60                  # victim queries per search attack
    criteria: {invariance_tolerance: 1.0}   # success criteria settings (attacks/criteria.py)
    smoothing:                  # optional: the smoothed and smoothed+trained variants (docs/smoothing.md)
      perturbation: synonym     # synonym | mask | char
      n: 32                     # draws per response (seeded by the config's seed)
      alpha: 0.05
      options: {rate: 1.0}      # the perturbation's options
      radii: [1, 2, 3]          # certified fraction at these radii ...
      tolerance: 10.0           # ... within this many points
    n_boot: 200                 # bootstrap resamples for correlation CIs
    guard:                      # the input-sanitization defense
      detectors: [nonalnum, {name: gec, options: {backend: builtin}}, ...]
      policy: floor             # flag | penalize | floor | reject | sanitize
      thresholds: path.json     # calibrated thresholds, or:
      calibrate: {clean: [quickstart-references], target_fpr: 0.05, combined: true}
      fpr_sets: [...]           # clean sets whose held-out half measures false positives
    suites:
      - name: dialogue
        dataset: quickstart-dialogue
        select: best-per-context
        split: {val_fraction: 0.1, test_fraction: 0.4}   # contexts; attacks use the test split
        attacks: [family:dialogue-rules, textfooler-neg]
        adaptive: [textfooler-neg]   # rerun guard-aware; default: every search attack and every R- attack
        evasion: {weight: 10, fluency: 0, max_variants: 12}   # robusteval.attacks.evasion.Evasive
        attack_options: {}
        correlation: [quickstart-dialogue]   # the test split of the dataset; other names zero-shot
        victims:
          - name: cross-encoder
            label: MiniLM cross-encoder
            train: {...}        # learned victims: see TrainSpec
          - name: rougeL
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from robusteval.attacks.criteria import Criteria
from robusteval.errors import RobustevalError


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RobustevalError(f"compare config: {where} must be a mapping")
    return dict(value)


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RobustevalError(f"compare config: {where} must be a list of names")
    return list(value)


def _check_keys(block: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = set(block) - allowed
    if unknown:
        raise RobustevalError(f"compare config: unknown key(s) {sorted(unknown)} in {where}; "
                              f"allowed: {', '.join(sorted(allowed))}")


@dataclass
class TrainSpec:
    """How a learned victim is trained (:mod:`robusteval.training.rounds`): a base model (round
    0: optional self-supervised ``pretrain``, then the human judgments), then the *trained*
    variant: adversarial rounds from the base, online and gated on validation (``rounds``);
    ``generalization`` families get one extra hardened model each, trained on that family's
    examples alone (the generalization matrix); ``ablations`` one each with a part switched
    off (``no-consistency``, ``no-embedding-adversary``, ``offline``)."""

    model: dict[str, Any] = field(default_factory=dict)  # CrossEncoderModule arguments
    data: dict[str, Any] = field(default_factory=dict)  # ScoringDataModule arguments
    epochs: int = 3
    round_epochs: int = 2
    attacks: list[str] = field(default_factory=list)  # training attacks; default: the suite's minus held_out
    held_out: list[str] = field(default_factory=list)  # families never trained on
    train_limit: int | None = None  # train contexts attacked for adversarial examples
    generalization: list[str] = field(default_factory=list)
    checkpoint: str | None = None  # start from this trained base instead of training round 0
    module: str = "cross-encoder"  # the evaluator LightningModule (robusteval.training.rounds.MODULES)
    pretrain: dict[str, Any] | None = None  # self-supervised stage of the base (training.rounds.train_base)
    rounds: dict[str, Any] = field(default_factory=dict)  # RoundsSpec settings (online, tolerance, ...)
    ablations: list[str] = field(default_factory=list)  # extra hardened models, one part switched off


ABLATIONS = ("no-consistency", "no-embedding-adversary", "offline")
TRAIN_KEYS = {"model", "data", "epochs", "round_epochs", "attacks", "held_out", "train_limit", "generalization",
              "checkpoint", "module", "pretrain", "rounds", "ablations"}


@dataclass
class VictimSpec:
    name: str
    label: str
    options: dict[str, Any] = field(default_factory=dict)
    train: TrainSpec | None = None


@dataclass
class SuiteSpec:
    name: str
    dataset: str
    attacks: list[str]
    victims: list[VictimSpec]
    select: str = "best-per-context"
    select_aspect: str | None = None
    limit: int | None = None
    split: dict[str, float] = field(default_factory=lambda: {"val_fraction": 0.1, "test_fraction": 0.2})
    adaptive: list[str] | None = None
    evasion: dict[str, float] = field(default_factory=dict)
    attack_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    correlation: list[str] = field(default_factory=list)
    # pairwise-judge invariance checks (robusteval.compare.judges): margin, rubric_template
    judges: dict[str, Any] = field(default_factory=dict)


@dataclass
class GuardSpec:
    detectors: list[Any]
    policy: str = "floor"
    penalty: float = 0.5
    thresholds: str | None = None
    calibrate: dict[str, Any] = field(default_factory=dict)
    fpr_sets: list[str] = field(default_factory=list)


@dataclass
class SmoothingSpec:
    """The smoothing defense (robusteval.defenses.smooth): adds the ``smoothed`` and
    ``smoothed+trained`` variants and their certified fractions."""

    perturbation: str = "synonym"
    n: int = 32
    alpha: float = 0.05
    options: dict[str, Any] = field(default_factory=dict)  # the perturbation's (rate, max_set, sets, token)
    radii: list[int] = field(default_factory=lambda: [1, 2, 3])
    tolerance: float = 10.0


@dataclass
class CompareConfig:
    name: str
    suites: list[SuiteSpec]
    guard: GuardSpec
    seed: int = 0
    budget: int = 60
    n_boot: int = 200
    data_dir: str | None = None
    criteria: Criteria = field(default_factory=Criteria)
    smoothing: SmoothingSpec | None = None
    raw: dict[str, Any] = field(default_factory=dict)


def _evasion(value: Any, where: str) -> dict[str, float]:
    opts = _mapping(value, where)
    _check_keys(opts, {"weight", "fluency", "max_variants"}, where)
    try:
        out = {k: float(v) for k, v in opts.items()}
    except (TypeError, ValueError) as e:
        raise RobustevalError(f"compare config: {where} values must be numbers: {e}") from None
    if any(v < 0 for v in out.values()):
        raise RobustevalError(f"compare config: {where} values must be >= 0, got {out}")
    if "max_variants" in out:
        out["max_variants"] = int(out["max_variants"])
    return out


def _judges(value: Any, where: str) -> dict[str, Any]:
    """``judges: {margin: 0.05, rubric_template: pairwise-reworded}`` (``rubric_template: null``
    skips the rubric check)."""
    block = _mapping(value, where)
    _check_keys(block, {"margin", "rubric_template"}, where)
    if "margin" in block:
        try:
            block["margin"] = float(block["margin"])
        except (TypeError, ValueError):
            raise RobustevalError(f"compare config: {where}.margin must be a number") from None
        if not 0.0 <= block["margin"] < 0.5:
            raise RobustevalError(f"compare config: {where}.margin must be in [0, 0.5)")
    return block


def _smoothing(value: Any) -> SmoothingSpec | None:
    if value is None:
        return None
    sm = _mapping(value, "smoothing")
    _check_keys(sm, {"perturbation", "n", "alpha", "options", "radii", "tolerance"}, "smoothing")
    from robusteval.defenses.perturbations import PERTURBATIONS

    spec = SmoothingSpec(perturbation=str(sm.get("perturbation", "synonym")), n=int(sm.get("n", 32)),
                         alpha=float(sm.get("alpha", 0.05)), options=_mapping(sm.get("options"), "smoothing.options"),
                         radii=[int(r) for r in sm.get("radii", [1, 2, 3])], tolerance=float(sm.get("tolerance", 10.0)))
    if spec.perturbation not in PERTURBATIONS:
        raise RobustevalError(f"compare config: smoothing.perturbation {spec.perturbation!r} is not one of "
                              f"{PERTURBATIONS.names()}")
    if spec.n < 1 or not 0 < spec.alpha < 1 or any(r < 0 for r in spec.radii) or spec.tolerance < 0:
        raise RobustevalError("compare config: smoothing needs n >= 1, 0 < alpha < 1, radii >= 0, tolerance >= 0")
    return spec


def parse(raw: dict[str, Any]) -> CompareConfig:
    """Validate a compare config (see the module docstring); errors name the offending key."""
    top = _mapping(raw, "the top level")
    _check_keys(top, {"name", "seed", "budget", "n_boot", "guard", "suites", "data_dir", "criteria", "smoothing"},
                "the top level")
    g = _mapping(top.get("guard"), "guard")
    _check_keys(g, {"detectors", "policy", "penalty", "thresholds", "calibrate", "fpr_sets"}, "guard")
    if not g.get("detectors"):
        raise RobustevalError("compare config: guard.detectors is required (the defense being compared)")
    if not g.get("thresholds") and not g.get("calibrate"):
        raise RobustevalError("compare config: guard needs thresholds: <file> or calibrate: {clean: [...]}")
    cal = _mapping(g.get("calibrate"), "guard.calibrate")
    _check_keys(cal, {"clean", "target_fpr", "combined"}, "guard.calibrate")
    if cal and not cal.get("clean"):
        raise RobustevalError("compare config: guard.calibrate needs clean: [clean set names]")
    guard = GuardSpec(detectors=list(g["detectors"]), policy=str(g.get("policy", "floor")),
                      penalty=float(g.get("penalty", 0.5)), thresholds=g.get("thresholds"), calibrate=cal,
                      fpr_sets=_strings(g.get("fpr_sets") or cal.get("clean"), "guard.fpr_sets"))
    suites = []
    for i, s in enumerate(top.get("suites") or []):
        where = f"suites[{i}]"
        s = _mapping(s, where)
        _check_keys(s, {"name", "dataset", "attacks", "victims", "select", "select_aspect", "limit", "split",
                        "adaptive", "evasion", "attack_options", "correlation", "judges"}, where)
        for need in ("name", "dataset", "attacks", "victims"):
            if not s.get(need):
                raise RobustevalError(f"compare config: {where}.{need} is required")
        victims = []
        for j, v in enumerate(s["victims"]):
            vw = f"{where}.victims[{j}]"
            v = {"name": v} if isinstance(v, str) else _mapping(v, vw)
            _check_keys(v, {"name", "label", "options", "train"}, vw)
            train = None
            if v.get("train") is not None:
                t = _mapping(v["train"], f"{vw}.train")
                _check_keys(t, TRAIN_KEYS, f"{vw}.train")
                train = TrainSpec(model=_mapping(t.get("model"), f"{vw}.train.model"),
                                  data=_mapping(t.get("data"), f"{vw}.train.data"),
                                  epochs=int(t.get("epochs", 3)), round_epochs=int(t.get("round_epochs", 2)),
                                  attacks=_strings(t.get("attacks"), f"{vw}.train.attacks"),
                                  held_out=_strings(t.get("held_out"), f"{vw}.train.held_out"),
                                  train_limit=t.get("train_limit"),
                                  generalization=_strings(t.get("generalization"), f"{vw}.train.generalization"),
                                  checkpoint=t.get("checkpoint"), module=str(t.get("module", "cross-encoder")),
                                  pretrain=_mapping(t.get("pretrain"), f"{vw}.train.pretrain") or None,
                                  rounds=_mapping(t.get("rounds"), f"{vw}.train.rounds"),
                                  ablations=_strings(t.get("ablations"), f"{vw}.train.ablations"))
                bad = set(train.ablations) - set(ABLATIONS)
                if bad:
                    raise RobustevalError(f"compare config: {vw}.train.ablations: unknown {sorted(bad)}; "
                                          f"choose from {', '.join(ABLATIONS)}")
            victims.append(VictimSpec(name=str(v["name"]), label=str(v.get("label") or v["name"]),
                                      options=_mapping(v.get("options"), f"{vw}.options"), train=train))
        labels = [v.label for v in victims]
        if len(set(labels)) != len(labels):
            raise RobustevalError(f"compare config: victim labels in {where} must be unique: {labels}")
        split_cfg = _mapping(s.get("split"), f"{where}.split")
        _check_keys(split_cfg, {"val_fraction", "test_fraction"}, f"{where}.split")
        split = {"val_fraction": 0.1, "test_fraction": 0.2, **split_cfg}
        suites.append(SuiteSpec(
            name=str(s["name"]), dataset=str(s["dataset"]), attacks=_strings(s["attacks"], f"{where}.attacks"),
            victims=victims, select=str(s.get("select", "best-per-context")), select_aspect=s.get("select_aspect"),
            limit=s.get("limit"), split={k: float(x) for k, x in split.items()},
            adaptive=None if s.get("adaptive") is None else _strings(s["adaptive"], f"{where}.adaptive"),
            evasion=_evasion(s.get("evasion"), f"{where}.evasion"),
            attack_options=_mapping(s.get("attack_options"), f"{where}.attack_options"),
            correlation=_strings(s.get("correlation") or [s["dataset"]], f"{where}.correlation"),
            judges=_judges(s.get("judges"), f"{where}.judges")))
    if not suites:
        raise RobustevalError("compare config: suites: [...] is required")
    names = [s.name for s in suites]
    if len(set(names)) != len(names):
        raise RobustevalError(f"compare config: suite names must be unique: {names}")
    return CompareConfig(name=str(top.get("name", "compare")), suites=suites, guard=guard,
                         seed=int(top.get("seed", 0)), budget=int(top.get("budget", 60)),
                         n_boot=int(top.get("n_boot", 200)), data_dir=top.get("data_dir"),
                         criteria=Criteria.from_config(_mapping(top.get("criteria"), "criteria")),
                         smoothing=_smoothing(top.get("smoothing")), raw=raw)
