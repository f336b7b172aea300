"""Append-only JSONL results that survive a kill and resume without loss or duplicates."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from robusteval.errors import DataFormatError


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
