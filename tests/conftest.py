"""Shared fixtures: the real data folder (skips without it) and tiny models built from configs.

Hypothesis runs under the ``ci`` profile (always when ``CI`` is set; otherwise unless
``HYPOTHESIS_PROFILE`` names another): examples
are derived from each test's name (``derandomize``), no example database is read or written,
and a failure prints its reproduction blob, so every run, on every clone, tries the same
inputs. ``HYPOTHESIS_PROFILE=explore`` searches with fresh random inputs (more examples) when
hunting for new failures; pin what it finds with ``@example``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True, database=None)
settings.register_profile("explore", deadline=None, print_blob=True, max_examples=1000)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "ci"))

CORPUS = (
    "the cat sat on the mat . the dog ate my homework . is this a good answer ? yes it is . "
    "no it is not . question : is this a fluent paragraph ? paragraph : summary : document : "
    "response : dialogue history : fact : claim : reference : sentence : utterance : "
    "i love reading books about history and science . how are you today ? i am fine thanks . "
    "what do you think about the weather ? it is sunny and warm here . we went to the park ."
)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    value = os.environ.get("ROBUSTEVAL_DATA")
    if not value or not Path(value).is_dir():
        pytest.skip("ROBUSTEVAL_DATA is not set to the human-judgment data folder "
                    "(CI sets it to ../shared/data)")
    return Path(value)


def _word_tokenizer(tmp: Path, specials: list[str], extra: list[str]):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(special_tokens=specials)
    tok.train_from_iterator([CORPUS, " ".join(extra)], trainer=trainer)
    return tok, PreTrainedTokenizerFast, processors


def build_tiny_t5(folder: Path) -> Path:
    """A 2-layer T5 with a word-level tokenizer where 'Yes' and 'No' are whole tokens."""
    from transformers import T5Config, T5ForConditionalGeneration

    tok, fast, processors = _word_tokenizer(folder, ["<pad>", "</s>", "<unk>"], ["Yes", "No"])
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))])
    hf = fast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    hf.save_pretrained(folder)
    import torch

    torch.manual_seed(0)
    cfg = T5Config(vocab_size=hf.vocab_size, d_model=32, d_ff=64, num_layers=2, num_heads=2,
                   d_kv=16, decoder_start_token_id=hf.pad_token_id, pad_token_id=hf.pad_token_id,
                   eos_token_id=hf.eos_token_id)
    T5ForConditionalGeneration(cfg).save_pretrained(folder)
    return folder


def build_tiny_gpt2(folder: Path) -> Path:
    """A 2-layer GPT-2 sequence scorer (DialogRPT layout) with a word-level tokenizer."""
    import torch
    from transformers import GPT2Config, GPT2ForSequenceClassification

    tok, fast, _ = _word_tokenizer(folder, ["<|endoftext|>", "<unk>"], [])
    hf = fast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
              unk_token="<unk>")
    hf.save_pretrained(folder)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=hf.vocab_size, n_embd=32, n_layer=2, n_head=2, n_positions=256,
                     num_labels=1, pad_token_id=hf.eos_token_id)
    GPT2ForSequenceClassification(cfg).save_pretrained(folder)
    return folder


def build_tiny_bert(folder: Path) -> Path:
    """A 2-layer BERT encoder with a WordPiece vocabulary (cross-encoder tests)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(CORPUS.split()))]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=300)
    BertModel(cfg).save_pretrained(folder)
    return folder


def build_tiny_lm(folder: Path) -> Path:
    """A 2-layer GPT-2 causal LM with a word-level tokenizer (perplexity tests)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tok, fast, _ = _word_tokenizer(folder, ["<|endoftext|>", "<unk>"], [])
    hf = fast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>", unk_token="<unk>")
    hf.save_pretrained(folder)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=hf.vocab_size, n_embd=32, n_layer=2, n_head=2, n_positions=600,
                     pad_token_id=hf.eos_token_id)
    GPT2LMHeadModel(cfg).save_pretrained(folder)
    return folder


# Builders are plain functions so benchmarks/fuzz.py can build the same tiny models.
TINY_BUILDERS = {"tiny_t5": build_tiny_t5, "tiny_gpt2": build_tiny_gpt2, "tiny_bert": build_tiny_bert,
                 "tiny_lm": build_tiny_lm}


@pytest.fixture(scope="session")
def tiny_t5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_t5(tmp_path_factory.mktemp("tiny_t5"))


@pytest.fixture(scope="session")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_gpt2(tmp_path_factory.mktemp("tiny_gpt2"))


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_lm(tmp_path_factory.mktemp("tiny_lm"))
