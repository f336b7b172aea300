"""Data to evaluate: ``load(spec)`` returns a list of :class:`Sample`.

``spec`` may be

* a registered human-judgment dataset (``names()``, ``robusteval data list``); its data
  folder is ``data_dir=`` (CLI ``--data-dir``) or ``$ROBUSTEVAL_DATA``, and files keep the
  layout of their public sources;
* a plugin's dataset (entry-point group ``robusteval.datasets``) or ``module:attr``: a
  function returning samples, records, a pandas DataFrame, a ``datasets`` Dataset or a file
  path (called with ``**options``, and ``data_dir`` when it takes one), or such a value itself;
* a file: ``.jsonl``, ``.json``, ``.csv``, ``.tsv``, ``.parquet``, with the usual column
  names recognized (:mod:`robusteval.data.generic`; ``columns=`` maps others);
* a folder: written by ``datasets``' ``save_to_disk``, or holding data files split by name
  (``test.jsonl``, ``data/test-*.parquet``...); ``hf:NAME[:CONFIG]``: a Hugging Face dataset
  (:mod:`robusteval.data.hf`; ``split=`` defaults to test, then validation, then train);
* a Python object: a list of Samples or of records, a DataFrame, a ``datasets`` Dataset.

Dialogue contexts that continue one another (several rated turns of one conversation: a
context and a longer one, or a window that moved on) are marked as one conversation
(:mod:`robusteval.data.conversations`), so splits keep them together.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robusteval.data import fed, quickstart, summeval, unieval_json, usr, xdial  # noqa: F401  (registration)
from robusteval.data.base import _INFOS, DATASETS, DatasetInfo, dataset_info
from robusteval.data.conversations import mark_conversations
from robusteval.data.generic import FORMATS, from_records, load_file
from robusteval.errors import MissingResourceError, RobustevalError, UnknownNameError
from robusteval.paths import data_dir as resolve_data_dir
from robusteval.types import Sample

__all__ = ["DatasetInfo", "info", "is_dataset", "load", "load_file", "names", "path_of", "split_suffix"]


def names() -> list[str]:
    """Registered datasets and installed plugins (a broken plugin is skipped with a warning)."""
    return DATASETS.names()


def is_dataset(spec: str) -> bool:
    """Whether ``spec`` names a dataset (:func:`info` succeeds), without loading it."""
    try:
        info(spec)
    except RobustevalError:
        return False
    return True


def split_suffix(spec: str) -> tuple[str, str | None]:
    """``"NAME:TAIL"`` -> ``(NAME, TAIL)`` when ``spec`` is no dataset itself and ``NAME`` is one
    (``summeval:coherence``, ``rated.jsonl:test``); anything else whole, with None
    (``hf:org/set``, ``mymodule:make_rows`` and paths keep their ':'). The one rule for a
    trailing aspect or split on a dataset name (training specs, compare's correlation sets)."""
    head, sep, tail = spec.rpartition(":")
    if sep and head and tail and not is_dataset(spec) and is_dataset(head):
        return head, tail
    return spec, None


def info(spec: str) -> DatasetInfo:
    """What ``spec`` is, without loading it: a registered dataset's info, a plugin's entry, or
    for a file, folder or ``hf:`` name a stub (``origin`` file / folder / Hugging Face; task and
    aspects are known once loaded). A missing file or an unknown name fails here."""
    if spec in _INFOS:
        return dataset_info(spec)
    if spec.startswith("hf:"):
        return _stub(spec, "Hugging Face dataset (datasets.load_dataset)", "huggingface")
    path = Path(spec).expanduser()
    if path.exists():
        return _stub(spec, "folder of data files" if path.is_dir() else f"{path.suffix.lstrip('.')} file",
                     "folder" if path.is_dir() else "file")
    try:
        return dataset_info(spec)
    except UnknownNameError as exc:
        if path.suffix.lstrip(".").lower() in FORMATS or os.sep in spec or "/" in spec:
            raise MissingResourceError(f"dataset {spec!r}: no such file or folder") from None
        raise UnknownNameError(f"{exc}; a dataset may also be a path to a {', '.join('.' + f for f in FORMATS)} "
                               "file or a folder, or hf:NAME[:CONFIG]") from None


def _stub(spec: str, description: str, origin: str) -> DatasetInfo:
    return DatasetInfo(name=spec, path=spec, task="", description=description, scales={}, source=spec, level="",
                       extra={"origin": origin})


def path_of(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    rel = dataset_info(name).path
    if name not in _INFOS:
        raise RobustevalError(f"dataset {name!r} is a plugin ({DATASETS.info(name)['origin']}); it has no file")
    if rel.startswith(quickstart.PACKAGED):  # shipped with robusteval: no data folder needed
        from robusteval.paths import resource

        return resource(rel.removeprefix(quickstart.PACKAGED))
    path = resolve_data_dir(data_dir) / rel
    if not path.is_file():
        raise MissingResourceError(f"dataset {name!r}: file {path} not found")
    return path


def load(spec: Any, data_dir: str | os.PathLike[str] | None = None, limit: int | None = None,
         columns: Mapping[str, str | None] | None = None, task: str | None = None, split: str | None = None,
         **options: Any) -> list[Sample]:
    """Samples of ``spec`` (see the module docstring); ``limit`` keeps the first N.

    ``columns`` (Sample field -> column), ``task`` and ``split`` apply to files, folders,
    Hugging Face data and records; ``options`` go to the registered loader, the plugin's
    function, or :func:`~robusteval.data.generic.load_file` (``human=``, ``scales=``, ``fmt=``)."""
    if limit is not None:
        limit = _check_limit(limit)
    shaping: dict[str, Any] = {"columns": columns, "task": task, "split": split}
    if isinstance(spec, str) and spec in _INFOS:
        given = [k for k, v in shaping.items() if v is not None]
        if given:
            raise RobustevalError(f"dataset {spec!r} is a registered dataset; {', '.join(given)} apply only to "
                                  "files, folders, hf: datasets and records")
        samples = DATASETS.get(spec)(path_of(spec, data_dir), **options)
    else:
        samples = _load_other(spec, data_dir, shaping, options)
    samples = mark_conversations(samples)  # before the limit: a conversation is the whole file's
    return samples[:limit] if limit is not None else samples


def _check_limit(limit: Any) -> int:
    """``limit`` as an int (numpy integers welcome), refused when it is negative or not whole:
    a negative one used to cut from the end."""
    import operator

    try:
        value = operator.index(limit) if not isinstance(limit, bool) else -1
    except TypeError:
        value = -1
    if value < 0:
        raise RobustevalError(f"limit must be a whole number >= 0 (the first N samples), got {limit!r}")
    return value


def _load_other(spec: Any, data_dir: str | os.PathLike[str] | None, shaping: dict[str, Any],
                options: dict[str, Any]) -> list[Sample]:
    if isinstance(spec, os.PathLike):
        return _from_path(Path(spec), shaping, options)
    if not isinstance(spec, str):
        return _from_object(spec, type(spec).__name__, shaping, options)
    if spec.startswith("hf:"):
        from robusteval.data import hf

        return hf.load_hub(spec[3:], shaping["split"], columns=shaping["columns"], task=shaping["task"], **options)
    path = Path(spec).expanduser()
    if path.exists():
        return _from_path(path, shaping, options)
    info(spec)  # an unknown name or a missing file: a clear error
    return _from_object(DATASETS.get(spec)(data_dir=data_dir, **options), spec, shaping, {})


def _from_path(path: Path, shaping: dict[str, Any], options: dict[str, Any]) -> list[Sample]:
    if path.is_dir():
        from robusteval.data import hf

        return hf.load_folder(path, shaping["split"], columns=shaping["columns"], task=shaping["task"], **options)
    if shaping["split"] is not None:
        raise RobustevalError(f"{path}: split= applies to folders and hf: datasets, not to one file")
    return load_file(path, columns=shaping["columns"], task=shaping["task"], **options)


def _from_object(obj: Any, source: str, shaping: dict[str, Any], options: dict[str, Any]) -> list[Sample]:
    """Samples from what a plugin or module:attr gave (module docstring)."""
    if isinstance(obj, str | os.PathLike):
        return _load_other(Path(obj), None, shaping, options)
    if hasattr(obj, "column_names") or (hasattr(obj, "keys") and hasattr(obj, "num_rows")):
        from robusteval.data import hf

        return hf.from_dataset(obj, source, shaping["split"], columns=shaping["columns"], task=shaping["task"],
                               **options)
    if hasattr(obj, "to_dict") and hasattr(obj, "columns"):  # a pandas DataFrame
        records = obj.to_dict("records")
        return from_records(records, source, keys=[str(c) for c in obj.columns], columns=shaping["columns"],
                            task=shaping["task"], **options)
    if not isinstance(obj, list | tuple):
        raise RobustevalError(f"dataset {source!r} gave a {type(obj).__name__}; expected Samples, records "
                              "(dicts), a DataFrame, a datasets Dataset or a file path")
    if all(isinstance(s, Sample) for s in obj):
        return list(obj)
    return from_records(list(obj), source, columns=shaping["columns"], task=shaping["task"], **options)
