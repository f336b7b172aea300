"""hf-classifier runs a sequence-classification / reward model exactly as its own forward does
(scores = the documented transform of ``model(**tokenizer(...)).logits``), and cross-encoder /
poe refuse such checkpoints instead of mis-pooling them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from robusteval import Sample, metrics
from robusteval.errors import RobustevalError

TEXTS = {
    "en": ("The cat sat on the mat and read a book.", "A cat was sitting on a mat."),
    "zh": ("猫坐在垫子上看书。", "一只猫坐在垫子上。"),
    "ar": ("جلست القطة على الحصيرة وقرأت كتابا.", "كانت قطة تجلس على حصيرة."),
    "hi": ("बिल्ली चटाई पर बैठकर किताब पढ़ रही थी।", "एक बिल्ली चटाई पर बैठी थी।"),
    "ru": ("Кошка сидела на коврике и читала книгу.", "Кошка сидела на коврике."),
    "fr": ("Le chat était assis sur le tapis et lisait un livre.", "Un chat était assis sur un tapis."),
}
CONTEXTS = {lang: f"[{lang}] " + b for lang, (_, b) in TEXTS.items()}


def _samples() -> list[Sample]:
    out = []
    for lang, (resp, ref) in TEXTS.items():
        out.append(Sample(id=lang, task="dialogue", response=resp, context=(CONTEXTS[lang],), reference=ref))
    return out


def _all_text() -> list[str]:
    return [t for pair in TEXTS.values() for t in pair] + list(CONTEXTS.values())


def build_wordpiece_bert(folder: Path, num_labels: int, labels: list[str] | None = None,
                         problem_type: str | None = None, seed: int = 0) -> Path:
    """A tiny seeded BertForSequenceClassification and a WordPiece vocabulary holding every word
    (and CJK character) of the test texts, so no text maps to [UNK]."""
    from tokenizers import normalizers, pre_tokenizers
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    norm = normalizers.BertNormalizer(lowercase=False, strip_accents=False, handle_chinese_chars=True)
    pre = pre_tokenizers.BertPreTokenizer()
    words = {w for t in _all_text() for w, _ in pre.pre_tokenize_str(norm.normalize_str(t))}
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=False,
                      model_max_length=128).save_pretrained(folder)
    labels = labels or [f"LABEL_{i}" for i in range(num_labels)]
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128, num_labels=num_labels,
                     id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)},
                     problem_type=problem_type, hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3,
                     initializer_range=0.3)
    BertForSequenceClassification(cfg).save_pretrained(folder)  # initializer_range: scores that spread
    return folder


def own_logits(folder: Path, first: list[str], second: list[str] | None = None) -> np.ndarray:
    """The model's own forward, as its model card would call it."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    enc = tok(first, second, padding=True, truncation=True, return_tensors="pt")
    assert tok.unk_token_id not in enc["input_ids"]  # every language is really tokenized
    with torch.no_grad():
        return model(**enc).logits.numpy()


def test_two_labels_score_the_named_positive_label_probability(tmp_path) -> None:
    folder = build_wordpiece_bert(tmp_path / "cls2", 2, ["bad", "good"])
    samples = _samples()
    m = metrics.load("hf-classifier", checkpoint=str(folder), positive_label="good", batch_size=4)
    got = m.score(samples)
    want = 100 * torch.softmax(torch.tensor(own_logits(folder, [s.response for s in samples])), -1)[:, 1].numpy()
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert got.std() > 1.0  # the texts really differ to the model
    assert np.array_equal(m.score(samples), got) and not m.model.training  # eval mode: deterministic
    bad = metrics.load("hf-classifier", checkpoint=str(folder), positive_label="BAD")  # by name, any case
    np.testing.assert_allclose(bad.score(samples), 100 - want, atol=1e-4)
    assert "checkpoint=local:sha256=" in m.signature() and str(folder) not in m.signature() and "p(good)" in m.signature()


def test_three_labels_nli_pairs_response_reference(tmp_path) -> None:
    folder = build_wordpiece_bert(tmp_path / "nli", 3, ["contradiction", "neutral", "entailment"], seed=1)
    samples = _samples()
    m = metrics.load("hf-classifier", checkpoint=str(folder), inputs="response+reference",
                     positive_label="entailment")
    got = m.score(samples)
    logits = own_logits(folder, [s.response for s in samples], [s.reference for s in samples])
    want = 100 * torch.softmax(torch.tensor(logits), -1)[:, 2].numpy()
    np.testing.assert_allclose(got, want, atol=1e-4)
    # order matters to a pair classifier, and several references keep the best
    swapped = metrics.load("hf-classifier", checkpoint=str(folder), inputs="reference+response",
                           positive_label="entailment").score(samples)
    assert not np.allclose(swapped, got, atol=1e-3)
    two = samples[0].__class__(**{**samples[0].__dict__, "references": (TEXTS["fr"][1],)})
    one_each = [m.score([Sample(id="a", task="dialogue", response=two.response, reference=r)])[0]
                for r in two.all_references()]
    # one batch of two pairs vs two batches of one: padding changes float32 sums in the last
    # digits (3e-6 points seen on a loaded CI machine), so the tolerance is the test's 1e-4
    assert m.score([two])[0] == pytest.approx(max(one_each), abs=1e-4)
    with pytest.raises(ValueError, match="0: contradiction, 1: neutral, 2: entailment"):
        metrics.load("hf-classifier", checkpoint=str(folder))  # which label is "good" is never guessed
    with pytest.raises(ValueError, match="not a label"):
        metrics.load("hf-classifier", checkpoint=str(folder), positive_label="yes")


def test_one_logit_regression_sigmoid_or_linear_scale(tmp_path) -> None:
    folder = build_wordpiece_bert(tmp_path / "reg", 1, seed=2)
    samples = _samples()
    logits = own_logits(folder, [s.source_text() for s in samples], [s.response for s in samples])[:, 0]
    m = metrics.load("hf-classifier", checkpoint=str(folder), inputs="source+response")
    np.testing.assert_allclose(m.score(samples), 100 / (1 + np.exp(-logits)), atol=1e-4)
    lo, hi = float(logits.min()) - 0.5, float(logits.max()) + 0.5
    lin = metrics.load("hf-classifier", checkpoint=str(folder), inputs="source+response", scale=(lo, hi))
    np.testing.assert_allclose(lin.score(samples), 100 * (logits - lo) / (hi - lo), atol=1e-4)
    with pytest.raises(ValueError, match="positive_label does not apply"):
        metrics.load("hf-classifier", checkpoint=str(folder), positive_label="LABEL_0")


def test_multi_label_problem_type_uses_the_label_sigmoid(tmp_path) -> None:
    folder = build_wordpiece_bert(tmp_path / "ml", 3, ["fluent", "coherent", "toxic"],
                                  problem_type="multi_label_classification", seed=3)
    samples = _samples()
    m = metrics.load("hf-classifier", checkpoint=str(folder), positive_label="coherent")
    logits = own_logits(folder, [s.response for s in samples])
    np.testing.assert_allclose(m.score(samples), 100 / (1 + np.exp(-logits[:, 1])), atol=1e-4)


def build_tiny_reward_model(folder: Path, padding_side: str) -> Path:
    """A tiny LlamaForSequenceClassification (one logit, read at the last non-padding token)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForSequenceClassification, PreTrainedTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    words = sorted({w for t in _all_text() for w in t.split()})
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "<s>", "</s>", *words])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<s>",
                                 eos_token="</s>", padding_side=padding_side, model_max_length=128)
    hf.save_pretrained(folder)
    torch.manual_seed(4)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128, num_labels=1,
                      pad_token_id=0, bos_token_id=2, eos_token_id=3, initializer_range=0.3)
    LlamaForSequenceClassification(cfg).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("side", ["right", "left"])
def test_reward_model_pools_its_last_real_token_whatever_the_padding(tmp_path, side) -> None:
    folder = build_tiny_reward_model(tmp_path / f"rm-{side}", side)
    samples = _samples()
    m = metrics.load("hf-classifier", checkpoint=str(folder), inputs="source+response", batch_size=6)
    got = m.score(samples)
    batched = own_logits(folder, [s.source_text() for s in samples], [s.response for s in samples])[:, 0]
    alone = np.array([own_logits(folder, [s.source_text()], [s.response])[0, 0] for s in samples])
    np.testing.assert_allclose(got, 100 / (1 + np.exp(-batched)), atol=1e-4)
    np.testing.assert_allclose(got, 100 / (1 + np.exp(-alone)), atol=1e-4)  # padding never leaks in
    assert got.std() > 0.01


def test_plain_encoders_and_robusteval_exports_are_refused(tiny_bert, tmp_path) -> None:
    with pytest.raises(RobustevalError, match="would be random"):
        metrics.load("hf-classifier", checkpoint=str(tiny_bert))  # a BertModel: no trained head
    (tmp_path / "scorer.json").write_text("{}")
    with pytest.raises(RobustevalError, match="cross-encoder"):
        metrics.load("hf-classifier", checkpoint=str(tmp_path))
    with pytest.raises(ValueError, match="inputs must be"):
        metrics.load("hf-classifier", checkpoint=str(tiny_bert), inputs="source+reference")


@pytest.mark.parametrize("name", ["cross-encoder", "poe"])
def test_cross_encoder_and_poe_refuse_a_sequence_classification_checkpoint(tmp_path, name) -> None:
    # one label: its classifier is a [1, hidden] weight that would pass for this family's head
    folder = build_wordpiece_bert(tmp_path / "cls", 1)
    with pytest.raises(RobustevalError, match=r"BertForSequenceClassification.*hf-classifier"):
        metrics.load(name, checkpoint=str(folder))
