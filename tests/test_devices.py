"""``device="auto"`` and ``accelerator="auto"`` everywhere: a neural metric or an LLM backend
built directly (not only through ``metrics.load``) resolves ``auto`` to cuda when there is a
GPU, to mps on Apple silicon and to cpu otherwise, with its weights there; no trainer in the package pins the CPU.
scripts/gpu_check.py runs the same paths on a GPU (BENCHMARKS.md, "GPU check")."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from test_cross_encoder import _save_robusteval_folder

from robusteval.metrics.base import resolve_device

ROOT = Path(__file__).resolve().parents[1]


def _weights_device(module) -> str:
    return next(module.parameters()).device.type


def test_neural_metrics_built_directly_resolve_auto(tiny_bert, tiny_t5, tiny_gpt2, tmp_path) -> None:
    from robusteval.metrics.bertscore import BERTScore
    from robusteval.metrics.cross_encoder import CrossEncoder
    from robusteval.metrics.dialogrpt import DialogRPT
    from robusteval.metrics.unieval import UniEval

    want = resolve_device("auto")
    _save_robusteval_folder(tiny_bert, tmp_path)
    ce = CrossEncoder(checkpoint=str(tmp_path), device="auto")
    assert ce.device == want and _weights_device(ce.module) == want
    rpt = DialogRPT(head="updown", checkpoints={"updown": str(tiny_gpt2)}, device="auto")
    assert rpt.device == want and _weights_device(rpt.models["updown"]) == want
    bs = BERTScore(model=str(tiny_bert), num_layers=2, device="auto")
    assert bs.device == want and _weights_device(bs.model) == want
    ue = UniEval(model=str(tiny_t5), dimension="naturalness", task="dialogue", device="auto")
    assert ue.device == want
    # every one of them scores on the device it resolved to
    from robusteval.types import Sample

    sample = Sample(id="a", task="dialogue", response="i am fine thanks .", context=("how are you today ?",),
                    references=("i am fine .",))
    for metric in (ce, rpt, bs, ue):
        assert 0.0 <= float(metric.score([sample])[0]) <= 100.0


def test_auto_prefers_cuda_then_mps_then_cpu(monkeypatch) -> None:
    """Lightning's ``accelerator="auto"`` trains on MPS on Apple silicon; ``device="auto"`` must
    pick the same device there, or a trained model and the metric scoring with it disagree."""
    import torch

    for cuda, mps, want in ((True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda mps=mps: mps)
        assert resolve_device("auto") == want
    assert resolve_device("cuda:1") == "cuda:1" and resolve_device("cpu") == "cpu"


def test_local_llm_built_directly_resolves_auto(tiny_lm) -> None:
    """It crashed before: ``torch`` was asked to move the model to a device named "auto"."""
    from robusteval.llm.backends import LocalCausalLM

    llm = LocalCausalLM(model=str(tiny_lm), device="auto")
    assert llm.device == resolve_device("auto") and _weights_device(llm.model) == llm.device
    assert len(llm.generate(["the cat sat on"], n=1, temperature=0.0, max_new_tokens=3)[0]) == 1


def test_no_trainer_in_the_package_pins_the_cpu() -> None:
    """Users have GPUs (issue 13): every Lightning trainer the package builds takes its
    accelerator from its caller, ``auto`` by default."""
    pinned = []
    for folder in ("robusteval", "training", "detectors"):
        for path in (ROOT / folder).rglob("*.py"):
            for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"accelerator\s*=\s*[\"']cpu[\"']", line):
                    pinned.append(f"{path.relative_to(ROOT)}:{no}")
    assert pinned == []
    from robusteval.attacks.salient import train_salient
    from robusteval.config.salient import SalientTrainConfig

    assert inspect.signature(train_salient).parameters["accelerator"].default == "auto"
    from robusteval.attacks.salient import SalientPredictor  # an attack-side helper: CPU unless asked

    assert inspect.signature(SalientPredictor).parameters["device"].default == "cpu"
    assert SalientTrainConfig(out_dir="x").accelerator == "auto"


def test_tiny_models_are_built_once_per_folder_and_unknown_kinds_are_named(tmp_path) -> None:
    """``robusteval.tiny_models``: the one home of the tiny models the tests, the GPU check and
    the fuzzer build; a second request reuses the folder, an unknown kind lists the known ones."""
    from robusteval.tiny_models import TINY_BUILDERS, tiny_model

    folder = tiny_model("tiny_bert", tmp_path)
    stamp = (folder / "config.json").stat().st_mtime_ns
    assert tiny_model("tiny_bert", tmp_path) == folder == tmp_path / "tiny_bert"
    assert (folder / "config.json").stat().st_mtime_ns == stamp
    assert set(TINY_BUILDERS) == {"tiny_t5", "tiny_gpt2", "tiny_bert", "tiny_lm"}
    with pytest.raises(KeyError, match="known: tiny_bert, tiny_gpt2, tiny_lm, tiny_t5"):
        tiny_model("tiny_llama", tmp_path)
