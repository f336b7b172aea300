"""Helpers shared by CLI commands: the command table, metric loading, outputs (provenance and
the logged scoring loop live in :mod:`robusteval.results`; every command's config is a
dataclass in :mod:`robusteval.config`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonargparse import ArgumentParser

from robusteval.config.parsing import Alias, command_parser
from robusteval.results import (  # noqa: F401  (re-exported: the commands import them from here)
    git_commit,
    guard_row,
    provenance,
    score_with_log,
    slug,
    write_json,
)


@dataclass
class Command:
    """One ``robusteval`` command (``score``) or action (``guard calibrate``): a config
    dataclass parsed by jsonargparse (``cls``), or plain flags (``flags``, the listings)."""

    name: str
    help: str
    run: Callable[[Any], int]
    cls: type | None = None
    description: str | None = None
    aliases: dict[str, Alias] = field(default_factory=dict)
    flags: Callable[[ArgumentParser], None] | None = None

    def parser(self) -> ArgumentParser:
        prog = f"robusteval {self.name}"
        if self.cls is not None:
            return command_parser(prog, self.cls, self.description, self.aliases)
        parser = ArgumentParser(prog=prog, description=self.description, exit_on_error=False, allow_abbrev=False)
        if self.flags is not None:
            self.flags(parser)
        return parser


def check_name(kind: str, spec: Any) -> None:
    """Fail before any work on a spec that names nothing: ``robusteval.<kind>.info`` knows the
    registered and entry-point names, imports "module:attr" and looks for files."""
    if not isinstance(spec, str):
        return
    import importlib

    importlib.import_module(f"robusteval.{kind}").info(spec)


def load_metric(name: str, options: dict[str, Any] | None = None, guard: Any = None) -> Any:
    """``metrics.load(name, **options)``, wrapped by ``detectors.guard`` when a guard block
    (:class:`robusteval.config.common.GuardConfig`) is given."""
    from robusteval import metrics

    metric = metrics.load(name, **(options or {}))
    if guard is None:
        return metric
    from robusteval import detectors

    # the guard remembers how to rebuild itself from its parts' recipes (a Ray worker builds it)
    return detectors.guard(metric, guard.detectors, policy=guard.policy, penalty=guard.penalty,
                           thresholds=guard.thresholds, prefetch=guard.prefetch)


def write_outputs(out: Path, stem: str, report: dict[str, Any], markdown: str, extra: Sequence[Path] = ()) -> None:
    """``<stem>.json`` and ``<stem>.md`` under ``out``; prints the Markdown and where it all went."""
    write_json(out / f"{stem}.json", report)
    (out / f"{stem}.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"wrote {', '.join(str(p) for p in (*extra, out / f'{stem}.json'))} and {out / f'{stem}.md'}")


def json_flag(parser: ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="JSON array, one object per entry")


def short_origin(origin: Any) -> str:
    """A listing's origin cell: ``built-in``, ``module:attr``, a file's kind, or for an entry
    point the distribution it comes from (``plugin plugdist 0.3``); ``--json`` keeps the whole
    ``origin`` (``entry point NAME = module:attr (plugdist 0.3)``)."""
    text = str(origin or "")
    if text.startswith("entry point "):
        dist = text.rpartition("(")[2].rstrip(")") if text.endswith(")") else ""
        return f"plugin {dist}".strip()
    return text


def print_listing(rows: list[dict[str, Any]], as_json: bool, columns: Sequence[tuple[str, int]]) -> None:
    """A registry listing: a JSON array, or one line per entry with the given column widths
    (the last column unpadded; an ``origin`` column shown by :func:`short_origin`)."""
    import json

    if as_json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    for r in rows:
        cells = {k: short_origin(r.get(k)) if k == "origin" else str(r.get(k) or "") for k, _ in columns}
        print(" ".join(f"{cells[k]:<{w}}" if w else cells[k] for k, w in columns).rstrip())
