"""Dataset registry and strict, line-aware readers shared by every loader."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robusteval.errors import DataFormatError
from robusteval.registry import Registry
from robusteval.types import HumanScale, Sample

Loader = Callable[[Path], list[Sample]]


@dataclass(frozen=True)
class DatasetInfo:
    """What a registered dataset is: file, task, human aspects and their scales."""

    name: str
    path: str  # relative to the data folder
    task: str
    description: str
    scales: Mapping[str, HumanScale]
    source: str
    level: str = "turn"
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "task": self.task,
            "level": self.level,
            "description": self.description,
            "aspects": list(self.scales),
            "scales": {k: v.to_dict() for k, v in self.scales.items()},
            "source": self.source,
            **dict(self.extra),
        }


DATASETS: Registry[list[Sample]] = Registry("dataset")
_INFOS: dict[str, DatasetInfo] = {}


def register_dataset(info: DatasetInfo) -> Callable[[Loader], Loader]:
    """Register ``loader(path) -> samples`` under ``info.name``."""

    def decorator(loader: Loader) -> Loader:
        DATASETS.register(info.name, task=info.task, path=info.path)(loader)
        _INFOS[info.name] = info
        return loader

    return decorator


def dataset_info(name: str) -> DatasetInfo:
    DATASETS.get(name)
    return _INFOS[name]


def read_text(path: Path) -> str:
    """Read UTF-8 text; invalid bytes raise a DataFormatError naming the line."""
    if not path.is_file():
        raise DataFormatError(path, "file not found")
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataFormatError(
            path, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})", line=line
        ) from None


def read_json(path: Path) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from None


def read_json_list(path: Path) -> list[Mapping[str, Any]]:
    data = read_json(path)
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise DataFormatError(path, "expected a JSON list of objects")
    return data


def iter_jsonl(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """(line number, object) for every non-blank line of a JSONL file."""
    for lineno, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(path, f"invalid JSON: {exc.msg}", line=lineno) from None
        if not isinstance(obj, dict):
            raise DataFormatError(path, "expected a JSON object per line", line=lineno)
        yield lineno, obj


def iter_csv(path: Path, required: Sequence[str] = ()) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) for a CSV file with a header; checks required columns first."""
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    header = reader.fieldnames or []
    missing = [c for c in required if c not in header]
    if missing:
        raise DataFormatError(
            path, f"missing column(s) {', '.join(missing)} (header has: {', '.join(header)})",
            line=1, field=missing[0],
        )
    for row in reader:
        yield reader.line_num, row


def need(record: Mapping[str, Any], key: str, path: Path, line: int | None = None,
         kind: type | tuple[type, ...] = str) -> Any:
    """``record[key]``, checked for presence and type, else a DataFormatError."""
    if key not in record or record[key] is None:
        raise DataFormatError(path, "missing field", line=line, field=key)
    value = record[key]
    if not isinstance(value, kind):
        raise DataFormatError(
            path, f"expected {getattr(kind, '__name__', kind)}, got {type(value).__name__}",
            line=line, field=key,
        )
    return value


def as_float(value: Any, path: Path, line: int | None, key: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise DataFormatError(path, f"not a number: {value!r}", line=line, field=key) from None
    if out != out:  # NaN
        raise DataFormatError(path, "NaN score", line=line, field=key)
    return out


def split_turns(text: str) -> tuple[str, ...]:
    """Dialogue history with one turn per line -> tuple of non-empty, stripped turns."""
    return tuple(t.strip() for t in text.split("\n") if t.strip())


def attach_ground_truth(samples: list[Sample], group_key: str, gt: str = "Original Ground Truth",
                        second: str = "New Human Generated") -> list[Sample]:
    """USR convention: within each context, the original ground-truth response is every other
    response's reference; the ground truth itself is scored against the new human response."""
    from dataclasses import replace

    groups: dict[Any, dict[str, str]] = {}
    for s in samples:
        groups.setdefault(s.meta.get(group_key), {})[str(s.meta.get("system_id"))] = s.response
    out = []
    for s in samples:
        g = groups[s.meta.get(group_key)]
        ref = g.get(second) if str(s.meta.get("system_id")) == gt else g.get(gt)
        out.append(replace(s, reference=ref) if ref is not None and s.reference is None else s)
    return out
