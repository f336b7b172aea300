"""Any JSONL or CSV file of human judgments, through a column mapping.

``columns`` maps Sample fields to the file's keys: ``response`` (required), ``context``,
``reference``, ``references``, ``fact``, ``answer``, ``id``; ``human`` maps aspect -> key.
Context strings are split into turns on newlines for dialogue, kept whole otherwise.

Every text is checked where it is read: a value of the wrong type, a lone surrogate (also one
inside a CSV ``references`` cell written as a JSON list) or a non-finite human score is a
:class:`~robusteval.errors.DataFormatError` naming the file, the line and the column.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from robusteval.data.base import as_float, find_invalid_text, iter_csv, iter_jsonl, split_turns
from robusteval.errors import DataFormatError
from robusteval.types import TASKS, HumanScale, Sample

SAMPLE_FIELDS = ("id", "response", "context", "reference", "references", "fact", "answer")


def load_file(path: str | Path, columns: Mapping[str, str] | None = None,
              human: Mapping[str, str] | None = None, task: str = "dialogue",
              scales: Mapping[str, tuple[float, float]] | None = None,
              fmt: str | None = None) -> list[Sample]:
    """Load a generic JSONL / CSV file; see the module docstring for ``columns``."""
    path = Path(path)
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    columns = dict(columns or {"response": "response"})
    unknown = set(columns) - set(SAMPLE_FIELDS)
    if unknown:
        raise ValueError(f"unknown Sample field(s) in columns: {', '.join(sorted(unknown))}")
    if "response" not in columns:
        raise ValueError("columns must map 'response'")
    human = dict(human or {})
    fmt = fmt or path.suffix.lstrip(".").lower()
    rows: Iterator[tuple[int, Mapping[str, Any]]]
    if fmt in ("jsonl", "json"):
        rows = iter_jsonl(path)
    elif fmt in ("csv", "tsv"):
        rows = iter_csv(path, required=[*columns.values(), *human.values()])
    else:
        raise DataFormatError(path, f"unsupported format {fmt!r} (use .jsonl or .csv)")
    scale_meta = {a: HumanScale(*s).to_dict() for a, s in (scales or {}).items()}
    samples = []
    for i, (line, row) in enumerate(rows):
        cell = _Cells(path, line, row, columns, task)
        sample_id = cell.get("id")
        samples.append(Sample(
            id=str(sample_id) if sample_id not in (None, "") else f"{path.stem}/{i}", task=task,
            response=cell.text("response", cell.get("response", required=True)),
            context=cell.texts("context"), reference=cell.optional("reference"),
            references=cell.texts("references"), fact=cell.optional("fact"),
            answer=cell.optional("answer"),
            human={a: as_float(row.get(k), path, line, k) for a, k in human.items()},
            meta={"dataset": path.stem, "index": i, "line": line, "scales": scale_meta},
        ))
    return samples


class _Cells:
    """Typed, checked access to one row's mapped columns; errors name file, line and column."""

    def __init__(self, path: Path, line: int, row: Mapping[str, Any], columns: Mapping[str, str],
                 task: str) -> None:
        self.path, self.line, self.row, self.columns, self.task = path, line, row, columns, task

    def get(self, field: str, required: bool = False) -> Any:
        key = self.columns.get(field)
        if key is None:
            return None
        if key not in self.row or self.row[key] is None:
            if required:
                raise DataFormatError(self.path, "missing field", line=self.line, field=key)
            return None
        return self.row[key]

    def fail(self, field: str, message: str) -> DataFormatError:
        return DataFormatError(self.path, message, line=self.line, field=self.columns[field])

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
        if not isinstance(values, list | tuple):
            raise self.fail(field, f"expected text or a list of texts, got {type(values).__name__}")
        return tuple(self.text(field, v) for v in values)
