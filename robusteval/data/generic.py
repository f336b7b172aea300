"""Any JSONL or CSV file of human judgments, through a column mapping.

``columns`` maps Sample fields to the file's keys: ``response`` (required), ``context``,
``reference``, ``references``, ``fact``, ``answer``, ``id``; ``human`` maps aspect -> key.
Context strings are split into turns on newlines for dialogue, kept whole otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from robusteval.data.base import as_float, iter_csv, iter_jsonl, split_turns
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
        def get(field: str, required: bool = False, row: Mapping[str, Any] = row,
                line: int = line) -> Any:
            key = columns.get(field)
            if key is None:
                return None
            if key not in row or row[key] is None:
                if required:
                    raise DataFormatError(path, "missing field", line=line, field=key)
                return None
            return row[key]

        response = get("response", required=True)
        if not isinstance(response, str):
            raise DataFormatError(path, "response must be a string", line=line, field=columns["response"])
        ctx = get("context")
        if isinstance(ctx, list):
            context = tuple(str(c) for c in ctx)
        elif isinstance(ctx, str):
            context = split_turns(ctx) if task == "dialogue" else (ctx,)
        else:
            context = ()
        refs = get("references")
        if isinstance(refs, str):
            try:
                refs = json.loads(refs) if refs.startswith("[") else [refs]
            except json.JSONDecodeError:
                refs = [refs]
        samples.append(Sample(
            id=str(get("id") or f"{path.stem}/{i}"), task=task, response=response, context=context,
            reference=get("reference"), references=tuple(refs or ()), fact=get("fact"),
            answer=get("answer"),
            human={a: as_float(row.get(k), path, line, k) for a, k in human.items()},
            meta={"dataset": path.stem, "index": i, "line": line, "scales": scale_meta},
        ))
    return samples
