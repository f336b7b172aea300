"""Hugging Face ``datasets`` data and folders of data files as Samples.

* ``hf:NAME`` / ``hf:NAME:CONFIG``: ``datasets.load_dataset(NAME, CONFIG)`` (the Hub, its cache,
  or a local folder with ``hf:./folder``; offline with ``HF_DATASETS_OFFLINE=1``);
* a folder written by ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk`` (its Arrow
  files, read with pyarrow);
* any other folder: its data files (.jsonl, .json, .csv, .tsv, .parquet), split by file name
  the way the Hub does it (``test.jsonl``, ``data/test-00000-of-00001.parquet``, ``test/``...;
  ``datasets.data_files.get_data_patterns``), read with robusteval's own line-aware readers
  (errors name the file and line); a folder whose files name no split is one split.

**Split.** ``split=`` picks one; by default the first of ``test``, ``validation``, ``train``
that exists (evaluation data: the held-out split first), else the only split. A missing split
is an error listing the ones there are. Columns are recognized as for files
(:mod:`robusteval.data.generic`). ``datasets`` is imported only here, when such data is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robusteval.data.generic import FORMATS, from_records, load_file
from robusteval.errors import DataFormatError, EmptyDataError, MissingResourceError
from robusteval.types import Sample

SPLIT_ORDER = ("test", "validation", "train")


def choose_split(available: list[str], split: str | None, where: str) -> str:
    """``split`` if ``available`` has it; else the default order (module docstring)."""
    if split is not None:
        if split not in available:
            raise DataFormatError(where, f"no split {split!r} (splits: {', '.join(available)})")
        return split
    for name in SPLIT_ORDER:
        if name in available:
            return name
    if len(available) == 1:
        return available[0]
    raise DataFormatError(where, f"several splits ({', '.join(available)}) and none of {', '.join(SPLIT_ORDER)}; "
                          "pick one with split=")


def is_saved_dataset(folder: Path) -> bool:
    """True for a folder written by ``save_to_disk`` (a Dataset or a DatasetDict)."""
    return (folder / "dataset_dict.json").is_file() or (
        (folder / "state.json").is_file() and (folder / "dataset_info.json").is_file())


def from_dataset(ds: Any, source: str, split: str | None = None, **options: Any) -> list[Sample]:
    """Samples from a ``datasets.Dataset`` or ``DatasetDict`` (one split of it)."""
    if isinstance(ds, Mapping) or (hasattr(ds, "keys") and not hasattr(ds, "column_names")):
        chosen = choose_split(list(ds.keys()), split, source)
        ds, source = ds[chosen], f"{source}[{chosen}]"
    keys = list(ds.column_names)
    return from_records(iter(ds), source, keys=keys, unit="row", **options)


def load_saved(folder: Path, split: str | None = None, **options: Any) -> list[Sample]:
    """A ``save_to_disk`` folder: a DatasetDict (``dataset_dict.json`` naming split subfolders)
    or one Dataset (``state.json`` naming its Arrow files). The Arrow stream files are read with
    pyarrow directly: ``datasets.load_from_disk`` of datasets 2.14 (pinned by textattack) fails
    on local paths with the installed fsspec ("Protocol not known"), and this needs no
    ``datasets`` import."""
    from robusteval.data.base import read_json

    if (folder / "dataset_dict.json").is_file():
        splits = read_json(folder / "dataset_dict.json").get("splits")
        if not isinstance(splits, list) or not all(isinstance(x, str) for x in splits):
            raise DataFormatError(folder / "dataset_dict.json", "expected {\"splits\": [names]}")
        chosen = choose_split(splits, split, str(folder))
        return _saved_dataset(folder / chosen, f"{folder}[{chosen}]", **options)
    if split is not None:
        raise DataFormatError(folder, f"one saved Dataset, not a DatasetDict: split={split!r} does not apply")
    return _saved_dataset(folder, str(folder), **options)


def _saved_dataset(folder: Path, source: str, **options: Any) -> list[Sample]:
    import pyarrow as pa

    from robusteval.data.base import read_json

    state = read_json(folder / "state.json")
    files = [f.get("filename") for f in state.get("_data_files", [])] if isinstance(state, dict) else []
    if not files or not all(isinstance(f, str) for f in files):
        raise DataFormatError(folder / "state.json", "no _data_files: not a save_to_disk folder")
    tables = []
    for name in files:
        try:
            with pa.memory_map(str(folder / name)) as src:
                tables.append(pa.ipc.open_stream(src).read_all())
        except (OSError, pa.ArrowInvalid) as exc:
            raise DataFormatError(folder / name, f"not a readable Arrow file: {exc}") from None
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    return from_records(table.to_pylist(), source, keys=list(table.column_names), unit="row", **options)


def load_hub(name: str, split: str | None = None, **options: Any) -> list[Sample]:
    """``hf:NAME[:CONFIG]`` (``name`` without the prefix)."""
    import datasets

    path, _, config = name.partition(":")
    if not path:
        raise DataFormatError(f"hf:{name}", "expected hf:NAME or hf:NAME:CONFIG")
    try:
        ds = datasets.load_dataset(path, config or None)
    except Exception as exc:  # offline, unknown name, gated...: say what datasets said
        raise MissingResourceError(f"dataset hf:{name}: datasets.load_dataset({path!r}, {config or None!r}) failed: "
                                   f"{type(exc).__name__}: {exc}") from None
    return from_dataset(ds, f"hf:{name}", split, **options)


#: file and folder names that mark a split (the Hub's convention, datasets.data_files)
SPLIT_WORDS = {"train": ("train", "training"), "validation": ("validation", "valid", "val", "dev"),
               "test": ("test", "testing", "eval", "evaluation")}
_SPLIT_NAME = re.compile(r"^(?P<word>[a-z]+)(?:$|[-_.\d])")


def split_of(path: Path, folder: Path) -> str | None:
    """The split a data file belongs to by its name or a parent folder's (``test.jsonl``,
    ``test-00000-of-00001.parquet``, ``data/test/shard_0.csv``), else None."""
    for part in reversed([path.stem.lower(), *(p.lower() for p in path.relative_to(folder).parts[:-1])]):
        m = _SPLIT_NAME.match(part)
        if m:
            for split, words in SPLIT_WORDS.items():
                if m.group("word") in words:
                    return split
    return None


def data_files(folder: Path, split: str | None = None) -> list[Path]:
    """The data files of ``folder`` that hold ``split`` (module docstring). Hand-written rather
    than ``datasets.data_files.get_data_patterns``: with the installed fsspec, datasets 2.14
    (pinned by textattack) fails to resolve its own patterns."""
    exts = {f".{f}" for f in FORMATS}
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in exts
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    if not files:
        raise DataFormatError(folder, f"no data files ({', '.join(sorted(exts))}) in this folder")
    by_split: dict[str, list[Path]] = {}
    for f in files:
        by_split.setdefault(split_of(f, folder) or "train", []).append(f)
    if len(by_split) > 1 and "train" in by_split and any(split_of(f, folder) is None for f in by_split["train"]):
        unnamed = [str(f.relative_to(folder)) for f in by_split["train"] if split_of(f, folder) is None]
        raise DataFormatError(folder, f"some files name their split and some do not ({', '.join(unnamed)}); "
                              "name every file by its split (train/validation/test)")
    return by_split[choose_split(list(by_split), split, str(folder))]


def load_folder(folder: Path, split: str | None = None, columns: Mapping[str, str | None] | None = None,
                task: str | None = None, **options: Any) -> list[Sample]:
    """Every data file of one split of ``folder`` (save_to_disk folders included)."""
    if is_saved_dataset(folder):
        return load_saved(folder, split, columns=columns, task=task, **options)
    out: list[Sample] = []
    files = data_files(folder, split)
    for f in files:
        try:
            out += load_file(f, columns=columns, task=task, **options)
        except EmptyDataError:
            if len(files) == 1:
                raise
            import warnings

            warnings.warn(f"{f}: no rows, skipped (an empty shard of {folder})", stacklevel=2)
    if not out:
        raise EmptyDataError(folder, f"none of its {len(files)} data files has a row")
    return out
