"""Any JSONL / JSON / CSV / TSV / Parquet file (or list of records) of texts to evaluate.

Columns with the usual names are recognized without a mapping (case-insensitive, first match
in this order wins):

* ``response`` (required): response, prediction, hypothesis, output, completion, summary,
  candidate;
* ``reference``: reference, references, target, gold, label_text, ground_truth (a list of
  texts, or a JSON list in a CSV cell, gives several references);
* ``context``: context, source, document, article, prompt, input, dialogue, history (a list
  of turns, or one string: split into turns on newlines for dialogue, kept whole otherwise);
* ``id``: id, sample_id, example_id, uid; ``fact``, ``answer``: their own names;
* human scores: score, human_score, rating, human_rating, overall, quality, and any
  ``human_<aspect>`` column (aspect ``<aspect>``), or a ``human`` column holding
  ``{aspect: score}``; ``system_id`` (or ``system``, ``model``) goes to ``meta["system_id"]``;
  ``conversation_id`` (or ``conversation``, ``dialogue_id``, ``dialog_id``) to
  ``meta["conversation"]``: rows of one conversation share a split and a bootstrap cluster
  (without it, contexts that continue one another are joined, :mod:`robusteval.data.conversations`).

``columns`` maps Sample fields to the file's keys and wins over recognition: ``response``,
``context``, ``reference``, ``references``, ``fact``, ``answer``, ``id``, and
``human.<aspect>``; a field mapped to ``None`` or ``""`` is not read. ``human`` maps aspect ->
key (given, it replaces recognized human columns); ``scales`` gives an aspect's (low, high),
else the range its scores span in the data is recorded, marked ``observed``. ``task`` defaults to ``summarization`` when
the context is a document/article or the response a summary, else ``dialogue``; a ``task``
column sets it per row.

Every text is checked where it is read: a value of the wrong type, a lone surrogate (also one
inside a CSV ``references`` cell written as a JSON list) or a non-finite human score is a
:class:`~robusteval.errors.DataFormatError` naming the file, the line (the row for Parquet and
datasets) and the column. A file without a response column is an error listing the columns
it has and the names looked for.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from robusteval.columns import RECOGNIZED
from robusteval.data.base import (
    as_float,
    csv_header,
    find_invalid_text,
    iter_csv,
    iter_jsonl,
    read_json_records,
    split_turns,
)
from robusteval.errors import DataFormatError, EmptyDataError
from robusteval.types import TASKS, HumanScale, Sample

log = logging.getLogger(__name__)

SAMPLE_FIELDS = ("id", "response", "context", "reference", "references", "fact", "answer")
FORMATS = ("jsonl", "json", "csv", "tsv", "parquet")

#: read as human ratings without a mapping; a bare ``score`` is not among them: it is as often a
#: metric's score (robusteval's own scores.csv has one) as a person's, and correlating a metric
#: with a metric would be reported as agreement with people. Map it: ``human={"score": "score"}``
#: (CLI ``--columns human.score=score``).
HUMAN_COLUMNS = ("human_score", "rating", "human_rating", "overall", "quality")
SYSTEM_COLUMNS = ("system_id", "system", "model")
CONVERSATION_COLUMNS = ("conversation_id", "conversation", "dialogue_id", "dialog_id")
SUMMARIZATION_HINTS = frozenset({"document", "article", "summary"})

Row = tuple[int, Mapping[str, Any]]


def _norm(key: str) -> str:
    return key.strip().lower().replace("-", "_").replace(" ", "_")


def recognize(keys: Iterable[str], columns: Mapping[str, str | None] | None = None,
              human: Mapping[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(Sample field -> key, aspect -> key) for a file with ``keys``: ``columns`` / ``human``
    as given, every other field by its usual names (module docstring)."""
    keys = list(dict.fromkeys(keys))
    by_norm: dict[str, str] = {}
    for k in keys:
        by_norm.setdefault(_norm(k), k)
    given = dict(columns or {})
    fields: dict[str, str] = {}
    aspects: dict[str, str] = {}
    for f, k in given.items():
        if f.startswith("human."):
            if k:
                aspects[f.removeprefix("human.")] = k
        elif f not in SAMPLE_FIELDS:
            raise ValueError(f"unknown Sample field {f!r} in columns (fields: {', '.join(SAMPLE_FIELDS)}, "
                             "human.<aspect>)")
        elif k:
            fields[f] = k
    used = set(fields.values()) | set(aspects.values())
    for f, names in RECOGNIZED.items():
        if f in given or (f == "reference" and "references" in given):
            continue
        found = next((by_norm[n] for n in names if n in by_norm and by_norm[n] not in used), None)
        if found is not None:
            fields["references" if f == "reference" and _norm(found) == "references" else f] = found
            used.add(found)
    if human is not None:
        aspects.update(human)
    elif not aspects:
        for k in keys:
            n = _norm(k)
            if k in used:
                continue
            if n in HUMAN_COLUMNS or (n.startswith("human_") and len(n) > 6):
                aspect = n.removeprefix("human_") if n.startswith("human_") else n
                aspects.setdefault(aspect, k)
            elif n == "human":
                aspects.setdefault("*", k)  # a {aspect: score} column
    return fields, aspects


def read_rows(path: str | Path, fmt: str | None = None, required: Iterable[str] = ()) -> tuple[list[Row], list[str]]:
    """(rows as (line, record), column names in file order) of a data file."""
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in FORMATS:
        raise DataFormatError(path, f"unsupported format {fmt!r} (use {', '.join('.' + f for f in FORMATS)}, a "
                              "folder of such files, or hf:NAME for a Hugging Face dataset)")
    if fmt == "parquet":
        return _parquet_rows(path)
    rows: list[Row]
    if fmt in ("csv", "tsv"):
        delimiter = "\t" if fmt == "tsv" else ","
        rows = list(iter_csv(path, required=list(required), delimiter=delimiter))
        if not rows:  # a header alone still names the columns (checked before "no rows")
            return rows, csv_header(path, delimiter)
    elif fmt == "json" and _starts_with_list(path):
        rows = read_json_records(path)
    else:
        rows = list(iter_jsonl(path))
    keys = list(dict.fromkeys(k for _, r in rows for k in r))
    return rows, keys


def _starts_with_list(path: Path) -> bool:
    from robusteval.data.base import read_text

    return read_text(path).lstrip().startswith("[")


def _parquet_rows(path: Path) -> tuple[list[Row], list[str]]:
    if not path.is_file():
        raise DataFormatError(path, "file not found")
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        raise DataFormatError(path, "reading Parquet needs pyarrow (pip install pyarrow)") from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise DataFormatError(path, f"not a readable Parquet file: {exc}") from None
    return [(i, r) for i, r in enumerate(table.to_pylist(), start=1)], list(table.column_names)


def load_file(path: str | Path, columns: Mapping[str, str | None] | None = None,
              human: Mapping[str, str] | None = None, task: str | None = None,
              scales: Mapping[str, tuple[float, float]] | None = None,
              fmt: str | None = None) -> list[Sample]:
    """Samples from a JSONL / JSON / CSV / TSV / Parquet file (module docstring)."""
    path = Path(path)
    explicit = [k for f, k in (columns or {}).items() if k] + list((human or {}).values())
    rows, keys = read_rows(path, fmt, required=explicit)
    return from_records(rows, path, keys=keys, columns=columns, human=human, task=task, scales=scales,
                        unit="row" if (fmt or path.suffix.lstrip(".")).lower() == "parquet" else "line")


def from_records(rows: Iterable[Row] | Iterable[Mapping[str, Any]], source: str | Path, *,
                 keys: list[str] | None = None, columns: Mapping[str, str | None] | None = None,
                 human: Mapping[str, str] | None = None, task: str | None = None,
                 scales: Mapping[str, tuple[float, float]] | None = None, unit: str = "row") -> list[Sample]:
    """Samples from records (dicts, or (line, dict) pairs); ``source`` names them in errors
    and ids (``<stem>/<index>``); ``unit`` is ``line`` for text files, ``row`` otherwise."""
    source = Path(source)
    numbered = _numbered(rows)
    if keys is None:
        keys = list(dict.fromkeys(k for _, r in numbered for k in r))
    if task is not None and task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    if not numbered and not keys:
        raise EmptyDataError(source, f"no {unit}s: the data is empty")
    fields, aspects = recognize(keys, columns, human)
    # scores the caller mapped must be there; recognized ones may be missing in some rows
    strict = human is not None or any(f.startswith("human.") for f in columns or {})
    _check_columns(source, keys, fields, aspects, unit)  # a header without rows is checked too
    if not numbered:
        raise EmptyDataError(source, f"no {unit}s after the header ({', '.join(keys)}): the data has no samples")
    if task is None:
        hints = {_norm(fields.get("context", "")), _norm(fields.get("response", ""))}
        task = "summarization" if hints & SUMMARIZATION_HINTS else "dialogue"
    task_key = next((k for k in keys if _norm(k) == "task"), None)
    system_key = next((k for n in SYSTEM_COLUMNS for k in keys if _norm(k) == n), None)
    conversation_key = next((k for n in CONVERSATION_COLUMNS for k in keys
                             if _norm(k) == n and k not in fields.values()), None)  # not a mapped field
    log.info("%s: columns %s, human %s, task %s", source, fields, aspects, task)
    scale_meta = {a: HumanScale(*s).to_dict() for a, s in (scales or {}).items()}
    samples = []
    first_line: dict[str, int] = {}  # id -> the line that first had it
    for i, (line, row) in enumerate(numbered):
        cell = _Cells(source, line, row, fields, task, unit)
        row_task = task
        if task_key is not None and row.get(task_key) not in (None, ""):
            row_task = str(row[task_key])
            if row_task not in TASKS:
                raise cell.error(f"unknown task {row_task!r} (tasks: {', '.join(TASKS)})", task_key)
            cell.task = row_task
        sample_id = cell.get("id")
        reference, references = cell.reference()
        meta: dict[str, Any] = {"dataset": source.stem, "index": i, unit: line, "scales": scale_meta}
        if system_key is not None and row.get(system_key) not in (None, ""):
            meta["system_id"] = row[system_key]
        conv = row.get(conversation_key) if conversation_key is not None else None
        if isinstance(conv, float):  # a DataFrame's missing id is NaN; an integral float id is an int
            conv = None if conv != conv else int(conv) if conv.is_integer() else conv
        if conv not in (None, ""):
            meta["conversation"] = str(conv)
        sample_id = str(sample_id) if sample_id not in (None, "") else f"{source.stem}/{i}"
        if sample_id in first_line:
            raise cell.error(f"id {sample_id!r} is used twice: first on {unit} {first_line[sample_id]}, "
                             f"again on {unit} {line} (ids must be unique)", fields.get("id", "id"))
        first_line[sample_id] = line
        samples.append(Sample(
            id=sample_id, task=row_task,
            response=cell.text("response", cell.get("response", required=True)),
            context=cell.texts("context"), reference=reference, references=references,
            fact=cell.optional("fact"), answer=cell.optional("answer"), human=cell.human(aspects, strict),
            meta=meta,
        ))
    _observed_scales(samples, scale_meta)
    return samples


def _observed_scales(samples: list[Sample], scale_meta: dict[str, Any]) -> None:
    """An aspect given no scale gets the range its scores span in this data, marked
    ``observed`` (reports normalizing ratings need one; ``scales=`` gives the real one)."""
    values: dict[str, list[float]] = {}
    for s in samples:
        for a, v in s.human.items():
            values.setdefault(a, []).append(v)
    for a, vs in values.items():
        if a not in scale_meta and max(vs) > min(vs):
            scale_meta[a] = {**HumanScale(min(vs), max(vs)).to_dict(), "observed": True}


def _numbered(rows: Iterable[Row] | Iterable[Mapping[str, Any]]) -> list[Row]:
    out: list[Row] = []
    for i, r in enumerate(rows, start=1):
        if isinstance(r, tuple) and len(r) == 2 and isinstance(r[1], Mapping):
            out.append((int(r[0]), r[1]))
        elif isinstance(r, Mapping):
            out.append((i, r))
        else:
            raise DataFormatError("records", f"record {i} is a {type(r).__name__}, expected a mapping of column "
                                  "-> value")
    return out


def _check_columns(source: Path, keys: list[str], fields: Mapping[str, str], aspects: Mapping[str, str],
                   unit: str) -> None:
    found = ", ".join(keys) or "(none)"
    if "response" not in fields:
        raise DataFormatError(source, f"no response column: the data has {found}; robusteval looks for "
                              f"{', '.join(RECOGNIZED['response'])} (any case), or map one with "
                              "columns={'response': COLUMN} (CLI: --columns response=COLUMN)")
    missing = [(f, k) for f, k in [*fields.items(), *(("human." + a, k) for a, k in aspects.items())]
               if k not in keys]
    if missing and keys:
        f, k = missing[0]
        raise DataFormatError(source, f"{f} is mapped to column {k!r}, which the data does not have (it has: "
                              f"{found})", line=1 if unit == "line" else None, field=k)


class _Cells:
    """Typed, checked access to one row's mapped columns; errors name file, line and column."""

    def __init__(self, path: Path, line: int, row: Mapping[str, Any], columns: Mapping[str, str],
                 task: str, unit: str = "line") -> None:
        self.path, self.line, self.row, self.columns, self.task, self.unit = path, line, row, columns, task, unit

    def error(self, message: str, key: str) -> DataFormatError:
        if self.unit == "line":
            return DataFormatError(self.path, message, line=self.line, field=key)
        return DataFormatError(self.path, f"{self.unit} {self.line}: {message}", field=key)

    def get(self, field: str, required: bool = False) -> Any:
        key = self.columns.get(field)
        if key is None:
            return None
        if key not in self.row or self.row[key] is None:
            if required:
                raise self.error("missing field", key)
            return None
        return self.row[key]

    def fail(self, field: str, message: str) -> DataFormatError:
        return self.error(message, self.columns[field])

    def text(self, field: str, value: Any) -> str:
        """``value`` if it is valid text (no lone surrogate)."""
        if not isinstance(value, str):
            raise self.fail(field, f"expected text, got {type(value).__name__}")
        found = find_invalid_text(value)
        if found is not None:
            raise self.fail(field, found[1])
        return value

    def optional(self, field: str) -> str | None:
        value = self.get(field)
        return None if value is None else self.text(field, value)

    def reference(self) -> tuple[str | None, tuple[str, ...]]:
        """(reference, references): a list in the reference column gives several references."""
        value = self.get("reference")
        if isinstance(value, list | tuple) or (hasattr(value, "tolist") and not isinstance(value, str)):
            refs = tuple(self.text("reference", v) for v in list(value))
            return (refs[0] if refs else None), refs[1:]
        return (None if value is None else self.text("reference", value)), self.texts("references")

    def texts(self, field: str) -> tuple[str, ...]:
        """Context turns / references: a list of texts, or one string (a JSON list for
        references in a CSV cell; split into turns on newlines for dialogue context)."""
        values = self.get(field)
        if values is None or (values == "" and field == "references"):
            return ()
        if isinstance(values, str):
            if field == "references":
                try:
                    values = json.loads(values) if values.startswith("[") else [values]
                except json.JSONDecodeError:
                    values = [values]
            else:
                values = split_turns(values) if self.task == "dialogue" else [values]
        if hasattr(values, "tolist") and not isinstance(values, list | tuple):
            values = values.tolist()  # a NumPy array from a DataFrame cell
        if not isinstance(values, list | tuple):
            raise self.fail(field, f"expected text or a list of texts, got {type(values).__name__}")
        return tuple(self.text(field, v) for v in values)

    def human(self, aspects: Mapping[str, str], strict: bool = False) -> dict[str, float]:
        """Human scores; a missing one is an error when ``strict`` (mapped by the caller)."""
        out: dict[str, float] = {}
        for aspect, key in aspects.items():
            value = self.row.get(key)
            if aspect == "*":  # a {aspect: score} column
                if value is None:
                    continue
                if not isinstance(value, Mapping):
                    raise self.error(f"expected {{aspect: score}}, got {type(value).__name__}", key)
                out.update({str(a): self._float(v, f"{key}.{a}") for a, v in value.items() if v is not None})
            elif strict or (value is not None and value != ""):
                out[aspect] = self._float(value, key)
        return out

    def _float(self, value: Any, key: str) -> float:
        if self.unit == "line":
            return as_float(value, self.path, self.line, key)
        try:
            return as_float(value, self.path, None, key)
        except DataFormatError as exc:
            raise self.error(str(exc).split(": ", 1)[-1], key) from None

