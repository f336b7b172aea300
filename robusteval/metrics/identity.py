"""What a model *is*, for run fingerprints (:meth:`robusteval.metrics.base.Metric.reproducibility`).

A local folder is named by its weights, not by where it lies: a run folder that is moved, a
fresh clone whose virtual environment sits elsewhere, or a colleague's copy of the same export
resume the same run, while a model retrained in place (same path, new weights) is a different
victim and is refused. A hub id is its own name.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

#: hash weight files up to this total size; above it, name and size stand for the content
HASH_LIMIT = 256 * 2**20
WEIGHT_SUFFIXES = (".safetensors", ".bin")


def _weight_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in WEIGHT_SUFFIXES and p.is_file())


@functools.lru_cache(maxsize=64)
def _digest(folder: str, stamp: tuple[tuple[str, int, int], ...]) -> str:
    h = hashlib.sha256()
    for rel, _size, _mtime in stamp:
        h.update(rel.encode("utf-8", "surrogatepass") + b"\0")
        with (Path(folder) / rel).open("rb") as fh:
            for block in iter(lambda fh=fh: fh.read(2**20), b""):
                h.update(block)
    return f"sha256={h.hexdigest()[:16]}"


def weights_digest(folder: Path) -> str:
    """sha256 (16 hex) of the weight files under a local checkpoint folder (subfolders
    included, names and content), or their total size when above :data:`HASH_LIMIT`; "" when
    it holds none. Cached per folder while no file changes (size and mtime)."""
    files = _weight_files(folder)
    if not files:
        return ""
    stamp = tuple((p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    size = sum(s for _, s, _ in stamp)
    if size > HASH_LIMIT:
        return f"bytes={size}"
    return _digest(str(folder.resolve()), stamp)


def model_identity(name: str, known: dict[str, Path] | None = None) -> str:
    """``name`` (a hub id or a local folder) as a fingerprint records it: a folder that is the
    local copy of a hub id in ``known`` -> the hub id; another folder with weights -> "local:" and
    its :func:`weights_digest` (the folder's name and place do not count); a folder without
    weights -> its resolved path; a hub id as is."""
    path = Path(name).expanduser()
    if not path.is_dir():
        return name
    for hub_id, local in (known or {}).items():
        if local.is_dir() and path.resolve() == local.resolve():
            return hub_id
    digest = weights_digest(path)
    return f"local:{digest}" if digest else str(path.resolve())
