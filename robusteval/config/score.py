"""``robusteval score``'s config."""

from dataclasses import dataclass, field
from typing import Any

from robusteval.config.common import DataSource, Execution, GuardConfig, Output
from robusteval.config.parsing import Alias, ConfigError


@dataclass(kw_only=True)
class ScoreConfig(DataSource, Output, Execution):
    """Score samples with one metric.

    Args:
        metric: registered or entry-point metric name, or "module:attr"
        options: the metric's options (--options.KEY VALUE, or -o KEY=VALUE)
        guard: detectors around the metric (--guard a,b and --guard-policy P for short)
        limit: first N samples only
    """

    metric: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    guard: GuardConfig | None = None
    limit: int | None = None

    def validate(self) -> None:
        if not self.metric:
            raise ConfigError("--metric is required")
        self.source()
        self.validate_out()
        self.validate_execution()
        if self.guard is not None:
            self.guard.validate()


ALIASES = {"-o": Alias("--options", "kv"), "--option": Alias("--options", "kv"),
           "--columns": Alias("--columns", "kv"), "--input": Alias("--dataset"),
           "--guard": Alias("--guard", "guard"), "--guard-policy": Alias("--guard.policy")}
