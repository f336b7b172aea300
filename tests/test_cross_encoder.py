from __future__ import annotations

import json

import numpy as np
import pytest

from robusteval import Sample, metrics
from robusteval.metrics.cross_encoder import (
    POE_CONVENTIONS,
    ScorerConfig,
    build_scorer_module,
    encode_pairs,
)

CTX = ("how are you today ?", "i am fine thanks .", "what do you think about the weather ?")


def s(resp: str, sid: str = "x") -> Sample:
    return Sample(id=sid, task="dialogue", response=resp, context=CTX)


def _save_robusteval_folder(tiny_bert, folder, pooling="mean", invert=False):
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(1)
    module = build_scorer_module(AutoModel.from_pretrained(tiny_bert), pooling)
    module.encoder.save_pretrained(folder / "encoder")
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(folder / "encoder")
    save_file({k: v.contiguous() for k, v in module.head.state_dict().items()}, str(folder / "head.safetensors"))
    cfg = ScorerConfig(base_model=str(tiny_bert), pooling=pooling, invert=invert)
    (folder / "scorer.json").write_text(json.dumps(cfg.__dict__))
    return module.eval()


def test_cross_encoder_loads_robusteval_folder(tiny_bert, tmp_path) -> None:
    import torch

    module = _save_robusteval_folder(tiny_bert, tmp_path)
    m = metrics.load("cross-encoder", checkpoint=str(tmp_path))
    batch = [s("yes", "a"), s("i love reading books about history and science .", "b")]
    got = m.score(batch)
    enc = encode_pairs(m.tokenizer, ["\n".join(CTX)] * 2, ["yes", batch[1].response], m.config)
    with torch.no_grad():
        want = torch.sigmoid(module(enc["input_ids"], enc["attention_mask"])).numpy() * 100
    assert np.allclose(got, want, atol=1e-5)
    assert np.allclose(got, [m.score([b])[0] for b in batch], atol=1e-5)  # padding-invariant


def test_cross_encoder_requires_checkpoint() -> None:
    with pytest.raises(ValueError, match="needs checkpoint"):
        metrics.load("cross-encoder")


def test_poe_conventions_truncate_front_pad_256_and_invert(tiny_bert) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    cfg = ScorerConfig(**POE_CONVENTIONS)
    long_ctx = " ".join(["the cat sat on the mat ."] * 100) + " the dog ate my homework ."
    enc = encode_pairs(tok, [long_ctx], ["yes it is ."], cfg)
    ids = enc["input_ids"][0].tolist()
    assert len(ids) == 256 and enc["attention_mask"][0].sum() == 256
    text = tok.decode(ids)
    assert "the dog ate my homework" in text  # the end of the context survives
    assert text.strip().endswith("[SEP] yes it is. [SEP]")
    short = encode_pairs(tok, ["hello"], ["yes"], cfg)
    assert short["input_ids"].shape == (1, 256) and short["attention_mask"][0].sum() < 256


def test_a_context_longer_than_the_model_is_cut_without_a_false_alarm(tiny_bert) -> None:
    from transformers import AutoTokenizer

    flag = "sequence-length-is-longer-than-the-specified-maximum"  # transformers warns once per tokenizer
    tok = AutoTokenizer.from_pretrained(tiny_bert)
    tok.model_max_length = 64  # as a 512-token model meets a news article
    enc = encode_pairs(tok, [" ".join(["the cat sat on the mat ."] * 40)], ["yes"], ScorerConfig(max_length=64))
    assert enc["input_ids"].shape[1] <= 64
    assert not tok.deprecation_warnings.get(flag)  # no "... will result in indexing errors" for a cut text
    tok("word " * 100)
    assert tok.deprecation_warnings.get(flag)  # the warning is there for a text that would reach the model uncut


def test_poe_from_hf_folder_with_single_state_dict(tiny_bert, tmp_path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(2)
    encoder = AutoModel.from_pretrained(tiny_bert)
    module = build_scorer_module(encoder, "mean_all")
    state = {f"roberta.{k}": v.contiguous() for k, v in encoder.state_dict().items()}
    state["classifier.weight"] = module.head.weight.detach().contiguous()
    state["classifier.bias"] = module.head.bias.detach().contiguous()
    save_file(state, str(tmp_path / "model.safetensors"))
    encoder.config.save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(tmp_path)
    poe = metrics.load("poe", checkpoint=str(tmp_path))
    x = s("yes it is .")
    enc = encode_pairs(poe.tokenizer, ["\n".join(CTX)], [x.response], poe.config)
    with torch.no_grad():
        p = torch.sigmoid(module.eval()(enc["input_ids"], enc["attention_mask"])).item()
    assert poe.score([x])[0] == pytest.approx((1 - p) * 100, abs=1e-4)


def test_poe_hub_id_offline_is_a_clear_error(monkeypatch) -> None:
    from robusteval.errors import MissingResourceError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(MissingResourceError, match="hlt-lab/poe-roberta-large"):
        metrics.load("poe")
