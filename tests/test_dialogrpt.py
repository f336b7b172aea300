from __future__ import annotations

import json
import os

import numpy as np
import pytest

from robusteval import Sample
from robusteval.metrics.dialogrpt import HEADS, DialogRPT, ensemble

CTX = ("how are you today ?", "i am fine thanks .")


def s(resp: str, sid: str = "x") -> Sample:
    return Sample(id=sid, task="dialogue", response=resp, context=CTX)


def test_head_reads_the_last_real_token(tiny_gpt2) -> None:
    import torch
    from transformers import GPT2ForSequenceClassification

    m = DialogRPT(head="updown", checkpoints={"updown": str(tiny_gpt2)})
    sample = s("what do you think about the weather ?")
    ids = m.encode(sample)
    eos = m.eos
    assert ids.count(eos) == 2  # one after each context turn, none after the response
    model = GPT2ForSequenceClassification.from_pretrained(tiny_gpt2).eval()
    with torch.no_grad():
        hidden = model.transformer(torch.tensor([ids])).last_hidden_state
        want = torch.sigmoid(model.score(hidden[0, -1])).item() * 100
    assert m.score([sample])[0] == pytest.approx(want, abs=1e-4)


def test_padding_does_not_change_scores(tiny_gpt2) -> None:
    m = DialogRPT(head="updown", checkpoints={"updown": str(tiny_gpt2)}, batch_size=8)
    batch = [s("yes", "a"), s("i love reading books about history and science .", "b"), s("no", "c")]
    together = m.score(batch)
    alone = np.array([m.score([x])[0] for x in batch])
    assert np.allclose(together, alone, atol=1e-4)


def test_ensemble_uses_all_five_heads(tiny_gpt2) -> None:
    m = DialogRPT(head="ensemble", checkpoints={h: str(tiny_gpt2) for h in HEADS})
    heads = m.head_scores([s("yes")])
    assert set(heads) == set(HEADS)
    assert m.score([s("yes")])[0] == pytest.approx(100 * ensemble(heads)[0])


def test_ensemble_formula_reproduces_upstream_toy_oracle(data_dir) -> None:
    for line in (data_dir / "DialogRPT/doc/toy.tsv.ensemble.jsonl").read_text().splitlines():
        for final, heads, _hyp in json.loads(line)["hyps"]:
            got = ensemble({k: np.array([heads[k]]) for k in HEADS})[0]
            assert got == pytest.approx(heads["final"], abs=1e-6)
            assert got == pytest.approx(final, abs=1e-6)


@pytest.mark.slow
def test_golden_updown_on_upstream_toy(data_dir) -> None:
    ckpt = os.environ.get("DIALOGRPT_UPDOWN_CHECKPOINT")
    if not ckpt:
        pytest.skip("set DIALOGRPT_UPDOWN_CHECKPOINT to a local microsoft/DialogRPT-updown "
                    "folder to compare with upstream's toy.tsv.updown.jsonl (no hub access here)")
    m = DialogRPT(head="updown", checkpoints={"updown": ckpt})
    for line in (data_dir / "DialogRPT/doc/toy.tsv.updown.jsonl").read_text().splitlines():
        item = json.loads(line)
        samples = [Sample(id=h, task="dialogue", response=h, context=(item["cxt"],)) for _, h in item["hyps"]]
        got = m.score(samples) / 100
        assert np.allclose(got, [p for p, _ in item["hyps"]], atol=1e-3)
