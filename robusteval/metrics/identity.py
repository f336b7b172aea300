"""What a model *is*, for run fingerprints (:meth:`robusteval.metrics.base.Metric.reproducibility`,
attack options).

A local folder or file is named by its weights, not by where it lies: a run folder that is
moved, a fresh clone whose virtual environment sits elsewhere, or a colleague's copy of the
same export resume the same run, while a model retrained in place (same path, new weights) is a
different victim and is refused. A hub id is its own name.

The weights of a folder are the weight files (``*.safetensors``, ``*.bin``) at its top level
and in the subfolders robusteval's exports use (``encoder/``, ``adapter/``); a trainer's
``checkpoint-*`` folders, optimizer states and hidden folders do not count. Files up to
:data:`HASH_LIMIT` in all are hashed whole; above it (a 1.4 GB RoBERTa-large), each file's
name, size and three 4 MiB blocks (start, middle, end) are: retraining changes every tensor, so
a sampled block changes with it, at a fraction of the cost of reading gigabytes.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

#: hash weight files whole up to this total size; above it, sampled blocks (module docstring)
HASH_LIMIT = 256 * 2**20
BLOCK = 4 * 2**20
WEIGHT_SUFFIXES = (".safetensors", ".bin")
#: subfolders of a robusteval export that hold weights (a full fine-tune's encoder, an adapter)
WEIGHT_SUBFOLDERS = ("encoder", "adapter")
#: files that are weights by suffix but not the model's (training state)
NOT_WEIGHTS = frozenset({"optimizer.bin", "scheduler.bin", "training_args.bin", "rng_state.bin", "scaler.bin"})


def weight_files(folder: Path) -> list[Path]:
    """The weight files of a checkpoint folder (module docstring), sorted."""
    out = []
    for where in (folder, *(folder / sub for sub in WEIGHT_SUBFOLDERS)):
        if where.is_dir():
            out += [p for p in where.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.name not in NOT_WEIGHTS
                    and not p.name.startswith(".") and p.is_file()]
    return sorted(out)


def _stamp(root: Path, files: list[Path]) -> tuple[tuple[str, int, int, int, int], ...] | None:
    try:
        stats = [(p, p.stat()) for p in files]
    except FileNotFoundError:  # a file removed between listing and reading (checkpoint rotation)
        return None
    return tuple((p.relative_to(root).as_posix() if p != root else "", s.st_size, s.st_mtime_ns,
                  s.st_ctime_ns, s.st_ino) for p, s in stats)


@functools.lru_cache(maxsize=64)
def _digest(root: str, stamp: tuple[tuple[str, int, int, int, int], ...], sampled: bool) -> str:
    h = hashlib.sha256()
    base = Path(root)
    for rel, size, *_ in stamp:
        h.update(f"{rel}\0{size}\0".encode("utf-8", "surrogatepass"))
        path = base if base.is_file() else base / rel
        with path.open("rb") as fh:
            if not sampled or size <= 3 * BLOCK:
                for block in iter(lambda fh=fh: fh.read(2**20), b""):
                    h.update(block)
            else:
                for offset in (0, size // 2 - BLOCK // 2, size - BLOCK):
                    fh.seek(offset)
                    h.update(fh.read(BLOCK))
    return f"{'sampled-' if sampled else ''}sha256={h.hexdigest()[:16]}"


def weights_digest(path: Path) -> str:
    """sha256 (16 hex) of a checkpoint's weights: a weight file, or a folder's weight files
    (:func:`weight_files`, names and content); sampled above :data:`HASH_LIMIT` (module
    docstring); "" when there are none. Cached while no file changes (size, mtime, ctime,
    inode)."""
    files = [path] if path.is_file() else weight_files(path)
    if not files:
        return ""
    stamp = _stamp(path, files)
    if stamp is None:
        return ""
    sampled = sum(s[1] for s in stamp) > HASH_LIMIT
    return _digest(str(path.resolve()), stamp, sampled)


def model_identity(name: str, known: dict[str, Path] | None = None) -> str:
    """``name`` (a hub id, a local folder or a weight file) as a fingerprint records it: the
    local copy of a hub id in ``known`` -> the hub id; a folder or file with weights -> "local:"
    and its :func:`weights_digest` (its name and place do not count); a folder without weights
    -> its resolved path; anything else (a hub id) as is."""
    try:
        path = Path(name).expanduser()
        if not (path.is_dir() or (path.is_file() and path.suffix in WEIGHT_SUFFIXES)):
            return name
    except (OSError, ValueError, RuntimeError):  # not a path at all (too long, a NUL byte, ~nobody)
        return name
    for hub_id, local in (known or {}).items():
        if local.exists() and os.path.samefile(path, local):
            return hub_id
    digest = weights_digest(path)
    return f"local:{digest}" if digest else str(path.resolve())
