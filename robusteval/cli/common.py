"""Helpers shared by CLI commands: configs, k=v options, provenance, the scoring loop."""

from __future__ import annotations

import argparse
import datetime as _dt
import platform
import re
import subprocess
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robusteval.errors import RobustevalError
from robusteval.results import JsonlLog, write_json
from robusteval.types import Sample


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


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(config: dict[str, Any] | None = None) -> dict[str, Any]:
    pkgs = {}
    for name in ("robusteval", "torch", "transformers", "bert-score", "sacrebleu", "rouge-score",
                 "nltk", "spacy", "peft", "lightning", "textattack", "numpy", "scipy"):
        try:
            pkgs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pkgs[name] = None
    return {"created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(), "platform": platform.platform(),
            "git_commit": git_commit(), "packages": pkgs, "config": config or {}}


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


def guard_row(metric: Any, sample: Sample) -> dict[str, Any]:
    """``{"guard": details}`` for a guarded metric's last scoring of ``sample``, else ``{}``."""
    details = getattr(metric, "details", None)
    found = details(sample) if callable(details) else None
    return {"guard": found} if found is not None else {}


def score_with_log(metric: Any, samples: Sequence[Sample], log_path: Path, resume: bool,
                   chunk: int = 32, desc: str = "scoring") -> np.ndarray:
    """Score ``samples`` in chunks, appending ``{id, score}`` rows to ``log_path`` as they
    finish; with ``resume`` rows already there are reused, so a killed run loses nothing."""
    from tqdm import tqdm

    log = JsonlLog(log_path, key="id", resume=resume)
    ids = [s.id for s in samples]
    if len(set(ids)) != len(ids):
        raise RobustevalError("sample ids are not unique; cannot log scores by id")
    todo = [s for s in samples if s.id not in log]
    with tqdm(total=len(samples), initial=len(samples) - len(todo), desc=desc, unit="sample",
              dynamic_ncols=True, leave=False) as bar:
        for start in range(0, len(todo), chunk):
            part = todo[start:start + chunk]
            scores = metric.score(part)
            log.append({"id": s.id, "score": float(v), **guard_row(metric, s)}
                       for s, v in zip(part, scores, strict=True))
            bar.update(len(part))
    return np.array([log.rows[i]["score"] for i in ids], dtype=float)


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
