"""Tiny models built from configs, with no download: a 2-layer T5, GPT-2 scorer, BERT encoder
and GPT-2 causal LM over word-level vocabularies of a small corpus.

They exercise a metric's, trainer's or backend's exact code path (tokenizer, model class, heads)
where a real checkpoint cannot be fetched: the tests' fixtures (``tests/conftest.py``), the
device check (``scripts/gpu_check.py``) and the fuzzer (``benchmarks/fuzz.py``) build them here.
Seeded, so every build gives the same weights. Their scores mean nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

CORPUS = (
    "the cat sat on the mat . the dog ate my homework . is this a good answer ? yes it is . "
    "no it is not . question : is this a fluent paragraph ? paragraph : summary : document : "
    "response : dialogue history : fact : claim : reference : sentence : utterance : "
    "i love reading books about history and science . how are you today ? i am fine thanks . "
    "what do you think about the weather ? it is sunny and warm here . we went to the park ."
)


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


TINY_BUILDERS: dict[str, Callable[[Path], Path]] = {"tiny_t5": build_tiny_t5, "tiny_gpt2": build_tiny_gpt2,
                                                   "tiny_bert": build_tiny_bert, "tiny_lm": build_tiny_lm}


def tiny_model(kind: str, workdir: Path) -> Path:
    """The tiny model ``kind`` (a :data:`TINY_BUILDERS` key) in ``workdir / kind``, built there
    unless a previous call already did."""
    if kind not in TINY_BUILDERS:
        from robusteval.errors import UnknownNameError

        raise UnknownNameError(f"no tiny model {kind!r} (known: {', '.join(sorted(TINY_BUILDERS))})")
    folder = Path(workdir) / kind
    if not (folder / "config.json").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        TINY_BUILDERS[kind](folder)
    return folder
