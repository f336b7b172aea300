"""``robusteval guard calibrate`` and ``robusteval guard evaluate`` configs."""

from dataclasses import dataclass, field

from robusteval.config.common import DetectorSpec, Execution, Output, check_confidence
from robusteval.config.parsing import Alias, ConfigError

DEFAULT_CLEAN = ["summeval-references", "dailydialog-good", "usr-topicalchat-ground-truth"]


@dataclass(kw_only=True)
class GuardCommon(Output, Execution):
    """Args:
        detectors: detector names, "module:attr" or {name, options} (default: every registered detector)
        clean: clean sets: shipped clean-set names, or any dataset (name, file, hf:NAME) whose texts are clean
        data_dir: the human-judgment data folder (default $ROBUSTEVAL_DATA)
    """

    detectors: list[DetectorSpec] = field(default_factory=list)
    clean: list[str] = field(default_factory=lambda: list(DEFAULT_CLEAN))
    data_dir: str | None = None

    def validate(self) -> None:
        self.validate_out()
        self.validate_execution()
        if not self.clean:
            raise ConfigError("clean: give at least one clean set")


@dataclass(kw_only=True)
class CalibrateConfig(GuardCommon):
    """Fit detector thresholds on clean text.

    Args:
        target_fpr: the false-positive rate to allow
        combined: split the target among the detectors (Bonferroni); false gives each the full target
        by_group: also calibrate per task and response language
        min_n: with by_group, the fewest samples a group needs
        floor_at_default: with by_group, never set a group's threshold below the detector's class default
        confidence: keep a one-sided Clopper-Pearson upper bound on each threshold's FPR, at this
            confidence (e.g. 0.95), within the target, instead of its point estimate (default: none)
    """

    target_fpr: float = 0.01
    combined: bool = True
    by_group: bool = False
    min_n: int = 50
    floor_at_default: bool = False
    confidence: float | None = None

    def validate(self) -> None:
        super().validate()
        if not 0 < self.target_fpr < 1:
            raise ConfigError(f"target_fpr must be in (0, 1), got {self.target_fpr}")
        check_confidence(self.confidence)


@dataclass(kw_only=True)
class EvaluateConfig(GuardCommon):
    """Detection and false-positive rates of detectors on attack results.

    Args:
        thresholds: thresholds.json from `guard calibrate` (default: the detectors' defaults)
        attack_results: attack results.jsonl files or their folders
        dataset: the dataset of the attack results when no summary.json beside them names it
        target_fpr: the false-positive rate the thresholds file must have been calibrated to (a
            config shared with `guard calibrate` carries it); another one is refused
        combined: whether the thresholds file must split that rate among the detectors; checked the same way
        confidence: the confidence of the FPR bound the thresholds file must have been calibrated
            with; checked the same way
    """

    thresholds: str | None = None
    attack_results: list[str] = field(default_factory=list)
    dataset: str | None = None
    target_fpr: float | None = None
    combined: bool | None = None
    confidence: float | None = None

    def validate(self) -> None:
        super().validate()
        check_confidence(self.confidence)
        if not self.attack_results:
            raise ConfigError("give at least one --attack-results file or folder")


COMMON_ALIASES = {"--detectors": Alias("--detectors", "csv"), "--clean": Alias("--clean", "csv")}
CALIBRATE_ALIASES = {**COMMON_ALIASES, "--per-detector": Alias("--combined", "const", "false")}
EVALUATE_ALIASES = {**COMMON_ALIASES, "--attack-results": Alias("--attack_results", "append")}
