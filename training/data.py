"""Training data for learned evaluators: human-judged samples plus adversarial examples.

:class:`ScoringDataModule` (a LightningDataModule) mixes, by config:

* human-judged samples from the registered loaders (``datasets``: ``name`` or
  ``name:aspect``); the target is the human score of ``aspect`` (default ``overall``)
  normalized to [0, 1] with the dataset's recorded scale;
* adversarial examples from attack-runner ``results.jsonl`` files (``adversarial``): an R−
  example (text made bad) gets the target ``adv_low_target`` (0 by default) and is paired with
  its original for the margin loss; an R+ example (quality kept) keeps its original's target;
  with ``only_successful`` just the examples that fooled the victim are used;
* optional negative sampling (``negatives`` per sample: responses of other conversations, target 0)
  for training without labels;
* self-supervised pre-training pairs (``self_supervised``: dialogue datasets whose contexts
  give positives and paired negatives, :mod:`robusteval.training.ssl`).

Splits are made by *conversation*: every sample of a context, every context that extends it
(several rated turns of one dialogue, :mod:`robusteval.data.conversations`), and every
adversarial example made from one of them, lands in the same split (train / val / test),
chosen by a hash of dataset and conversation, so no context leaks across splits. ``test_datasets`` are held out entirely
(zero-shot test sets).
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from torch.utils.data import DataLoader

from robusteval.asr import changed, is_counted, training_example
from robusteval.attacks.runner import read_results
from robusteval.errors import DataFormatError, RobustevalError
from robusteval.types import Sample

SPLITS = ("train", "val", "test")
# what split_of hashes: "conversation" since 2026-11-26 (before it, the exact context); a
# dataset given as a path by its file name alone since 2026-11-28 (before it, the whole path as
# written: a user's file split one way in one folder and another way in the next). Recorded in
# harden.json and in compare's and harden's run fingerprints, so runs split one way are never
# paired with, or resumed as, runs split the other
SPLIT_SCHEME = "conversation/file-name"


@dataclass
class Item:
    """One training example: the sample as the scorer sees it and its target in [0, 1]."""

    sample: Sample
    target: float
    kind: str  # "human" | "adv-" | "adv+" | "negative" | "ssl+" | "ssl-"
    dataset: str
    original: Sample | None = None  # R-/R+ examples, ssl negatives: the text it was made from
    attack: str | None = None
    family: str | None = None


@dataclass
class Pool:
    items: dict[str, list[Item]] = field(default_factory=lambda: {s: [] for s in SPLITS})
    counts: Counter[str] = field(default_factory=Counter)


def parse_spec(spec: str) -> tuple[str, str]:
    """``"NAME[:ASPECT]"`` -> (dataset, aspect; default ``overall``). ``NAME`` may be anything
    :func:`robusteval.data.load` takes (``hf:org/set``, ``module:attr``, a file): a trailing
    ``:ASPECT`` is split off only where :func:`robusteval.data.split_suffix` says so."""
    from robusteval import data

    name, aspect = data.split_suffix(spec)
    return name, aspect or "overall"


def normalized(sample: Sample, aspect: str) -> float | None:
    """The human score of ``aspect`` mapped to [0, 1] with the dataset's scale (None if absent)."""
    if aspect not in sample.human:
        return None
    scale = (sample.meta.get("scales") or {}).get(aspect) or {}
    low, high = scale.get("low"), scale.get("high")
    if low is None or high is None or high <= low:
        raise DataFormatError(sample.meta.get("dataset", sample.id), f"no usable scale for aspect {aspect!r}",
                              field="scales")
    return min(1.0, max(0.0, (float(sample.human[aspect]) - low) / (high - low)))


def split_salt(dataset: str) -> str:
    """What :func:`split_of` hashes for ``dataset``: a registered name, an ``hf:`` name and a
    ``module:attr`` as they are; a file or folder given as a path by its last component alone, so
    a user's file splits the same wherever it lies (``data/mine.jsonl``, ``/tmp/x/mine.jsonl``,
    ``./mine.jsonl`` and ``mine.jsonl`` are one split; ``.`` is the current folder's name)."""
    import posixpath

    from robusteval.registry import is_object_name

    text = str(dataset)
    if text.startswith("hf:") or is_object_name(text):
        return text
    name = posixpath.normpath(text.replace("\\", "/")).rsplit("/", 1)[-1]
    if name in ("", ".", ".."):  # "/", ".", "data/.." : the folder it names
        name = Path(os.path.abspath(text)).name
    return name or text


def same_split(scheme: str | None, datasets: Sequence[str]) -> bool:
    """Whether contexts split under a recorded ``scheme`` lie where :func:`split_of` puts them
    now, for every one of ``datasets``: "conversation" (before 2026-11-28) hashed a dataset as
    written, which is what it still hashes for a registered name (no path in it)."""
    return scheme == SPLIT_SCHEME or (scheme == "conversation" and all(split_salt(d) == str(d) for d in datasets))


def effective_scheme(scheme: str, datasets: Sequence[str]) -> str:
    """``scheme`` as the split it makes of ``datasets``: :data:`SPLIT_SCHEME` where the two split
    them alike (:func:`same_split`), else ``scheme`` itself; two runs' splits agree exactly when
    these agree."""
    return SPLIT_SCHEME if same_split(scheme, datasets) else scheme


def split_of(dataset: str, sample: Sample, val_fraction: float, test_fraction: float, seed: int) -> str:
    """The split of ``sample``'s conversation (:meth:`Sample.conversation_key`: its context,
    unless the dataset rates several turns of one dialogue), from a hash of seed, dataset
    (:func:`split_salt`: a path by its file name) and key."""
    h = hashlib.sha256(f"{seed}|{split_salt(dataset)}|{sample.conversation_key()}".encode()).digest()
    u = int.from_bytes(h[:8], "big") / 2**64
    return "test" if u < test_fraction else "val" if u < test_fraction + val_fraction else "train"


def ssl_positives(name: str, samples: list[Sample], val_fraction: float, test_fraction: float, seed: int,
                  ssl_limit: int | None) -> dict[str, list[Sample]]:
    """The self-supervised positives pre-training draws from dataset ``name``, per split: every
    (turns before, turn) pair of each split's contexts (:func:`robusteval.training.ssl.continuations`),
    at most ``ssl_limit`` per dataset (a seeded share of each split)."""
    from robusteval.training.ssl import continuations

    by_split: dict[str, list[Sample]] = {sp: [] for sp in SPLITS}
    for s in samples:
        by_split[split_of(name, s, val_fraction, test_fraction, seed)].append(s)
    positives = {sp: continuations(group) for sp, group in by_split.items()}
    total = sum(len(v) for v in positives.values())
    share = 1.0 if ssl_limit is None or total <= ssl_limit else ssl_limit / total
    if share < 1.0:  # at most ssl_limit positives per dataset: a seeded subset of each split
        for split, pos in positives.items():
            random.Random(f"{seed}|{name}|{split}").shuffle(pos)
            positives[split] = pos[: round(share * len(pos))]
    return positives


def check_splits(splits: dict[str, list[Any]], dataset: str, val_fraction: float, test_fraction: float, seed: int,
                 command: str, need: tuple[str, ...] = ("train", "val", "test")) -> None:
    """Refuse, before any training, a split that leaves one of ``need`` without a context:
    adversarial rounds train on train, choose on val and report on test, so an empty one would
    make hours of work end in an empty choice or an empty table (quickstart-dialogue's 20
    contexts at seed 3 have no test context; quickstart-summary's 12 at seed 1 no val one).
    ``robusteval harden`` and ``robusteval compare`` (for a suite with a learned victim) both
    check here."""
    empty = [k for k in need if not splits.get(k)]
    if empty:
        counts = ", ".join(f"{k} {len(v)}" for k, v in splits.items())
        raise RobustevalError(
            f"{command}: the split of {dataset} ({sum(len(v) for v in splits.values())} contexts; val_fraction "
            f"{val_fraction}, test_fraction {test_fraction}, seed {seed}) leaves {' and '.join(empty)} without a "
            f"context ({counts}); use more contexts, larger fractions or another seed")


def read_digest(data_args: dict[str, Any], pretrain: dict[str, Any] | None = None) -> dict[str, Any]:
    """A digest, with the human ratings, of every dataset a training run with ``data_args``
    reads (``datasets`` and ``test_datasets`` under its ``limit``, the ``self_supervised`` and
    ``pretrain`` datasets whole, as :func:`build_pool` loads them, and the bytes of the
    ``adversarial`` result logs): what a run fingerprint records so that a resume after a
    rating changed in any of them is another run, not one that reuses models trained on the
    old ratings."""
    from robusteval import data
    from robusteval.results import samples_digest

    # as build_pool loads them: the rated sets under ``limit``, the self-supervised ones whole
    limit = data_args.get("limit")
    wanted: dict[str, int | None] = {}
    for name in (n for key in ("datasets", "test_datasets") for n in data_args.get(key) or []):
        wanted.setdefault(parse_spec(name)[0], limit)
    for name in [*(data_args.get("self_supervised") or []), *((pretrain or {}).get("datasets") or [])]:
        wanted[parse_spec(name)[0]] = None
    out: dict[str, Any] = {name: samples_digest(data.load(name, data_args.get("data_dir"), limit=cap), ratings=True)
                           for name, cap in sorted(wanted.items(), key=lambda kv: kv[0])}
    for path in data_args.get("adversarial") or []:  # attack result logs trained on: their bytes
        p = Path(path) / "results.jsonl" if Path(path).is_dir() else Path(path)
        out[f"adversarial:{path}"] = hashlib.sha256(p.read_bytes()).hexdigest()[:20] if p.is_file() else None
    return out


def build_pool(datasets: list[str], test_datasets: list[str], adversarial: list[str], *, only_successful: bool,
               adv_low_target: float, negatives: int, val_fraction: float, test_fraction: float, seed: int,
               data_dir: str | None, limit: int | None, adversarial_families: list[str] | None = None,
               self_supervised: list[str] | None = None, ssl_negatives: list[str] | None = None,
               ssl_per_positive: int = 2, ssl_limit: int | None = None, human_share: float = 1.0) -> Pool:
    from robusteval import data

    pool = Pool()
    loaded: dict[tuple[str, int | None], list[Sample]] = {}

    def load(name: str, cap: int | None = limit) -> list[Sample]:
        if (name, cap) not in loaded:
            loaded[(name, cap)] = data.load(name, data_dir, limit=cap)
        return loaded[(name, cap)]

    targets: dict[tuple[str, str], tuple[str, float | None]] = {}  # (dataset, id) -> (split, target)
    for role, specs in (("split", datasets), ("test", test_datasets)):
        for spec in specs:
            name, aspect = parse_spec(spec)
            for s in load(name):
                split = "test" if role == "test" else split_of(name, s, val_fraction, test_fraction, seed)
                t = normalized(s, aspect)
                targets[(name, s.id)] = (split, t)
                if t is None:
                    pool.counts["no_human_score"] += 1
                    continue
                pool.items[split].append(Item(s, t, "human", name))
    for path in adversarial:
        rows, name = read_results(path)
        if name is None:
            raise DataFormatError(path, "the result rows do not name one dataset (rerun the attack)")
        by_id = {s.id: s for s in load(name, None)}  # attacks may come from samples past ``limit``
        for r in rows:
            if not (training_example(r) if only_successful else is_counted(r) and changed(r)):
                continue
            if adversarial_families is not None and r.family not in adversarial_families:
                continue
            base = by_id.get(r.sample_id)
            if base is None:
                raise DataFormatError(path, f"sample {r.sample_id!r} is not in dataset {name}", field="sample_id")
            split, t = targets.get((name, base.id), (split_of(name, base, val_fraction, test_fraction, seed), None))
            adv = base.with_response(r.adversarial, attack=r.attack)
            if r.direction == "R-":
                pool.items[split].append(Item(adv, adv_low_target, "adv-", name, original=base,
                                              attack=r.attack, family=r.family))
            elif t is not None:  # paired with its original for the consistency loss
                pool.items[split].append(Item(adv, t, "adv+", name, original=base, attack=r.attack, family=r.family))
            else:
                pool.counts["adv+_without_human_score"] += 1
    if self_supervised:
        from robusteval.training.ssl import DEFAULT_KINDS, ssl_items

        for name in self_supervised:
            positives = ssl_positives(name, load(name, None), val_fraction, test_fraction, seed, ssl_limit)
            for split, pos in positives.items():
                pool.items[split].extend(ssl_items(pos, name, list(ssl_negatives or DEFAULT_KINDS),
                                                   ssl_per_positive, seed))
    if negatives:
        rng = random.Random(seed)
        for split in SPLITS:
            humans = [it for it in pool.items[split] if it.kind == "human"]
            for it in humans:
                others = [o for o in humans if o.sample.conversation_key() != it.sample.conversation_key()]
                for o in rng.sample(others, min(negatives, len(others))):
                    pool.items[split].append(Item(it.sample.with_response(o.sample.response, negative=True), 0.0,
                                                  "negative", it.dataset))
    if human_share < 1.0:  # replay: a seeded share of the human-judged train items (adversarial rounds)
        rng = random.Random(f"{seed}|human_share")
        pool.items["train"] = [it for it in pool.items["train"] if it.kind != "human" or rng.random() < human_share]
    for split in SPLITS:
        pool.counts.update(f"{split}/{it.kind}" for it in pool.items[split])
    return pool


class EpochSampler:
    """A shuffling sampler whose order depends only on (seed, epoch): a run resumed at an
    epoch boundary sees exactly the batches the uninterrupted run would have seen. Lightning
    calls ``set_epoch`` before every epoch."""

    def __init__(self, n: int, seed: int, shuffle: bool) -> None:
        self.n, self.seed, self.shuffle, self.epoch = n, seed, shuffle, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Any:
        order = list(range(self.n))
        if self.shuffle:
            random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        return iter(order)

    def __len__(self) -> int:
        return self.n


class Items:
    """A batch's items in a plain container: Lightning moves batches to the device with a
    recursive walk that refuses frozen dataclasses (Sample), so it must not look inside."""

    def __init__(self, items: list[Item]) -> None:
        self._items = items

    def __iter__(self) -> Any:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: int) -> Item:
        return self._items[i]


def collate(items: list[Item]) -> dict[str, Any]:
    import torch

    return {"items": Items(items), "target": torch.tensor([it.target for it in items], dtype=torch.float32)}


class ScoringDataModule(pl.LightningDataModule):
    """Human-judged + adversarial examples, split by conversation (see the module docstring).

    Args:
        datasets: registered dataset names, optionally ``name:aspect``; split train/val/test.
        test_datasets: held out entirely (zero-shot test sets).
        adversarial: attack-runner results files or folders.
        only_successful: keep only adversarial examples that fooled the attacked victim.
        adversarial_families: keep only adversarial examples of these attack families (default: all).
        adv_low_target: target of an R- adversarial example.
        negatives: negative samples (responses of other conversations) per human sample.
        val_fraction: share of conversations for validation.
        test_fraction: share of conversations for testing.
        batch_size: examples per batch.
        seed: split and sampling seed.
        data_dir: human-judgment data folder (default ``$ROBUSTEVAL_DATA``).
        limit: first N samples of each dataset (smoke runs).
        self_supervised: dialogue datasets whose contexts give self-supervised positives and
            negatives (:mod:`robusteval.training.ssl`), split by conversation like the rest.
        ssl_negatives: negative kinds (default: random, shuffled, truncated, context_copy; also
            punctuation and opener, :mod:`robusteval.training.ssl`).
        ssl_per_positive: negatives per positive.
        ssl_limit: at most this many positives per self-supervised dataset (a seeded subset).
        human_share: share of the human-judged *train* items kept (a seeded subset; validation
            and test keep all): the replay share of an adversarial round.
    """

    def __init__(self, datasets: list[str] | None = None, test_datasets: list[str] | None = None,
                 adversarial: list[str] | None = None, only_successful: bool = False,
                 adversarial_families: list[str] | None = None, adv_low_target: float = 0.0,
                 negatives: int = 0, val_fraction: float = 0.1, test_fraction: float = 0.2, batch_size: int = 16,
                 seed: int = 0, data_dir: str | None = None, limit: int | None = None,
                 self_supervised: list[str] | None = None, ssl_negatives: list[str] | None = None,
                 ssl_per_positive: int = 2, ssl_limit: int | None = None, human_share: float = 1.0) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.datasets = list(datasets if datasets is not None else ["dailydialog-zhao", "persona-zhao"])
        self.test_datasets = list(test_datasets or [])
        self.adversarial = list(adversarial or [])
        if not 0 < human_share <= 1:
            raise RobustevalError(f"human_share must be in (0, 1], got {human_share}")
        if not 0 <= val_fraction + test_fraction < 1:
            raise RobustevalError("val_fraction + test_fraction must be in [0, 1)")
        self.pool: Pool | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.pool is None:
            h = self.hparams
            self.pool = build_pool(self.datasets, self.test_datasets, self.adversarial,
                                   only_successful=h.only_successful, adv_low_target=h.adv_low_target,
                                   negatives=h.negatives, val_fraction=h.val_fraction,
                                   test_fraction=h.test_fraction, seed=h.seed, data_dir=h.data_dir, limit=h.limit,
                                   adversarial_families=h.adversarial_families,
                                   self_supervised=h.self_supervised, ssl_negatives=h.ssl_negatives,
                                   ssl_per_positive=h.ssl_per_positive, ssl_limit=h.ssl_limit,
                                   human_share=h.human_share)
            if not self.pool.items["train"] and stage in (None, "fit"):
                raise RobustevalError(f"no training examples from {self.datasets or self.hparams.self_supervised}")

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint records of the data: the split scheme, so that ``--ckpt_path``
        continues a training only on the split it began on (:meth:`check_split`)."""
        return {"split_scheme": SPLIT_SCHEME}

    def check_split(self, scheme: str | None) -> None:
        """Refuse a checkpoint whose data were split otherwise than this code splits them
        (called by :meth:`robusteval.training.base.EvaluatorModule.on_load_checkpoint` with the
        scheme the checkpoint recorded, None for one written before it recorded any): its train,
        validation and test contexts are not this run's, so going on from it would train on
        other contexts and test on contexts it may have trained on."""
        names = [parse_spec(n)[0] for n in [*self.datasets, *(self.hparams.self_supervised or [])]]
        if not same_split(scheme, names):
            said = repr(scheme) if scheme else "a scheme it does not record (written before 2026-11-28)"
            raise RobustevalError(f"this checkpoint's training split its data by {said}; this code splits "
                                  f"{', '.join(names)} by {SPLIT_SCHEME!r}, so its train / val / test contexts are "
                                  "other ones: train from scratch")

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        assert self.pool is not None, "call setup() first"
        items = self.pool.items[split]
        return DataLoader(items, batch_size=self.hparams.batch_size, collate_fn=collate,
                          sampler=EpochSampler(len(items), self.hparams.seed, shuffle))

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False)
