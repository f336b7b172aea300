"""``robusteval metaeval``'s config."""

from dataclasses import dataclass, field
from typing import Any

from robusteval.config.common import MetricRef, Output, check_at_least_one
from robusteval.config.parsing import Alias, ConfigError


@dataclass(kw_only=True)
class MetaMetric(MetricRef):
    """Args:
        label: name in the tables (default: the name and options)
        datasets: only these datasets (default: all)
        limit: at most this many samples of each dataset for this metric (slow LLM judges)
    """

    label: str | None = None
    datasets: list[str] = field(default_factory=list)
    limit: int | None = None

    def __post_init__(self) -> None:
        if not self.label:
            opts = ", ".join(f"{k}={v}" for k, v in self.options.items())
            self.label = self.name + (f" ({opts})" if opts else "")


@dataclass(kw_only=True)
class MetaDataset:
    """Args:
        name: a registered dataset, a file, hf:NAME or "module:attr"
        aspects: human aspects to correlate with (default: all)
        limit: first N samples
        system: also system-level correlations
    """

    name: str
    aspects: list[str] | None = None
    limit: int | None = None
    system: bool = False


@dataclass(kw_only=True)
class MetaevalConfig(Output):
    """Correlations between metrics and human judgments.

    Args:
        metrics: metrics to meta-evaluate
        datasets: human-judged datasets
        metric: one metric instead of metrics (registered or entry-point name, or "module:attr")
        options: that metric's options (-o KEY=VALUE)
        dataset: dataset names instead of datasets (repeat --dataset)
        aspects: with dataset: the human aspects (default all)
        limit: first N samples of each dataset
        n_boot: bootstrap resamples
        seed: bootstrap seed
        data_dir: the human-judgment data folder (default $ROBUSTEVAL_DATA)
    """

    metrics: list[MetaMetric] = field(default_factory=list)
    datasets: list[MetaDataset] = field(default_factory=list)
    metric: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    dataset: list[str] = field(default_factory=list)
    aspects: list[str] | None = None
    limit: int | None = None
    n_boot: int = 1000
    seed: int = 0
    data_dir: str | None = None

    def plan(self) -> tuple[list[MetaMetric], list[MetaDataset]]:
        """The metrics and datasets to run: the single-metric / dataset flags replace the lists."""
        metrics = [MetaMetric(name=self.metric, options=dict(self.options))] if self.metric else list(self.metrics)
        if self.dataset:
            datasets = [MetaDataset(name=d, aspects=self.aspects, limit=self.limit) for d in self.dataset]
        else:
            datasets = [MetaDataset(name=d.name, aspects=d.aspects, system=d.system,
                                    limit=self.limit if self.limit is not None else d.limit) for d in self.datasets]
        return metrics, datasets

    def validate(self) -> None:
        self.validate_out()
        metrics, datasets = self.plan()
        if not metrics or not datasets:
            raise ConfigError("nothing to do: give --metric and --dataset, or a --config with 'metrics' and 'datasets'")
        names = [d.name for d in datasets]
        for m in metrics:
            unknown = [d for d in m.datasets if d not in names]
            if unknown:
                raise ConfigError(f"metric {m.label or m.name}: datasets {unknown} are not among the config's "
                                  f"datasets ({', '.join(names)})")
            check_at_least_one(m.limit, f"metric {m.label or m.name}: limit")
        for d in datasets:
            check_at_least_one(d.limit, f"dataset {d.name}: limit")


ALIASES = {"-o": Alias("--options", "kv"), "--option": Alias("--options", "kv"),
           "--dataset": Alias("--dataset", "append"), "--aspects": Alias("--aspects", "csv")}
