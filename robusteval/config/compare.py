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
      thresholds: path.json     # calibrated thresholds; "shipped": the package's defaults per
                                # task and language (detectors/defaults.py; needs fpr_sets); or:
      calibrate: {clean: [quickstart-references], target_fpr: 0.05, combined: true}
      fpr_sets: [...]           # clean sets whose held-out half measures false positives
                                # (clean sets: shipped names, or any dataset: a file, hf:NAME, module:attr)
    suites:
      - name: dialogue
        dataset: quickstart-dialogue     # a registered name, a file, hf:NAME or "module:attr"
        select: best-per-context
        split: {val_fraction: 0.1, test_fraction: 0.4}   # contexts; attacks use the test split
        attacks: [family:dialogue-rules, textfooler-neg]
        adaptive: [textfooler-neg]   # rerun guard-aware; default: every search attack and every R- attack
        evasion: {weight: 10, fluency: 0, max_variants: 12}   # robusteval.attacks.evasion.Evasive
        attack_options: {}
        correlation: [quickstart-dialogue]   # the test split of the dataset; other names zero-shot;
                                             # NAME:test or {dataset: NAME, split: test}: another set's test split
        victims:
          - name: cross-encoder       # or "module:attr"
            label: MiniLM cross-encoder
            train: {...}        # learned victims: see TrainSpec
          - rougeL

Parsed by jsonargparse (:mod:`robusteval.config.parsing`): ``robusteval compare --config``
and :func:`parse` (a dict from Python) validate the same way.
"""

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from robusteval.attacks.criteria import Criteria
from robusteval.config.common import (
    DetectorSpec,
    Execution,
    Output,
    Policy,
    check_at_least_one,
    check_confidence,
    names,
)
from robusteval.config.parsing import ConfigError, from_dict, from_file

ABLATIONS = ("no-consistency", "no-embedding-adversary", "offline")
SPLIT_DEFAULTS = {"val_fraction": 0.1, "test_fraction": 0.2}
SHIPPED = "shipped"  # guard.thresholds: the package's default thresholds per task and language


def _keys(block: dict[str, Any], allowed: set[str], where: str) -> None:
    from robusteval.config.parsing import did_you_mean

    for key in sorted(set(block) - allowed):
        raise ConfigError(f"unknown key {key!r} in {where}{did_you_mean(key, sorted(allowed))} "
                          f"(allowed: {', '.join(sorted(allowed))})")


@dataclass(kw_only=True)
class TrainSpec:
    """How a learned victim is trained (:mod:`robusteval.training.rounds`): a base model (round
    0: optional self-supervised ``pretrain``, then the human judgments), then the *trained*
    variant: adversarial rounds from the base, online and gated on validation (``rounds``);
    ``generalization`` families get one extra hardened model each, trained on that family's
    examples alone (the generalization matrix); ``ablations`` one each with a part switched
    off (``no-consistency``, ``no-embedding-adversary``, ``offline``).

    Args:
        model: the evaluator module's arguments (CrossEncoderModule, BoolQAModule)
        data: ScoringDataModule arguments
        epochs: epochs of the base
        round_epochs: epochs per round
        attacks: training attacks (default: the suite's minus held_out)
        held_out: attack families never trained on
        train_limit: train contexts attacked for adversarial examples
        generalization: families that get one hardened model each
        checkpoint: start from this trained base instead of training round 0
        module: the evaluator module (cross-encoder or boolqa)
        pretrain: the self-supervised stage of the base
        rounds: round settings (rounds, online, tolerance, ... and the rounds' loss weights)
        ablations: extra hardened models, one part switched off each
    """

    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    epochs: int = 3
    round_epochs: int = 2
    attacks: list[str] = field(default_factory=list)
    held_out: list[str] = field(default_factory=list)
    train_limit: int | None = None
    generalization: list[str] = field(default_factory=list)
    checkpoint: str | None = None
    module: str = "cross-encoder"
    pretrain: dict[str, Any] | None = None
    rounds: dict[str, Any] = field(default_factory=dict)
    ablations: list[str] = field(default_factory=list)

    def validate(self, where: str) -> None:
        from robusteval.config.harden import check_module_args

        bad = set(self.ablations) - set(ABLATIONS)
        if bad:
            raise ConfigError(f"{where}.ablations: unknown {sorted(bad)}; choose from {', '.join(ABLATIONS)}")
        if self.checkpoint and self.pretrain:
            raise ConfigError(f"{where}: checkpoint starts from a trained base, so pretrain (a stage of training the "
                              "base) would be ignored; drop one of them")
        check_at_least_one(self.train_limit, f"{where}.train_limit", "train context")
        check_module_args(self.module, self.model, self.data, self.rounds, f"{where}.")


@dataclass(kw_only=True)
class VictimSpec:
    """Args:
        name: registered or entry-point metric name, or "module:attr"
        label: name in the report (default: the name)
        options: the metric's options
        train: how a learned victim is trained (its trained variant)
    """

    name: str
    label: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    train: TrainSpec | None = None


@dataclass(kw_only=True)
class CorrelationSpec:
    """A correlation set as a mapping: unambiguous when the name itself contains ':'
    (``hf:NAME``, ``module:attr``).

    Args:
        dataset: a registered dataset, a file, hf:NAME or "module:attr"
        split: test: only its test contexts, split as training splits it (default: the whole set,
            zero-shot; the suite's own dataset always gives its test split)
    """

    dataset: str
    split: Literal["test"] | None = None


@dataclass(kw_only=True)
class SuiteSpec:
    """Args:
        name: the suite's name in the report
        dataset: a registered dataset, a file, hf:NAME or "module:attr"
        attacks: attack names, family:<family> or all
        victims: metric names or {name, label, options, train}
        select: which responses to attack
        select_aspect: the human aspect select ranks by
        limit: at most this many test contexts attacked
        split: val_fraction and test_fraction of the contexts
        adaptive: attacks rerun guard-aware (default: every search attack and every R- attack)
        evasion: the guard-aware attacks' settings (weight, fluency, max_variants)
        attack_options: attack name -> its constructor options
        correlation: human-judged sets the victims are correlated on: NAME (a dataset, file, hf:NAME or
            module:attr), NAME:test (its test split) or {dataset, split}
        judges: pairwise-judge invariance checks (margin, rubric_template)
    """

    name: str
    dataset: str
    attacks: list[str]
    victims: list[str | VictimSpec]
    select: str = "best-per-context"
    select_aspect: str | None = None
    limit: int | None = None
    split: dict[str, float] = field(default_factory=lambda: dict(SPLIT_DEFAULTS))
    adaptive: list[str] | None = None
    evasion: dict[str, float] = field(default_factory=dict)
    attack_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    correlation: list[str | CorrelationSpec] = field(default_factory=list)
    judges: dict[str, Any] = field(default_factory=dict)

    def validate(self, where: str) -> None:
        if not self.attacks:
            raise ConfigError(f"{where}.attacks is required")
        if not self.victims:
            raise ConfigError(f"{where}.victims is required")
        self.victims = [VictimSpec(name=v) if isinstance(v, str) else v for v in self.victims]
        for j, v in enumerate(self.victims):
            assert isinstance(v, VictimSpec)
            v.label = v.label or v.name
            if v.train is not None:
                v.train.validate(f"{where}.victims[{j}].train")
        labels = [v.label for v in self.victims if isinstance(v, VictimSpec)]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"victim labels in {where} must be unique: {labels}")
        _keys(self.split, set(SPLIT_DEFAULTS), f"{where}.split")
        self.split = {**SPLIT_DEFAULTS, **{k: float(v) for k, v in self.split.items()}}
        val, test = self.split["val_fraction"], self.split["test_fraction"]
        if not (0.0 <= val <= 1.0 and 0.0 <= test <= 1.0 and val + test <= 1.0):
            raise ConfigError(f"{where}.split: val_fraction and test_fraction are shares of the contexts, each in "
                              f"[0, 1] and together at most 1 (the rest train), got val_fraction={val:g}, "
                              f"test_fraction={test:g}")
        check_at_least_one(self.limit, f"{where}.limit", "test context")
        _keys(self.evasion, {"weight", "fluency", "max_variants"}, f"{where}.evasion")
        if any(v < 0 for v in self.evasion.values()):
            raise ConfigError(f"{where}.evasion values must be >= 0, got {self.evasion}")
        if "max_variants" in self.evasion:
            self.evasion["max_variants"] = int(self.evasion["max_variants"])
        _keys(self.judges, {"margin", "rubric_template"}, f"{where}.judges")
        if "margin" in self.judges and not (isinstance(self.judges["margin"], int | float)
                                            and 0.0 <= self.judges["margin"] < 0.5):
            raise ConfigError(f"{where}.judges.margin must be a number in [0, 0.5)")
        self.correlation = self.correlation or [self.dataset]


@dataclass(kw_only=True)
class GuardSpec:
    """Args:
        detectors: detector names, "module:attr" or {name, options}
        policy: flag, penalize, floor, reject or sanitize
        penalty: with policy penalize, the factor a flagged score is multiplied by
        thresholds: calibrated thresholds.json, or "shipped": the package's default thresholds per task
            and language (robusteval/resources/detectors/default_thresholds.json; the guard a user gets
            with no thresholds file), which needs fpr_sets
        calibrate: calibrate in the run instead: {clean, target_fpr, combined, confidence}
        fpr_sets: clean sets whose held-out half measures false positives (default: calibrate.clean);
            a clean set is a shipped name (robusteval.detectors.clean) or any dataset: a file, hf:NAME,
            module:attr
    """

    detectors: list[DetectorSpec] = field(default_factory=list)
    policy: Policy = "floor"
    penalty: float = 0.5
    thresholds: str | None = None
    calibrate: dict[str, Any] = field(default_factory=dict)
    fpr_sets: list[str] = field(default_factory=list)

    def validate(self) -> None:
        if not self.detectors:
            raise ConfigError("guard.detectors is required (the defense being compared)")
        if not self.thresholds and not self.calibrate:
            raise ConfigError(f"guard needs thresholds: <file>, thresholds: {SHIPPED} or calibrate: {{clean: [...]}}")
        if self.thresholds and self.calibrate:
            raise ConfigError("guard: give thresholds or calibrate, not both (calibrate would be ignored)")
        if self.thresholds == SHIPPED and not self.fpr_sets:
            raise ConfigError(f"guard.thresholds: {SHIPPED} needs fpr_sets: [clean sets] to measure false positives on "
                              "(e.g. dailydialog-good, summeval-references)")
        _keys(self.calibrate, {"clean", "target_fpr", "combined", "confidence"}, "guard.calibrate")
        check_confidence(self.calibrate.get("confidence"), "guard.calibrate.confidence")
        if self.calibrate and not self.calibrate.get("clean"):
            raise ConfigError("guard.calibrate needs clean: [clean sets: shipped names or dataset files]")
        if self.calibrate:  # "a,b" and [a, b] alike: the pipeline iterates over a list
            self.calibrate = {**self.calibrate, "clean": names(self.calibrate["clean"])}
        self.fpr_sets = names(self.fpr_sets or self.calibrate.get("clean"))


@dataclass(kw_only=True)
class SmoothingSpec:
    """The smoothing defense (robusteval.defenses.smooth): adds the ``smoothed`` and
    ``smoothed+trained`` variants and their certified fractions, and both behind the guard.

    Args:
        perturbation: synonym, mask or char
        n: draws per response
        alpha: the certificate's error rate
        options: the perturbation's options (rate, max_set, sets, token)
        radii: certified fraction at these radii
        tolerance: ... within this many points
    """

    perturbation: str = "synonym"
    n: int = 32
    alpha: float = 0.05
    options: dict[str, Any] = field(default_factory=dict)
    radii: list[int] = field(default_factory=lambda: [1, 2, 3])
    tolerance: float = 10.0

    def validate(self) -> None:
        from robusteval.config.parsing import did_you_mean
        from robusteval.defenses.perturbations import PERTURBATIONS

        if self.perturbation not in PERTURBATIONS:
            raise ConfigError(f"smoothing.perturbation {self.perturbation!r} is not one of {PERTURBATIONS.names()}"
                              f"{did_you_mean(self.perturbation, PERTURBATIONS.names())}")
        if self.n < 1 or not 0 < self.alpha < 1 or any(r < 0 for r in self.radii) or self.tolerance < 0:
            raise ConfigError("smoothing needs n >= 1, 0 < alpha < 1, radii >= 0, tolerance >= 0")


@dataclass(kw_only=True)
class CompareConfig:
    """Attack each victim plain, guarded, trained and guarded + trained; one report.

    Args:
        suites: (dataset, attacks, victims) suites
        guard: the input-sanitization defense
        name: shown in the report
        seed: attacks, splits, training, bootstrap
        budget: victim queries per search attack
        n_boot: bootstrap resamples for correlation intervals
        data_dir: the human-judgment data folder (default $ROBUSTEVAL_DATA)
        criteria: success-criteria thresholds
        smoothing: the smoothed and smoothed+trained variants (optional)
    """

    suites: list[SuiteSpec] = field(default_factory=list)
    guard: GuardSpec = field(default_factory=GuardSpec)
    name: str = "compare"
    seed: int = 0
    budget: int = 60
    n_boot: int = 200
    data_dir: str | None = None
    criteria: Criteria = field(default_factory=Criteria)
    smoothing: SmoothingSpec | None = None
    raw: dict[str, Any] = field(default_factory=dict, init=False, compare=False)  # fingerprint, provenance

    def validate(self) -> None:
        self.guard.validate()
        if not self.suites:
            raise ConfigError("suites: [...] is required")
        for i, s in enumerate(self.suites):
            s.validate(f"suites[{i}]")
        suite_names = [s.name for s in self.suites]
        if len(set(suite_names)) != len(suite_names):
            raise ConfigError(f"suite names must be unique: {suite_names}")
        if self.smoothing is not None:
            self.smoothing.validate()


@dataclass(frozen=True)
class Tolerance:
    """How much validity a defense may cost and still be recommended in the report's verdicts
    (:mod:`robusteval.compare.story`; fractions, not %).

    Args:
        spearman_drop: largest fall of the mean Spearman with people (and a set whose paired
            interval of the change lies wholly below minus this is a cost too)
        flagged: largest share of the rated responses a guard may flag
        invariance_rise: largest rise of the R+ invariance-failure rate
    """

    spearman_drop: float = 0.02   # the adversarial rounds' validation gate uses the same default
    flagged: float = 0.05         # the guard's usual calibration target: 5 % false positives on clean text
    invariance_rise: float = 0.05  # R+ invariance failures, in points of rate

    def describe(self) -> str:
        return (f"mean Spearman falls by at most {self.spearman_drop:g} (and on no set clearly further: its paired "
                f"interval wholly below -{self.spearman_drop:g}), at most {100 * self.flagged:g} % of the "
                f"rated responses flagged, R+ invariance failures up by at most {100 * self.invariance_rise:g} points")


@dataclass(kw_only=True)
class CompareCommand(CompareConfig, Output, Execution):
    """``robusteval compare`` and ``robusteval quickstart``: the comparison config plus where
    the report goes.

    Args:
        report_only: re-render report.md and report.html of the finished run in out_dir from its
            report.json, without rerunning anything (no config needed; data_dir only for the
            validity intervals of a run made before they existed)
        screenshot: with report_only, also write a PNG of the page's top (headless Chromium)
        tolerance: how much validity a defense may cost and still be recommended in the
            report's verdicts (spearman_drop, flagged, invariance_rise; fractions; default
            0.02, 0.05, 0.05). Not part of the run's fingerprint: change it and re-render with
            report_only, which otherwise keeps the tolerance the run recorded
        seeds: run the whole comparison once per seed (instead of ``seed``), each in
            out_dir/seed-<k> (resumable on its own), and write seeds.md and seeds.json in
            out_dir with every seed's rates side by side and their mean and range
    """

    report_only: bool = False
    screenshot: str | None = None
    tolerance: Tolerance | None = None
    seeds: list[int] | None = None

    def validate(self) -> None:
        self.validate_out()
        self.validate_execution()
        bad = {k: v for k, v in dataclasses.asdict(self.tolerance).items() if not 0.0 <= v <= 1.0} \
            if self.tolerance is not None else {}
        if bad:
            raise ConfigError(f"tolerance: {bad} must be fractions in [0, 1] (0.02, not 2)")
        if self.screenshot and not self.report_only:
            raise ConfigError("--screenshot goes with --report-only (it pictures a rendered report)")
        if self.seeds is not None:
            if not self.seeds or len(set(self.seeds)) != len(self.seeds):
                raise ConfigError(f"seeds: give distinct seeds, at least one (got {self.seeds})")
            if self.report_only:
                raise ConfigError("--seeds runs the comparison once per seed; re-render one seed's report with "
                                  "--report-only --out-dir <out_dir>/seed-<k>")
        if self.report_only:
            if self.resume:
                raise ConfigError("--report-only reruns nothing; drop --resume")
            return  # the run's own config is in its report.json
        super().validate()

    def comparison(self, seed: int | None = None) -> CompareConfig:
        """The comparison alone (no output settings), with ``raw`` as the report records it;
        ``seed`` replaces the config's seed (in ``raw`` too: it is part of the run's fingerprint)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(CompareConfig) if f.init}
        if seed is not None:
            values["seed"] = seed
        cfg = CompareConfig(**values)
        cfg.raw = self.raw if seed is None else {**self.raw, "seed": seed}
        return cfg


def parse(raw: dict[str, Any]) -> CompareConfig:
    """Validate a compare config given as a dict (see the module docstring); errors name the
    offending key."""
    return from_dict(CompareConfig, raw, "compare config")


def parse_file(path: str | os.PathLike[str]) -> CompareConfig:
    """A compare config file, read as ``robusteval compare --config`` reads it (the command's own
    settings -- out_dir, workers, tolerance... -- are accepted and left out), the comparison
    validated; ``raw`` is what the command's fingerprint records."""
    cmd = from_file(CompareCommand, path, validate=False)  # out_dir may be absent: a script sets it
    cfg = cmd.comparison()
    try:
        cfg.validate()
    except ConfigError as exc:
        raise ConfigError(f"config {path}: {exc}") from None
    return cfg
