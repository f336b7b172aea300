"""``robusteval attack``'s config."""

from dataclasses import dataclass, field, replace
from typing import Any

from robusteval.attacks.criteria import Criteria
from robusteval.config.common import DataSource, Execution, GuardConfig, MetricRef, Output, VictimConfig, names
from robusteval.config.parsing import Alias, ConfigError


@dataclass(kw_only=True)
class AttackConfig(DataSource, Output, Execution):
    """Attack one or more victim metrics on a dataset.

    Args:
        attacks: attack names, family:<family> or all (a list, or one comma-separated string)
        metric: the victim (registered or entry-point name, or "module:attr"); replaces victim/victims
        options: the victim's options (--options.KEY VALUE, or -o KEY=VALUE)
        guard: detectors around the victims that have no guard of their own (--guard a,b, --guard-policy P)
        victim: one victim {name, label, options, guard}
        victims: several victims; each gets a subfolder of out_dir
        gold: a gold evaluator {name, options} for AdvEval's gold criterion (e.g. the LLM judge)
        attack_options: attack name -> its constructor options
        criteria: success-criteria thresholds
        limit: first N samples (after select)
        budget: victim queries per search attack
        seed: attack seed
        select: which responses to attack (all, best-per-context, reference, ...)
        select_aspect: the human aspect select ranks by
        preprocess: text preprocessing of the samples (robusteval.data.preprocess)
        reference: where the reference comes from (dataset, self, ...)
        system_level: add Mu & Lim's system-level criterion for universal attacks
    """

    attacks: str | list[str] | None = None
    metric: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    guard: GuardConfig | None = None
    victim: VictimConfig | None = None
    victims: list[VictimConfig] = field(default_factory=list)
    gold: MetricRef | None = None
    attack_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    criteria: Criteria = field(default_factory=Criteria)
    limit: int | None = None
    budget: int = 300
    seed: int = 0
    select: str = "all"
    select_aspect: str | None = None
    preprocess: str | None = None
    reference: str | None = None
    system_level: bool = False

    def victim_list(self) -> list[VictimConfig]:
        """The victims: ``metric`` (with ``options``), else ``victims``, else ``victim``; the
        top-level guard goes to each victim without its own."""
        if self.metric:
            found = [VictimConfig(name=self.metric, options=dict(self.options))]
        elif self.victims:
            found = list(self.victims)
        elif self.victim is not None:
            found = [replace(self.victim, options={**self.victim.options, **self.options})]
        else:
            found = []
        return [v if v.guard is not None else replace(v, guard=self.guard) for v in found]

    def validate(self) -> None:
        victims = self.victim_list()
        if not (victims and (self.dataset or self.input) and names(self.attacks)):
            raise ConfigError("need a victim metric, a dataset and attacks (flags or --config)")
        self.source()
        self.validate_out()
        self.validate_execution()
        labels = [v.display() for v in victims]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"victim labels must be unique: {labels}")
        for v in victims:
            if v.guard is not None:
                v.guard.validate(f"victim {v.display()}: guard")


ALIASES = {"-o": Alias("--options", "kv"), "--option": Alias("--options", "kv"),
           "--columns": Alias("--columns", "kv"), "--input": Alias("--dataset"),
           "--guard": Alias("--guard", "guard"), "--guard-policy": Alias("--guard.policy")}
