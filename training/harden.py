"""``robusteval harden``: rounds of attack -> add the successful adversarial examples -> train
-> re-attack, for a LoRA cross-encoder evaluator (AdvEval §4.4 / Table 6 is the model: attack
PoE with TextFooler and AdvEval, train on the successful examples, attack again).

Round 0 trains the evaluator on the human-judged data alone. Each later round attacks the
current evaluator on the *train* contexts with the training families, adds the examples that
fooled it, and continues training from the previous round's adapter. After every round the
evaluator is attacked on the *test* contexts with every family, including ``held_out``
families never used for training, and its Spearman with humans is measured on the test
splits. Results: ``harden.json`` and ``harden.md`` (ASR per round and family, Spearman per
round), one folder per round (``round_<k>/``: training logs, ``export/`` adapter, attack
results). ``--resume`` skips rounds that finished.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from robusteval.errors import RobustevalError
from robusteval.results import write_json
from robusteval.types import Sample


def split_samples(samples: Sequence[Sample], dataset: str, data_cfg: dict[str, Any]) -> dict[str, list[Sample]]:
    from robusteval.training.data import split_of

    out: dict[str, list[Sample]] = {"train": [], "val": [], "test": []}
    for s in samples:
        out[split_of(dataset, s, float(data_cfg.get("val_fraction", 0.1)), float(data_cfg.get("test_fraction", 0.2)),
                      int(data_cfg.get("seed", 0)))].append(s)
    return out


def train_round(folder: Path, model_args: dict[str, Any], data_args: dict[str, Any], epochs: int,
                init: str | None) -> tuple[str, dict[str, float]]:
    """Fit one round; returns (export folder, test metrics)."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger
    from robusteval.training.checkpoint_io import SafeCheckpointIO
    from robusteval.training.cross_encoder import CrossEncoderModule
    from robusteval.training.data import ScoringDataModule

    pl.seed_everything(int(data_args.get("seed", 0)))
    export = folder / "export"
    module = CrossEncoderModule(**{**model_args, "checkpoint": init or model_args.get("checkpoint"),
                                   "export_dir": str(export)})
    dm = ScoringDataModule(**data_args)
    trainer = pl.Trainer(max_epochs=epochs, default_root_dir=str(folder), plugins=[SafeCheckpointIO()],
                         callbacks=[ModelCheckpoint(save_last=True, save_top_k=1)],
                         logger=CSVLogger(str(folder), name="logs"), enable_model_summary=False, accelerator="cpu")
    trainer.fit(module, dm)
    metrics = trainer.test(module, dm, verbose=False)[0]
    return str(export), {k: float(v) for k, v in metrics.items()}


def asr_by_family(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per family and direction: the primary-criterion ASR with its interval
    (:func:`robusteval.asr.asr_table`), families with no attacked row left out."""
    from robusteval.asr import asr_table

    return {k: v["primary"] for k, v in asr_table(rows).items() if v["primary"]["n"]}


def harden(cfg: dict[str, Any], out_dir: str | Path, resume: bool = False,
           data_dir: str | None = None) -> dict[str, Any]:
    from robusteval import attacks, data, metrics
    from robusteval.asr import summarize, training_example
    from robusteval.attacks.criteria import Criteria
    from robusteval.attacks.runner import run_attacks
    from robusteval.data.select import select

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rounds = int(cfg.get("rounds", 2))
    model_args = dict(cfg.get("model") or {})
    data_args = dict(cfg.get("data") or {})
    if data_dir:
        data_args["data_dir"] = data_dir
    epochs = int(cfg.get("epochs", 3))
    round_epochs = int(cfg.get("round_epochs", epochs))
    acfg = dict(cfg.get("attack") or {})
    if "dataset" not in acfg or "attacks" not in acfg:
        raise RobustevalError("harden config needs attack: {dataset, attacks}")
    seed = int(cfg.get("seed", 0))
    held_out = set(acfg.get("held_out") or [])
    dataset = acfg["dataset"]
    samples = select(data.load(dataset, data_args.get("data_dir")), acfg.get("select", "best-per-context"),
                     acfg.get("select_aspect"))
    splits = split_samples(samples, dataset, {**data_args, "seed": data_args.get("seed", 0)})
    train_pool = splits["train"][: acfg.get("train_limit")]
    test_pool = splits["test"][: acfg.get("test_limit")]
    all_attacks = attacks.select(acfg["attacks"], seed, acfg.get("attack_options"))
    train_attacks = [a for a in all_attacks if a.family not in held_out]
    budget = int(acfg.get("budget", 100))
    criteria = Criteria.from_config(cfg.get("criteria"))
    state_path = out / "harden.json"
    from robusteval.results import claim_folder, run_fingerprint

    # before any work: a resumed run continues only the same run, even one killed in round 0
    claim_folder(out, run_fingerprint(command="harden", config=cfg, data_dir=data_dir), resume)
    state: dict[str, Any] = json.loads(state_path.read_text()) if resume and state_path.is_file() else {"rounds": []}
    adversarial: list[str] = [p for r in state["rounds"] for p in r.get("adversarial_added", [])]
    init: str | None = state["rounds"][-1]["export"] if state["rounds"] else None
    for k in range(len(state["rounds"]), rounds + 1):
        folder = out / f"round_{k}"
        added: list[str] = []
        n_fooled = 0
        if k > 0:  # attack the current evaluator on train contexts; keep what fooled it
            victim = metrics.load("cross-encoder", checkpoint=init)
            log = run_attacks(train_pool, train_attacks, victim, folder / "train_attacks" / "results.jsonl",
                              resume=resume, budget=budget, dataset=dataset, criteria=criteria)
            write_json(folder / "train_attacks" / "summary.json", {"dataset": dataset, "attacks": summarize(list(log))})
            adversarial.append(str(folder / "train_attacks"))
            added = [str(folder / "train_attacks")]
            n_fooled = sum(training_example(r) for r in log)
        export, test_metrics = train_round(folder, model_args,
                                           {**data_args, "adversarial": list(adversarial), "only_successful": True},
                                           epochs if k == 0 else round_epochs, init)
        victim = metrics.load("cross-encoder", checkpoint=export)
        log = run_attacks(test_pool, all_attacks, victim, folder / "test_attacks" / "results.jsonl",
                          resume=resume, budget=budget, dataset=dataset, criteria=criteria)
        rows = list(log)
        write_json(folder / "test_attacks" / "summary.json", {"dataset": dataset, "attacks": summarize(rows)})
        state["rounds"].append({"round": k, "export": export, "adversarial_added": added,
                                "train_examples_from_attacks": n_fooled,
                                "test_asr": asr_by_family(rows),
                                "test_metrics": test_metrics})
        write_json(state_path, {**state, "held_out_families": sorted(held_out), "config": cfg})
        (out / "harden.md").write_text(markdown(state, held_out), encoding="utf-8")
        init = export
    return state


def markdown(state: dict[str, Any], held_out: set[str]) -> str:
    rounds = state["rounds"]
    fams = sorted({f for r in rounds for f in r["test_asr"]})
    head = "| family | " + " | ".join(f"round {r['round']}" for r in rounds) + " |"
    from robusteval.stats import pct

    lines = ["## ASR (%, 95 % interval) on the test contexts per round", "",
             "Round 0: trained on human judgments only; round k: + the successful adversarial examples of "
             "rounds 1..k. Families marked (held out) were never trained on.", "", head,
             "|---|" + "---|" * len(rounds)]
    for f in fams:
        tag = " (held out)" if f.split(" (")[0] in held_out else ""
        cells = [pct(r["test_asr"][f]) if f in r["test_asr"] else "n/a" for r in rounds]
        lines.append(f"| {f}{tag} | " + " | ".join(cells) + " |")
    keys = sorted({k for r in rounds for k in r["test_metrics"] if k.startswith("test_spearman")})
    lines += ["", "## Spearman with humans on the test splits", "", head, "|---|" + "---|" * len(rounds)]
    for k in keys:
        lines.append(f"| {k.removeprefix('test_spearman/') if '/' in k else 'mean'} | " +
                     " | ".join(f"{r['test_metrics'].get(k, float('nan')):.3f}" for r in rounds) + " |")
    lines += ["", "Adversarial training examples added per round: " +
              ", ".join(str(r["train_examples_from_attacks"]) for r in rounds)]
    return "\n".join(lines) + "\n"
