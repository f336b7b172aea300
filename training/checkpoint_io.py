"""Pickle-free Lightning checkpoints: tensors in safetensors, everything else in JSON.

Lightning's default checkpoint is a ``torch.save`` pickle. :class:`SafeCheckpointIO` writes a
checkpoint as a folder instead (named like the file Lightning asked for, e.g. ``last.ckpt/``):

* ``tensors.safetensors`` — every tensor found anywhere in the checkpoint dict (model state,
  optimizer moments, step counters), under a path-like key;
* ``state.json`` — the rest of the dict (loop progress, callback state, hyper-parameters,
  optimizer param groups) with each tensor replaced by ``{"__tensor__": key}``.

Dicts with non-string keys (the optimizer's ``{param_id: state}``), tuples and paths are
encoded so they load back as the same types. Together with the LightningModules' habit of
saving only trainable parameters (LoRA + head), a checkpoint is adapter-only and can resume a
killed run exactly (weights, optimizer, epoch, step, RNG-free loops).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path, PurePath
from typing import Any

from lightning.pytorch.plugins.io import CheckpointIO

from robusteval.errors import DataFormatError


def _encode(obj: Any, tensors: dict[str, Any], path: str) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        key = path.lstrip("/") or "root"
        tensors[key] = obj.detach().cpu().clone().contiguous()  # no shared storage: safetensors refuses it
        return {"__tensor__": key}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {k: _encode(v, tensors, f"{path}/{k}") for k, v in obj.items()}
        return {"__dict__": [[_encode(k, tensors, f"{path}/k{i}"), _encode(v, tensors, f"{path}/{i}")]
                             for i, (k, v) in enumerate(obj.items())]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, tensors, f"{path}/{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, tensors, f"{path}/{i}") for i, v in enumerate(obj)]
    if isinstance(obj, PurePath):
        return {"__path__": str(obj)}
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    return {"__str__": str(obj), "__type__": type(obj).__name__}


def _decode(obj: Any, tensors: dict[str, Any]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__dict__" in obj:
            return {_decode(k, tensors): _decode(v, tensors) for k, v in obj["__dict__"]}
        if "__tuple__" in obj:
            return tuple(_decode(v, tensors) for v in obj["__tuple__"])
        if "__path__" in obj:
            return Path(obj["__path__"])
        if "__str__" in obj:
            return obj["__str__"]
        return {k: _decode(v, tensors) for k, v in obj.items()}
    return obj


class SafeCheckpointIO(CheckpointIO):
    """Lightning CheckpointIO writing ``<path>/state.json`` + ``<path>/tensors.safetensors``."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike[str],
                        storage_options: Any = None) -> None:
        from safetensors.torch import save_file

        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        tensors: dict[str, Any] = {}
        state = _encode(checkpoint, tensors, "")
        save_file(tensors, str(tmp / "tensors.safetensors"))
        (tmp / "state.json").write_text(json.dumps(state), encoding="utf-8")
        old = target.with_name(target.name + ".old")
        if target.exists():
            target.rename(old)
        tmp.rename(target)  # the new checkpoint appears whole or not at all
        if old.exists():
            shutil.rmtree(old) if old.is_dir() else old.unlink()

    def load_checkpoint(self, path: str | os.PathLike[str], map_location: Any = None,
                        weights_only: bool | None = None) -> dict[str, Any]:
        from safetensors.torch import load_file

        folder = Path(path)
        if not (folder / "state.json").is_file():
            old = folder.with_name(folder.name + ".old")  # killed between the two renames
            if (old / "state.json").is_file():
                folder = old
            else:
                raise DataFormatError(folder, "not a robusteval checkpoint folder (no state.json)")
        tensors = load_file(str(folder / "tensors.safetensors"))
        if map_location is not None:
            tensors = {k: v.to(map_location) for k, v in tensors.items()}
        return _decode(json.loads((folder / "state.json").read_text(encoding="utf-8")), tensors)

    def remove_checkpoint(self, path: str | os.PathLike[str]) -> None:
        p = Path(path)
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
