"""``robusteval harden``: the base, then gated adversarial rounds (attack -> train on what
fooled the model -> validate) for any evaluator module (``module: cross-encoder`` or
``boolqa``); writes ``harden.json`` and ``harden.md`` (the gate per round, ASR per family,
Spearman per set) under ``--out-dir``. See ``robusteval.training.harden`` and
``robusteval.training.rounds``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from robusteval.cli.common import add_data_dir, load_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("harden", help="adversarial training rounds for a learned evaluator", description=__doc__)
    p.add_argument("--config", required=True, help="YAML (configs/harden/*.yaml)")
    p.add_argument("--rounds", type=int, help="override the config's number of rounds")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--resume", action="store_true", help="skip finished rounds, continue attack logs")
    add_data_dir(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from robusteval.training.harden import harden

    cfg = load_config(args.config)
    if args.rounds is not None:  # only the count: the block's other settings stay
        if isinstance(cfg.get("rounds"), dict):
            cfg["rounds"] = {**cfg["rounds"], "rounds": args.rounds}
        else:
            cfg["rounds"] = args.rounds
    harden(cfg, args.out_dir, resume=args.resume, data_dir=args.data_dir)
    print((Path(args.out_dir) / "harden.md").read_text(encoding="utf-8"))
    print(f"wrote {args.out_dir}/harden.json and {args.out_dir}/harden.md")
    return 0
