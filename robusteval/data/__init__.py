"""Human-judged evaluation data: ``load(name)`` returns a list of :class:`Sample`.

The data folder is ``data_dir=`` (CLI ``--data-dir``) or ``$ROBUSTEVAL_DATA``; files keep
the layout of their public sources (see ``robusteval data list``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from robusteval.data import fed, quickstart, summeval, unieval_json, usr, xdial  # noqa: F401  (registration)
from robusteval.data.base import DATASETS, DatasetInfo, dataset_info
from robusteval.data.generic import load_file
from robusteval.errors import MissingResourceError
from robusteval.paths import data_dir as resolve_data_dir
from robusteval.types import Sample

__all__ = ["DatasetInfo", "info", "load", "load_file", "names", "path_of"]


def names() -> list[str]:
    return DATASETS.names()


def info(name: str) -> DatasetInfo:
    return dataset_info(name)


def path_of(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    rel = dataset_info(name).path
    if rel.startswith(quickstart.PACKAGED):  # shipped with robusteval: no data folder needed
        from robusteval.paths import resource

        return resource(rel.removeprefix(quickstart.PACKAGED))
    path = resolve_data_dir(data_dir) / rel
    if not path.is_file():
        raise MissingResourceError(f"dataset {name!r}: file {path} not found")
    return path


def load(name: str, data_dir: str | os.PathLike[str] | None = None, limit: int | None = None,
         **options: Any) -> list[Sample]:
    """Load a registered dataset (``names()``); ``limit`` keeps the first N samples."""
    samples = DATASETS.get(name)(path_of(name, data_dir), **options)
    return samples[:limit] if limit is not None else samples
