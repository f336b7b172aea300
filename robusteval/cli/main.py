"""The ``robusteval`` command line: ``robusteval <command> --help`` for each command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from robusteval.errors import RobustevalError


def build_parser() -> argparse.ArgumentParser:
    from robusteval.cli import (
        attack_cmd,
        compare_cmd,
        data_cmd,
        guard_cmd,
        harden_cmd,
        metaeval_cmd,
        metrics_cmd,
        salient_cmd,
        score_cmd,
        setup_cmd,
    )

    parser = argparse.ArgumentParser(
        prog="robusteval",
        description="Attack, guard and harden automatic NLG evaluators.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (setup_cmd, data_cmd, metrics_cmd, score_cmd, metaeval_cmd, attack_cmd, salient_cmd, guard_cmd,
                   harden_cmd, compare_cmd):
        module.register(sub)
    # parsed by LightningCLI in main(); listed here so `robusteval --help` shows it
    sub.add_parser("train", help="LoRA fine-tuning of evaluators (robusteval train --help)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "train":  # LightningCLI parses its own arguments (fit/validate/test, --config)
        from robusteval.training.cli import main as train_main

        try:
            return train_main(argv[1:])
        except RobustevalError as exc:
            print(f"robusteval train: error: {exc}", file=sys.stderr)
            return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (RobustevalError, FileExistsError, ValueError) as exc:
        print(f"robusteval {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nrobusteval {args.command}: interrupted; {resume_hint(args)}", file=sys.stderr)
        return 130
    except OSError as exc:  # disk full, read-only folder, permissions: one line, not a traceback
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"robusteval {args.command}: error: cannot write or read{where}: {exc.strerror or exc}; "
              f"{resume_hint(args)}", file=sys.stderr)
        return 74  # EX_IOERR


def resume_hint(args: argparse.Namespace) -> str:
    """What to do after an interrupted or failed run: every finished row is already on disk."""
    out = getattr(args, "out_dir", None)
    if out is None:
        return "nothing was written"
    return (f"finished work is saved in {out}; rerun the same command with --resume to continue "
            "where it stopped")


if __name__ == "__main__":
    sys.exit(main())
