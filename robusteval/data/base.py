"""Dataset registry and strict, line-aware readers shared by every loader."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robusteval.errors import DataFormatError
from robusteval.registry import Registry
from robusteval.text import invalid_unicode
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
            "origin": "built-in",  # a plugin's, a file's or module:attr's info says otherwise in extra
            **dict(self.extra),
        }


def plugin_factory(obj: Any, name: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    """How the dataset registry calls a plugin's (or ``module:attr``'s) object: a function with
    ``**options`` (and ``data_dir`` when it takes one), any other value as it is; what it gives
    is turned into samples by :func:`robusteval.data.load`."""
    import inspect

    from robusteval.errors import RobustevalError

    if callable(obj):
        try:
            takes_dir = "data_dir" in inspect.signature(obj).parameters
        except (TypeError, ValueError):
            takes_dir = False

        def call(data_dir: Any = None, **options: Any) -> Any:
            return obj(data_dir=data_dir, **options) if takes_dir else obj(**options)

        doc = (inspect.getdoc(obj) or "").strip()
        return call, {"task": getattr(obj, "task", ""), "description": doc.splitlines()[0] if doc else ""}

    def value(data_dir: Any = None, **options: Any) -> Any:
        if options:
            raise RobustevalError(f"dataset {name!r} is a value, not a function; options {sorted(options)} "
                                  "cannot apply")
        return obj

    return value, {"task": "", "description": f"{type(obj).__name__} value"}


DATASETS: Registry[Any] = Registry("dataset", group="robusteval.datasets", adapt=plugin_factory)
_INFOS: dict[str, DatasetInfo] = {}


def register_dataset(info: DatasetInfo) -> Callable[[Loader], Loader]:
    """Register ``loader(path) -> samples`` under ``info.name``."""

    def decorator(loader: Loader) -> Loader:
        DATASETS.register(info.name, task=info.task, path=info.path)(loader)  # type: ignore[arg-type]
        _INFOS[info.name] = info
        return loader

    return decorator


def dataset_info(name: str) -> DatasetInfo:
    """A registered dataset's info; for a plugin's dataset, what its entry point says (no file,
    no scales: they come with its samples), ``origin`` naming the entry point."""
    DATASETS.get(name)
    if name in _INFOS:
        return _INFOS[name]
    entry = DATASETS.info(name)
    return DatasetInfo(name=name, path="", task=str(entry.get("task") or ""),
                       description=str(entry.get("description") or ""), scales={},
                       source=str(entry.get("distribution") or ""), level="",
                       extra={"origin": entry["origin"]})


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


# A JSON \u escape of a UTF-16 surrogate (an odd number of backslashes before the "u"): the
# only way a lone surrogate gets into a str read from a UTF-8 file.
_SURROGATE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LOW_ESCAPE = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def find_invalid_text(value: Any, where: str = "") -> tuple[str, str] | None:
    """(field path, problem) of the first string in a parsed JSON value (keys included) that
    is not valid Unicode, e.g. ``("responses[2].text", "invalid Unicode: lone surrogate ...")``."""
    if isinstance(value, str):
        problem = invalid_unicode(value)
        return (where or "(value)", problem) if problem else None
    if isinstance(value, dict):
        for k, v in value.items():
            key = str(k)
            if invalid_unicode(key):
                return (where or "(object)", f"key {key!r}: {invalid_unicode(key)}")
            found = find_invalid_text(v, f"{where}.{key}" if where else key)
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = find_invalid_text(v, f"{where}[{i}]")
            if found:
                return found
    return None


def _check_json_text(path: Path, text: str, value: Any, line: int | None = None) -> None:
    """DataFormatError (file, line, field) if ``value``, parsed from ``text``, holds a lone
    surrogate; files without any surrogate escape are not walked."""
    escapes = list(_SURROGATE_ESCAPE.finditer(text))
    if not escapes:
        return
    found = find_invalid_text(value)
    if found is None:
        return  # every escape was half of a valid pair (an emoji written as \ud83d\ude00)
    field, problem = found
    if line is None:  # whole-file JSON: the line of the first unpaired escape
        line = _first_lone_escape_line(text, escapes)
    raise DataFormatError(path, problem, line=line, field=field)


def _first_lone_escape_line(text: str, escapes: list[re.Match[str]]) -> int | None:
    """Line of the first surrogate escape that is not half of a high+low pair."""
    pair_end = -1
    for m in escapes:
        if m.start() < pair_end:
            continue  # the low half of the pair just seen
        code = int(text[m.end() - 4:m.end()], 16)
        if code <= 0xDBFF and _LOW_ESCAPE.match(text, m.end()):
            pair_end = m.end() + 6
            continue
        return text.count("\n", 0, m.start()) + 1
    return None


def read_json(path: Path) -> Any:
    """A whole JSON file; invalid JSON or a lone surrogate is a DataFormatError with the line."""
    text = read_text(path)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from None
    _check_json_text(path, text, value)
    return value


def read_json_list(path: Path) -> list[Mapping[str, Any]]:
    """A JSON list of objects (see :func:`read_json_records` for their line numbers)."""
    return [rec for _, rec in read_json_records(path)]


def read_json_records(path: Path) -> list[tuple[int, Mapping[str, Any]]]:
    """(line where the object starts, object) for a file holding a JSON list of objects, so
    errors in a record name its real line; a lone surrogate is a DataFormatError naming the
    line and the field."""
    text = read_text(path)
    decoder = json.JSONDecoder()
    out: list[tuple[int, Mapping[str, Any]]] = []
    line, counted = 1, 0  # line number of position ``counted``

    def line_at(pos: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, pos)
        counted = pos
        return line

    pos = _skip_ws(text, 0)
    if not text.startswith("[", pos):
        read_json(path)  # a syntax error names its line; valid JSON of another shape:
        raise DataFormatError(path, "expected a JSON list of objects")
    pos = _skip_ws(text, pos + 1)
    closed = text.startswith("]", pos)
    while not closed:
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise DataFormatError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from None
        rec_line = line_at(pos)
        if not isinstance(obj, dict):
            raise DataFormatError(path, "expected a JSON list of objects", line=rec_line)
        _check_json_text(path, text[pos:end], obj, rec_line)
        out.append((rec_line, obj))
        pos = _skip_ws(text, end)
        if text.startswith(",", pos):
            pos = _skip_ws(text, pos + 1)
        elif text.startswith("]", pos):
            closed = True
        else:
            raise DataFormatError(path, "invalid JSON: expected ',' or ']'", line=line_at(pos))
    if text[pos + 1:].strip():
        raise DataFormatError(path, "invalid JSON: extra data after the list", line=line_at(pos + 1))
    return out


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def iter_jsonl(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """(line number, object) for every non-blank line of a JSONL file; invalid JSON or a lone
    surrogate in any string is a DataFormatError naming the line (and the field)."""
    # Lines end at "\n" only (JSON Lines): str.splitlines would also cut at U+2028, U+0085
    # and other characters a JSON string may hold raw.
    for lineno, line in enumerate(read_text(path).split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(path, f"invalid JSON: {exc.msg}", line=lineno) from None
        if not isinstance(obj, dict):
            raise DataFormatError(path, "expected a JSON object per line", line=lineno)
        _check_json_text(path, line, obj, lineno)
        yield lineno, obj


def iter_csv(path: Path, required: Sequence[str] = (), delimiter: str = ",") -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) for a CSV (or, with ``delimiter="\t"``, TSV) file with a header;
    checks required columns first."""
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""), delimiter=delimiter)
    header = reader.fieldnames or []
    missing = [c for c in required if c not in header]
    if missing:
        raise DataFormatError(
            path, f"missing column(s) {', '.join(missing)} (header has: {', '.join(header)})",
            line=1, field=missing[0],
        )
    for row in reader:
        yield reader.line_num, row


def csv_header(path: Path, delimiter: str = ",") -> list[str]:
    """The column names of a CSV / TSV file's header (empty for an empty file)."""
    return list(csv.DictReader(io.StringIO(read_text(path), newline=""), delimiter=delimiter).fieldnames or [])


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
    """A finite human score, else a DataFormatError naming file, line and field (NaN, inf,
    ``1e400`` and booleans are rejected, not loaded)."""
    if isinstance(value, bool):
        raise DataFormatError(path, f"not a number: {value!r}", line=line, field=key)
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise DataFormatError(path, f"not a number: {value!r}", line=line, field=key) from None
    if not math.isfinite(out):
        raise DataFormatError(path, f"non-finite score {value!r}", line=line, field=key)
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
