"""Append-only JSONL results that survive a kill and resume without loss or duplicates, the
logged scoring loop built on them, and the provenance every result file carries."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from robusteval.errors import DataFormatError, RobustevalError
from robusteval.types import Sample


class JsonlLog:
    """One JSON object per line, keyed by ``key``; a torn last line (killed mid-write) is
    dropped on open, so a resumed run rewrites exactly the rows that were not finished."""

    def __init__(self, path: str | os.PathLike[str], key: str = "id", resume: bool = False) -> None:
        self.path = Path(path)
        self.key = key
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            if not resume:
                raise FileExistsError(f"{self.path} exists: pass --resume to continue it, or "
                                      "choose another --out-dir")
            self._load()

    def _load(self) -> None:
        raw = self.path.read_bytes()
        good_end = 0
        for line in raw.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # torn write: drop it
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                raise DataFormatError(self.path, "corrupt line (not JSON)",
                                      line=raw[:good_end].count(b"\n") + 1) from None
            self.rows[str(obj[self.key])] = obj
            good_end += len(line)
        if good_end != len(raw):
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)

    def __contains__(self, key: object) -> bool:
        return str(key) in self.rows

    def append(self, rows: Iterable[Mapping[str, Any]]) -> None:
        lines = []
        for row in rows:
            k = str(row[self.key])
            if k in self.rows:
                continue
            self.rows[k] = dict(row)
            lines.append(json.dumps(row, ensure_ascii=False, default=_jsonable) + "\n")
        if lines:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write("".join(lines))
                fh.flush()
                os.fsync(fh.fileno())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows.values())

    def __len__(self) -> int:
        return len(self.rows)


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a JSONL file without modifying it: a torn last line (a killed writer) is
    skipped, a corrupt line before the end is an error naming the line."""
    p = Path(path)
    rows = []
    lines = p.read_bytes().splitlines(keepends=True)
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if n == len(lines) and not line.endswith(b"\n"):
                break
            raise DataFormatError(p, f"not JSON: {e.msg}", line=n) from None
    return rows


def _jsonable(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=_jsonable) + "\n",
                   encoding="utf-8")
    os.replace(tmp, path)


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[1]
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
