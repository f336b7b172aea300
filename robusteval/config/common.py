"""Config blocks several commands share: where the samples come from, a metric reference, a
guard around a metric, the output folder."""

from dataclasses import dataclass, field
from typing import Any, Literal

from robusteval.config.parsing import ConfigError, split_csv

Policy = Literal["flag", "penalize", "floor", "reject", "sanitize"]
# a detector: a registered or entry-point name, "module:attr", or {name, options}
DetectorSpec = str | dict[str, Any]


@dataclass(kw_only=True)
class GuardConfig:
    """Input-sanitization detectors around the metric (``robusteval.detectors.guard``).

    Args:
        detectors: detector names, "module:attr" or {name, options} mappings
        policy: what a flag does to the score: flag, penalize, floor, reject or sanitize
        penalty: with policy penalize, the factor a flagged score is multiplied by
        thresholds: thresholds.json from `robusteval guard calibrate` (default: each detector's own)
        prefetch: parse the detectors' texts in a helper process while the metric scores (default:
            when the metric runs on a GPU or a server); changes the time, never a number
    """

    detectors: list[DetectorSpec] = field(default_factory=list)
    policy: Policy = "floor"
    penalty: float = 0.5
    thresholds: str | None = None
    prefetch: bool | None = None

    def validate(self, where: str = "guard") -> None:
        if not self.detectors:
            raise ConfigError(f"{where}: a guard block needs detectors: [...]")
        for d in self.detectors:
            if isinstance(d, dict) and (not isinstance(d.get("name"), str) or set(d) - {"name", "options"}):
                raise ConfigError(f"{where}.detectors: {d!r} is not a name or a {{name, options}} mapping")

    def as_block(self) -> dict[str, Any]:
        """The ``guard:`` block as the results' fingerprints record it (not ``prefetch``, which
        changes no result)."""
        return {"detectors": list(self.detectors), "policy": self.policy, "penalty": self.penalty,
                "thresholds": self.thresholds}


@dataclass(kw_only=True)
class MetricRef:
    """A metric with its options.

    Args:
        name: registered or entry-point name, or "module:attr" (a Metric class or a plain function)
        options: constructor options of the metric
    """

    name: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(kw_only=True)
class VictimConfig(MetricRef):
    """A metric under attack.

    Args:
        label: name in the report and the output subfolder (default: the name and options)
        guard: detectors around this victim (default: the config's guard)
    """

    label: str | None = None
    guard: GuardConfig | None = None

    def display(self) -> str:
        if self.label:
            return self.label
        opts = ", ".join(f"{k}={v}" for k, v in self.options.items())
        return self.name + (f" ({opts})" if opts else "")


@dataclass(kw_only=True)
class DataSource:
    """Where the samples come from (``robusteval.data.load``).

    Args:
        dataset: a registered dataset, a file (.jsonl/.json/.csv/.tsv/.parquet), hf:NAME[:CONFIG], a local
            Hugging Face dataset folder or "module:attr"
        input: the same as dataset (the older name for a file)
        columns: Sample field -> column of the file, when its columns are not the usual names
        task: the task of a file's samples (dialogue, summarization, ...)
        split: the split of a Hugging Face dataset
        data_dir: the human-judgment data folder (default $ROBUSTEVAL_DATA)
    """

    dataset: str | None = None
    input: str | None = None
    columns: dict[str, str] = field(default_factory=dict)
    task: str | None = None
    split: str | None = None
    data_dir: str | None = None

    def source(self, required: bool = True) -> str | None:
        """The dataset spec: ``dataset`` or its alias ``input``, never both."""
        if self.dataset and self.input:
            raise ConfigError("give exactly one of --dataset or --input")
        spec = self.dataset or self.input
        if required and not spec:
            raise ConfigError("--dataset is required (a dataset name or a file)")
        return spec

    def load(self, limit: int | None = None) -> list[Any]:
        return load_samples(self.source(), data_dir=self.data_dir, limit=limit, columns=self.columns or None,
                            task=self.task, split=self.split)


@dataclass(kw_only=True)
class Output:
    """Where results go.

    Args:
        out_dir: output folder
        resume: continue an interrupted run in out_dir, reusing its finished rows
    """

    out_dir: str | None = None
    resume: bool = False

    def validate_out(self) -> None:
        if not self.out_dir:
            raise ConfigError("--out-dir is required")


@dataclass(kw_only=True)
class Execution:
    """Where the run's units execute (never part of a run's fingerprint: every backend gives the
    same rows, so a run started on one can be resumed on another).

    Args:
        backend: local (this process) or ray (Ray workers; pip install 'robusteval[ray]')
        ray_address: a running Ray cluster (default: RAY_ADDRESS, else a local Ray instance starts)
        workers: Ray workers (actors); each builds the victim once and attacks or scores its units
        cpus_per_worker: CPUs Ray reserves for each worker
        gpus_per_worker: GPUs Ray gives each worker (GPU victims; a fraction shares one GPU)
        max_in_flight: the most units running at once across the cluster (e.g. an LLM endpoint's concurrency limit)
    """

    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    workers: int = 2
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    max_in_flight: int | None = None

    def validate_execution(self) -> None:
        check_at_least_one(self.workers, "workers")
        check_at_least_one(self.max_in_flight, "max_in_flight")
        if self.cpus_per_worker < 0 or self.gpus_per_worker < 0:
            raise ConfigError("cpus_per_worker and gpus_per_worker cannot be negative")
        if self.backend == "local" and self.ray_address:
            raise ConfigError("--ray-address goes with --backend ray")

    def executor(self) -> Any:
        """The :mod:`robusteval.execution` executor these settings describe."""
        from robusteval import execution

        if self.backend == "local":
            return execution.load("local")
        return execution.load("ray", workers=self.workers, address=self.ray_address,
                              cpus_per_worker=self.cpus_per_worker, gpus_per_worker=self.gpus_per_worker,
                              max_in_flight=self.max_in_flight)


def load_samples(spec: str, data_dir: str | None = None, limit: int | None = None,
                 columns: dict[str, str] | None = None, task: str | None = None,
                 split: str | None = None) -> list[Any]:
    """``robusteval.data.load`` with the options the user gave (a name, a file, hf:NAME, a
    folder or "module:attr": the loader decides)."""
    from robusteval import data

    options = {k: v for k, v in {"columns": columns, "task": task, "split": split}.items() if v is not None}
    return data.load(spec, data_dir, limit=limit, **options)


def names(value: str | list[str] | None) -> list[str]:
    """A list of names, or one comma-separated string of them."""
    return split_csv(value)


def check_at_least_one(value: int | None, key: str, unit: str = "") -> None:
    """A count (a limit, a number of workers): at least 1, or None where the setting may be
    left unset; ``unit`` names what is counted in the error ("test context")."""
    if value is not None and value < 1:
        raise ConfigError(f"{key} must be at least 1{' ' + unit if unit else ''}, got {value}")


def check_confidence(value: Any, key: str = "confidence") -> None:
    """An FPR bound's confidence (``guard calibrate|evaluate --confidence``, compare's
    ``guard.calibrate.confidence``): None, or a number strictly between 0 and 1 (not a bool)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1):
        raise ConfigError(f"{key} must be in (0, 1), got {value!r}")
