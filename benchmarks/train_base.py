"""Round 0 of a harden config alone: the base evaluator (self-supervised pre-training, then the
human judgments), on the config's backbone or another (``--checkpoint mpnet``), without the
adversarial rounds and the attacks. Prints the validation and test metrics that ``fit.json``
records and the export folder, which ``benchmarks/base_evaluator.py`` compares with BERTScore.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/train_base.py \\
        --config configs/harden/dialogue_minilm.yaml --checkpoint mpnet --out runs/base-mpnet

Lightning picks the accelerator (the config's ``accelerator``, default ``auto``: a GPU when
there is one); ``--seed`` replaces the config's seed (splits, model and data order share it).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml
from robusteval.training.harden import run_seed
from robusteval.training.rounds import train_base


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="a harden config (module, model, data, pretrain, epochs, seed)")
    ap.add_argument("--checkpoint", help="the backbone instead of the config's (minilm, mpnet, or a folder)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, help="the run's seed instead of the config's (splits, model, data order)")
    ap.add_argument("--accelerator", help="Lightning accelerator (default: the config's, else auto)")
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args(argv)
    cfg = yaml.safe_load(Path(args.config).read_text(encoding="utf-8"))
    model_args, data_args = dict(cfg.get("model") or {}), dict(cfg.get("data") or {})
    if args.checkpoint:
        model_args["checkpoint"] = args.checkpoint
    if args.seed is not None:  # one seed, as harden has it: the config's places give way to it
        cfg["seed"] = args.seed
        model_args.pop("seed", None)
        data_args.pop("seed", None)
    model_args["seed"] = data_args["seed"] = run_seed(cfg, model_args, data_args)
    t0 = time.perf_counter()
    fitted = train_base(args.out, str(cfg.get("module", "cross-encoder")), model_args, data_args,
                        int(cfg.get("epochs", 3)), cfg.get("pretrain"), args.resume,
                        args.accelerator or str(cfg.get("accelerator", "auto")))
    print(json.dumps({"export": fitted.export, "device": fitted.device,
                      "seconds": round(time.perf_counter() - t0, 1), "val": fitted.val, "test": fitted.test}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
