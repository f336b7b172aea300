"""The ``robusteval`` command line: ``robusteval <command> --help`` for each command.

Every command's config is a dataclass in :mod:`robusteval.config`, parsed by jsonargparse:
``--config FILE.yaml``, a flag per key with dotted overrides, ``--print_config``; a bad key or
flag ends in one line ``robusteval <command>: error: ...`` (exit 2) before any work.
``robusteval train`` is LightningCLI (jsonargparse too).

An error is one line. With ``ROBUSTEVAL_TRACEBACK=1`` in the environment the line is preceded
by the whole traceback, the errors it was raised from included, so a bug inside a metric's or a
config's constructor can be told from a mistake in the config. A plain ``ValueError`` (not one
of :mod:`robusteval.errors`) gets a second line saying so.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

from jsonargparse import ArgumentParser

from robusteval.cli.common import Command
from robusteval.errors import RobustevalError
from robusteval.signals import Terminated, stopping_on_sigterm


def commands() -> dict[str, Command]:
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

    table: dict[str, Command] = {}
    for module in (setup_cmd, data_cmd, metrics_cmd, score_cmd, metaeval_cmd, attack_cmd, salient_cmd, guard_cmd,
                   harden_cmd, compare_cmd):
        table.update((c.name, c) for c in module.COMMANDS)
    return table


GROUP_HELP = {"data": "list or inspect datasets", "metrics": "list metrics", "attacks": "list attacks",
              "detectors": "list detectors", "guard": "calibrate and evaluate input-sanitization detectors",
              "salient": "train the salient-word tagger (broken-sentence attack)"}


def build_parser(table: dict[str, Command] | None = None) -> ArgumentParser:
    """``robusteval`` with every command as a subcommand (``--help`` and unknown commands)."""
    table = table if table is not None else commands()
    parser = ArgumentParser(prog="robusteval", description="Attack, guard and harden automatic NLG evaluators.",
                            exit_on_error=False)
    sub = parser.add_subcommands(dest="command", required=True)
    groups: dict[str, list[tuple[str, Command]]] = {}
    for name, cmd in table.items():
        head, _, action = name.partition(" ")
        if not action:
            sub.add_subcommand(name, cmd.parser(), help=cmd.help)
            continue
        groups.setdefault(head, []).append((action, cmd))
    for head, actions in groups.items():  # jsonargparse wants the levels added in order
        group = ArgumentParser(prog=f"robusteval {head}", exit_on_error=False)
        sub.add_subcommand(head, group, help=GROUP_HELP.get(head, ""))
        level = group.add_subcommands(dest="action", required=True)
        for action, cmd in actions:
            level.add_subcommand(action, cmd.parser(), help=cmd.help)
    sub.add_subcommand("train", ArgumentParser(prog="robusteval train", add_help=False),
                       help="LoRA fine-tuning of evaluators (LightningCLI: robusteval train --help)")
    return parser


def _find(argv: list[str], table: dict[str, Command]) -> tuple[Command | None, int]:
    if len(argv) >= 2 and f"{argv[0]} {argv[1]}" in table:
        return table[f"{argv[0]} {argv[1]}"], 2
    if argv and argv[0] in table:
        return table[argv[0]], 1
    return None, 0


def parse(argv: Sequence[str], table: dict[str, Command] | None = None) -> tuple[Command, Any]:
    """``argv`` -> (the command, its validated config or flags namespace). ``--help`` and
    ``--print_config`` print and raise SystemExit(0); errors raise RobustevalError."""
    from robusteval.config.parsing import ConfigError, did_you_mean, explain, parse_command

    argv = list(argv)
    table = table if table is not None else commands()
    cmd, n = _find(argv, table)
    if cmd is None:
        heads = sorted({c.partition(" ")[0] for c in table} | {"train"})
        word = argv[0] if argv else ""
        if not word or word in ("-h", "--help"):
            build_parser(table).parse_args(argv or ["--help"])  # prints the help and exits
        if word in heads:  # a group given without (or with an unknown) action
            actions = [c.partition(" ")[2] for c in table if c.startswith(f"{word} ")]
            got = argv[1] if len(argv) > 1 and not argv[1].startswith("-") else None
            if got is None and len(argv) > 1:
                build_parser(table).parse_args(argv)  # robusteval guard --help
            hint = did_you_mean(got, actions) if got else ""
            raise ConfigError(f"{'unknown action ' + repr(got) if got else 'give an action'}{hint} "
                              f"({word} {' | '.join(actions)})")
        raise ConfigError(f"unknown command {word!r}{did_you_mean(word, heads)} (commands: {', '.join(heads)})")
    parser = cmd.parser()
    rest = argv[n:]
    if cmd.name == "quickstart":
        from robusteval.cli.compare_cmd import quickstart_argv

        rest = quickstart_argv(rest)
    if cmd.cls is not None:
        return cmd, parse_command(parser, cmd.cls, rest, cmd.aliases)
    try:
        return cmd, parser.parse_args(rest)
    except SystemExit:
        raise
    except Exception as exc:
        raise ConfigError(explain(str(exc), None, parser)) from None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "train":  # LightningCLI parses its own arguments (fit/validate/test, --config)
        from robusteval.training.cli import main as train_main

        try:
            return train_main(argv[1:])
        except RobustevalError as exc:
            report_error("robusteval train", exc)
            return 2
        except Terminated as stop:
            print(f"\nrobusteval train: terminated (SIGTERM); {stop}", file=sys.stderr)
            return 143
    table = commands()
    found, _ = _find(argv, table)
    name = found.name if found is not None else (argv[0] if argv and not argv[0].startswith("-") else "")
    where = f"robusteval {name}".rstrip()
    try:
        cmd, cfg = parse(argv, table)
    except RobustevalError as exc:
        report_error(where, exc)
        return 2
    try:
        with owning(cfg), executing(cfg), stopping_on_sigterm():  # refused before a Ray cluster starts
            return int(cmd.run(cfg) or 0)
    except (RobustevalError, FileExistsError, ValueError) as exc:
        report_error(where, exc)
        return 2
    except KeyboardInterrupt:
        print(f"\n{where}: interrupted; {resume_hint(cfg)}", file=sys.stderr)
        return 130
    except Terminated:
        print(f"\n{where}: terminated (SIGTERM); {resume_hint(cfg)}", file=sys.stderr)
        return 143
    except OSError as exc:  # disk full, read-only folder, permissions: one line, not a traceback
        at = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"{where}: error: cannot write or read{at}: {exc.strerror or exc}; {resume_hint(cfg)}",
              file=sys.stderr)
        return 74  # EX_IOERR


def report_error(where: str, exc: BaseException) -> None:
    """``exc`` as the one line ``<where>: error: ...`` on stderr; the whole traceback before it
    when ``ROBUSTEVAL_TRACEBACK`` is set (to anything but "" or "0"). A plain ValueError may be
    an option check or a bug inside a metric or a library, which one line cannot tell apart, so
    it gets a second line saying how to see where it was raised."""
    full = os.environ.get("ROBUSTEVAL_TRACEBACK", "") not in ("", "0")
    if full:
        traceback.print_exception(exc, file=sys.stderr)
    print(f"{where}: error: {exc}", file=sys.stderr)
    if isinstance(exc, ValueError) and not isinstance(exc, RobustevalError) and not full:
        print(f"{where}: (a {type(exc).__name__}: ROBUSTEVAL_TRACEBACK=1 shows where it was raised)", file=sys.stderr)


@contextlib.contextmanager
def executing(cfg: Any) -> Iterator[None]:
    """Runs the command's attack, scoring and detection loops on the backend its config names
    (``--backend``, :class:`robusteval.config.common.Execution`); a local Ray instance started
    for it is stopped afterwards."""
    make = getattr(cfg, "executor", None)
    if not callable(make) or getattr(cfg, "backend", "local") == "local":
        yield
        return
    from robusteval import execution

    executor = make()
    try:
        with execution.use(executor):
            yield
    finally:
        executor.shutdown()


@contextlib.contextmanager
def owning(cfg: Any) -> Iterator[None]:
    """A command with an ``--out-dir`` holds that folder's writer lock while it runs
    (:func:`robusteval.results.exclusive_folder`): a second process on the same folder is refused."""
    from robusteval.results import distributed_helper, exclusive_folder

    out = getattr(cfg, "out_dir", None)
    if out is None or distributed_helper():
        yield
        return

    with exclusive_folder(out):
        yield


def resume_hint(cfg: Any) -> str:
    """What to do after an interrupted or failed run: every finished row is already on disk."""
    out = getattr(cfg, "out_dir", None)
    if out is None:
        return "nothing was written"
    return (f"finished work is saved in {out}; rerun the same command with --resume to continue "
            "where it stopped")


if __name__ == "__main__":
    sys.exit(main())
