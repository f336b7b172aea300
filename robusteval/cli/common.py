"""Helpers shared by CLI commands: configs, k=v options, metric loading, outputs (provenance and
the logged scoring loop live in :mod:`robusteval.results`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from robusteval.errors import RobustevalError
from robusteval.results import (  # noqa: F401  (re-exported: the commands import them from here)
    git_commit,
    guard_row,
    provenance,
    score_with_log,
    slug,
    write_json,
)


def load_config(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    p = Path(path)
    if not p.is_file():
        raise RobustevalError(f"config {p} not found")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise RobustevalError(f"config {p}: invalid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise RobustevalError(f"config {p}: expected a mapping at the top level")
    return data


def parse_options(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``["k=v", ...]`` -> dict, values parsed as YAML scalars (numbers, booleans, lists)."""
    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RobustevalError(f"option {pair!r} is not key=value")
        out[key.strip()] = yaml.safe_load(value)
    return out


def load_metric(name: str, options: dict[str, Any] | None = None, guard: dict[str, Any] | None = None) -> Any:
    """``metrics.load(name, **options)``, wrapped by ``detectors.guard`` when a ``guard:``
    block ({detectors, policy, penalty, thresholds}) is given."""
    from robusteval import metrics

    metric = metrics.load(name, **(options or {}))
    if not guard:
        return metric
    from robusteval import detectors

    unknown = set(guard) - {"detectors", "policy", "penalty", "thresholds"}
    if unknown:
        raise RobustevalError(f"unknown guard option(s) {sorted(unknown)}; use detectors, policy, penalty, thresholds")
    if not guard.get("detectors"):
        raise RobustevalError("a guard block needs detectors: [...]")
    return detectors.guard(metric, guard["detectors"], policy=guard.get("policy", "floor"),
                           penalty=float(guard.get("penalty", 0.5)), thresholds=guard.get("thresholds"))


def add_data_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help="human-judgment data folder (default: $ROBUSTEVAL_DATA)")


def write_outputs(out: Path, stem: str, report: dict[str, Any], markdown: str, extra: Sequence[Path] = ()) -> None:
    """``<stem>.json`` and ``<stem>.md`` under ``out``; prints the Markdown and where it all went."""
    write_json(out / f"{stem}.json", report)
    (out / f"{stem}.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"wrote {', '.join(str(p) for p in (*extra, out / f'{stem}.json'))} and {out / f'{stem}.md'}")


def print_listing(rows: list[dict[str, Any]], as_json: bool, columns: Sequence[tuple[str, int]]) -> None:
    """A registry listing: a JSON array, or one line per entry with the given column widths
    (the last column unpadded)."""
    import json

    if as_json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        print(" ".join(f"{r.get(k) or '':<{w}}" if w else str(r.get(k) or "") for k, w in columns))
