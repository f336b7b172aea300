"""Run fingerprints name a model by what it is: a local folder by its weights (moved or copied
folders match, a model retrained in place does not), a local copy of a hub model by its hub id."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from robusteval.metrics.identity import HASH_LIMIT, model_identity, weights_digest


def _export(folder: Path, weights: bytes) -> Path:
    (folder / "encoder").mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(weights)
    (folder / "encoder" / "model.safetensors").write_bytes(b"encoder")
    (folder / "scorer.json").write_text("{}", encoding="utf-8")
    return folder


def test_a_folder_is_named_by_its_weights_not_its_place(tmp_path: Path) -> None:
    a = _export(tmp_path / "run" / "export", b"weights-1")
    first = model_identity(str(a))
    assert first.startswith("local:sha256=") and str(tmp_path) not in first
    shutil.copytree(a, tmp_path / "elsewhere")
    assert model_identity(str(tmp_path / "elsewhere")) == first  # a copy, or a moved run folder
    (a / "adapter_model.safetensors").write_bytes(b"weights-2")  # retrained in place
    assert model_identity(str(a)) != first
    (a / "encoder" / "model.safetensors").write_bytes(b"encoder-2")  # a full fine-tune's encoder counts
    assert model_identity(str(a)) != model_identity(str(tmp_path / "elsewhere"))


def test_a_rewrite_with_the_same_size_is_seen(tmp_path: Path) -> None:
    a = _export(tmp_path / "x", b"aaaa")
    first = weights_digest(a)
    target = a / "adapter_model.safetensors"
    stat = target.stat()
    target.write_bytes(b"bbbb")
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with the old mtime (the ctime moved)
    assert weights_digest(a) != first


def test_hub_ids_known_copies_and_folders_without_weights(tmp_path: Path) -> None:
    assert model_identity("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    copy = _export(tmp_path / "site-packages" / "model", b"w")
    assert model_identity(str(copy), {"org/model": copy}) == "org/model"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert weights_digest(empty) == "" and model_identity(str(empty)) == str(empty.resolve())


def test_large_weights_are_sampled_not_named_by_size(tmp_path: Path, monkeypatch) -> None:
    import robusteval.metrics.identity as identity

    monkeypatch.setattr(identity, "HASH_LIMIT", 5)
    monkeypatch.setattr(identity, "BLOCK", 4)
    a = _export(tmp_path / "a", b"0123456789abcdef")
    b = _export(tmp_path / "b", b"0123456789abcdeX")  # same size, other content (in the last block)
    assert weights_digest(a).startswith("sampled-sha256=") and weights_digest(a) != weights_digest(b)
    assert HASH_LIMIT == 256 * 2**20


def test_training_state_and_trainer_checkpoints_do_not_count(tmp_path: Path) -> None:
    a = _export(tmp_path / "run", b"w")
    first = model_identity(str(a))
    (a / "checkpoint-500").mkdir()
    (a / "checkpoint-500" / "model.safetensors").write_bytes(b"older weights")
    (a / "optimizer.bin").write_bytes(b"adam state")
    (a / ".git").mkdir()
    (a / ".git" / "x.bin").write_bytes(b"x")
    assert model_identity(str(a)) == first


def test_a_weight_file_is_named_by_its_content(tmp_path: Path) -> None:
    f = tmp_path / "adapter.safetensors"
    f.write_bytes(b"adapter")
    g = tmp_path / "elsewhere.safetensors"
    g.write_bytes(b"adapter")
    assert model_identity(str(f)).startswith("local:sha256=") and model_identity(str(f)) == model_identity(str(g))
    text = tmp_path / "notes.txt"
    text.write_text("x", encoding="utf-8")
    assert model_identity(str(text)) == str(text)  # not a model: as given


def test_strings_that_are_not_paths_stay_as_given() -> None:
    for text in ("x" * 5000, "a\0b", "~nobody-here/model", "bert-base-uncased"):
        assert model_identity(text) == text
