"""``robusteval harden``: round 0 (optional self-supervised pre-training, then the human
judgments), then adversarial rounds -- attack the current evaluator on the *train* contexts,
add the examples that fooled it, train further -- with the model chosen on the validation
objective (:mod:`robusteval.training.rounds`, the one loop ``compare`` uses too). Any
evaluator module: ``module: cross-encoder`` (LoRA cross-encoder) or ``module: boolqa``
(UniEval-style Boolean QA).

The base and the chosen model (every round with ``test_rounds: all``) are then attacked on the
*test* contexts with every family, including ``held_out`` families never used for training;
Spearman with humans comes from the test splits and zero-shot sets. Results: ``harden.json``
and ``harden.md``; ``round_0/`` (base), ``rounds/round_<k>/`` (train and validation attacks,
model), ``test_round_<k>/`` (test attacks). ``--resume`` reuses finished models and attack rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from robusteval.training.data import SPLIT_SCHEME, check_splits, read_digest
from robusteval.training.rounds import RoundsSpec, adversarial_rounds, load_victim, round_settings, train_base

from robusteval.asr import summarize
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


def asr_by_family(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per family and direction: the primary-criterion ASR with its interval
    (:func:`robusteval.asr.asr_table`), families with no attacked row left out."""
    from robusteval.asr import asr_table

    return {k: v["primary"] for k, v in asr_table(rows).items() if v["primary"]["n"]}


def rounds_spec(cfg: dict[str, Any]) -> tuple[dict[str, Any], RoundsSpec]:
    """The rounds' module arguments and settings from the ``rounds:`` block (a bare number is
    the round count, with ``round_epochs``)."""
    raw = cfg.get("rounds", 2)
    if isinstance(raw, int):
        raw = {"rounds": raw}
    raw = {"epochs": int(cfg.get("round_epochs", 2)), **raw}
    return round_settings(dict(cfg.get("model") or {}), raw)


def run_seed(cfg: dict[str, Any], model_args: dict[str, Any], data_args: dict[str, Any]) -> int:
    """The run's one seed: the attacks, the data splits and the model's per-step reseeding share
    it (Lightning refuses a module and a data module whose ``seed`` hyperparameters differ, so a
    ``data.seed`` alone used to stop the run at its first training step). Seeds given in
    several places must agree."""
    given = {k: int(v) for k, v in (("seed", cfg.get("seed")), ("model.seed", model_args.get("seed")),
                                    ("data.seed", data_args.get("seed"))) if v is not None}
    if len(set(given.values())) > 1:
        raise RobustevalError("harden config: " + ", ".join(f"{k} = {v}" for k, v in given.items()) + " differ; set "
                              "the top-level seed only (the attacks, the data splits and the model share it)")
    return next(iter(given.values()), 0)


def harden_keys() -> set[str]:
    """The keys of a ``harden`` config dict: :class:`robusteval.config.harden.HardenConfig`'s
    fields but where the output goes (``out_dir``, ``resume``) and ``data_dir``, which
    :func:`harden` takes as arguments."""
    import dataclasses

    from robusteval.config.harden import HardenConfig

    return {f.name for f in dataclasses.fields(HardenConfig)} - {"out_dir", "resume", "data_dir"}


def harden(cfg: dict[str, Any], out_dir: str | Path, resume: bool = False,
           data_dir: str | None = None) -> dict[str, Any]:
    from robusteval import attacks, data
    from robusteval.attacks.criteria import Criteria
    from robusteval.attacks.runner import run_attacks
    from robusteval.data.select import select
    from robusteval.results import claim_folder, fingerprint_data_dir, run_fingerprint, samples_digest

    allowed = harden_keys()
    unknown = set(cfg) - allowed
    if unknown:
        raise RobustevalError(f"harden config: unknown key(s) {sorted(unknown)}; "
                              f"allowed: {', '.join(sorted(allowed))}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kind = str(cfg.get("module", "cross-encoder"))
    model_args = dict(cfg.get("model") or {})
    data_args = dict(cfg.get("data") or {})
    if data_dir:
        data_args["data_dir"] = data_dir
    seed = run_seed(cfg, model_args, data_args)
    model_args["seed"] = data_args["seed"] = seed
    round_model, spec = rounds_spec({**cfg, "model": model_args})
    acfg = dict(cfg.get("attack") or {})
    if "dataset" not in acfg or "attacks" not in acfg:
        raise RobustevalError("harden config needs attack: {dataset, attacks}")
    test_rounds = str(cfg.get("test_rounds", "chosen"))
    if test_rounds not in ("chosen", "all"):
        raise RobustevalError(f"test_rounds must be 'chosen' (base and chosen model) or 'all', got {test_rounds!r}")
    accelerator = str(cfg.get("accelerator", "auto"))
    held_out = set(acfg.get("held_out") or [])
    dataset = acfg["dataset"]
    samples = select(data.load(dataset, data_args.get("data_dir")), acfg.get("select", "best-per-context"),
                     acfg.get("select_aspect"))
    splits = split_samples(samples, dataset, data_args)
    check_splits(splits, dataset, float(data_args.get("val_fraction", 0.1)), float(data_args.get("test_fraction", 0.2)),
                 int(data_args.get("seed", 0)), "harden")
    test_pool = splits["test"][: acfg.get("test_limit")]
    all_attacks = attacks.select(acfg["attacks"], seed, acfg.get("attack_options"))
    train_attacks = [a for a in all_attacks if a.family not in held_out]
    budget = int(acfg.get("budget", 100))
    criteria = Criteria.from_config(cfg.get("criteria"))
    # before any work: a resumed run continues only the same run, even one killed in round 0
    # the data folder the run reads, resolved ($ROBUSTEVAL_DATA included), and every dataset it
    # trains or tests on, ratings too: a resume against another folder, or after a rating
    # changed, would reuse models trained on the old data
    claim_folder(out, run_fingerprint(command="harden", config=cfg, split=SPLIT_SCHEME,
                                      data_dir=fingerprint_data_dir(data_args.get("data_dir")),
                                      samples=samples_digest(samples),
                                      training_data=read_digest(data_args, cfg.get("pretrain"))), resume)
    base = train_base(out / "round_0", kind, model_args, data_args, int(cfg.get("epochs", 3)), cfg.get("pretrain"),
                      resume, accelerator)
    result = adversarial_rounds(out / "rounds", kind=kind, model_args=round_model, data_args=data_args, base=base,
                                train_pool=splits["train"], val_pool=splits["val"], attacks=train_attacks, spec=spec,
                                budget=budget, dataset=dataset, criteria=criteria, resume=resume,
                                accelerator=accelerator)
    records = result["rounds"]
    tested = [r for r in records if test_rounds == "all" or r["round"] == 0 or r["kept"]]
    for r in tested:
        log = run_attacks(test_pool, all_attacks, load_victim(kind, r["export"], model_args),
                          out / f"test_round_{r['round']}" / "results.jsonl", resume=resume, budget=budget,
                          dataset=dataset, criteria=criteria)
        rows = list(log)
        write_json(out / f"test_round_{r['round']}" / "summary.json", {"dataset": dataset, "attacks": summarize(rows)})
        r["test_asr"] = asr_by_family(rows)
    state = {"module": kind, "split": SPLIT_SCHEME, "rounds": records, "chosen": result["chosen"]["round"],
             "held_out_families": sorted(held_out), "train_attacks": sorted(a.name for a in train_attacks),
             "config": cfg}
    write_json(out / "harden.json", state)
    (out / "harden.md").write_text(markdown(state, held_out), encoding="utf-8")
    return state


def markdown(state: dict[str, Any], held_out: set[str]) -> str:
    from robusteval.compare.report_md import worst_set
    from robusteval.stats import pct

    rounds = state["rounds"]
    head = "| | " + " | ".join(f"round {r['round']}" for r in rounds) + " |"
    sep = "|---|" + "---|" * len(rounds)

    def num(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    lines = ["## Rounds and the validation gate", "",
             "Round 0: the base (trained on human judgments). Round k: the kept model of the rounds before "
             "it, trained further on the adversarial examples that fooled it on the train contexts. Chosen: "
             f"round {state['chosen']} (the best validation objective among rounds whose validation Spearman "
             "stayed within the tolerance of the base's).", "", head, sep,
             "| val Spearman | " + " | ".join(num(r["val_spearman"]) for r in rounds) + " |",
             "| worst validation set (change [95% CI]) | " + " | ".join(worst_set(rounds[0], r) for r in rounds) + " |",
             "| val ASR (training attacks, val contexts) | " +
             " | ".join(pct(r["val_asr_detail"]) if r["val_asr_detail"].get("n") else "n/a" for r in rounds) + " |",
             "| objective | " + " | ".join(num(r["objective"]) for r in rounds) + " |",
             "| within tolerance | " + " | ".join("yes" if r["valid"] else "**no**" for r in rounds) + " |",
             "| kept | " + " | ".join("**yes**" if r["kept"] else "" for r in rounds) + " |",
             "| adversarial examples added | " + " | ".join(str(r["added"]) for r in rounds) + " |"]
    tested = [r for r in rounds if "test_asr" in r]
    fams = sorted({f for r in tested for f in r["test_asr"]})
    thead = "| family | " + " | ".join(f"round {r['round']}" for r in tested) + " |"
    tsep = "|---|" + "---|" * len(tested)
    lines += ["", "## ASR (%, 95 % interval) on the test contexts", "",
              "R- rows: beats-reference; R+ rows: the invariance criterion (the score moved by more than the "
              "tolerance). Families marked (held out) were never trained on.", "", thead, tsep]
    for f in fams:
        tag = " (held out)" if f.split(" (")[0] in held_out else ""
        lines.append(f"| {f}{tag} | " + " | ".join(pct(r["test_asr"].get(f)) if f in r["test_asr"] else "n/a"
                                                    for r in tested) + " |")
    keys = sorted({k for r in rounds for k in r["test"] if k.startswith("test_spearman")})
    lines += ["", "## Spearman with humans on the test splits and zero-shot sets", "", head, sep]
    for k in keys:
        lines.append(f"| {k.removeprefix('test_spearman/') if '/' in k else 'mean'} | " +
                     " | ".join(num(r["test"].get(k)) for r in rounds) + " |")
    return "\n".join(lines) + "\n"
