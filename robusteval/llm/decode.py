"""Batched decoding for :class:`~robusteval.llm.backends.LocalCausalLM`, with the shared prompt
prefix encoded once.

Why not ``model.generate``: sampling there draws every row from one global RNG, so a prompt's
answers depend on which prompts share its batch (a gold cache shared across victims, a
resumed run and a fresh one would disagree), which forced one call per prompt; and
``num_return_sequences`` re-encodes the prompt once per sample. Here

* every row (prompt x sample) draws from its own ``torch.Generator`` seeded by
  ``(seed, prompt, sample index)``, so a whole AdvEval iteration (all candidates, all n
  samples) is one batch and each prompt still gets the answers it would get alone (up to
  float rounding of batched matmuls, the same caveat as any batched greedy decoding);
* a prompt is encoded once; its n sample rows share its KV cache while decoding
  (:mod:`robusteval.llm.tiered`: each step reads a prompt's keys once for all its rows),
  or, without ``tiered``, get a copy of it;
* the longest common token prefix of the prompts in a batch (chat template, judge
  instructions, the dialogue history shared by all candidates) is encoded once and its KV
  cache copied to every row, so only the suffixes are encoded (``share_prefix``);
* a row leaves the batch when it ends (EOS, or the caller's ``stop`` says the rest of the text
  cannot matter), so the remaining rows' steps get cheaper.

Sampling reproduces ``generate(do_sample=True, temperature=T, top_p=1.0)`` with the model's
generation config ``top_k`` (50 unless set): temperature, then top-k (ties at the k-th value
kept), then softmax, then one draw by inverse CDF per row. Greedy takes the argmax.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from robusteval.llm.tiered import TieredCache
from robusteval.llm.tiered import active as active_cache


class TieredUnsupported(RuntimeError):
    """The model's attention did not go through the tiered decode step (decode flat instead)."""


@dataclass(frozen=True)
class Decoding:
    """How to pick tokens: ``temperature <= 0`` is greedy; ``eos``: ids that end a row."""

    temperature: float
    max_new_tokens: int
    eos: frozenset[int]
    top_k: int | None = None


def common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest token prefix all ``seqs`` share."""
    if not seqs:
        return 0
    first, n = seqs[0], min(len(s) for s in seqs)
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs):
            return i
    return n


def row_seed(seed: int, prompt: str, sample: int) -> int:
    """The RNG seed of sample ``sample`` of ``prompt``: a function of these three only."""
    blob = json.dumps([seed, sample, prompt], ensure_ascii=False).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") & (2**63 - 1)


class PrefixBatch:
    """Prefills batches of token sequences, sharing their common prefix's KV cache.

    ``min_prefix``: shorter shared prefixes are not worth a separate pass (and a prefix of at
    least one token keeps every padded row attending to something)."""

    def __init__(self, model: Any, pad_id: int, share_prefix: bool = True, min_prefix: int = 8,
                 tiered: bool = False) -> None:
        self.model = model
        self.pad_id = pad_id
        self.share_prefix = share_prefix
        self.tiered = tiered  # decode with TieredCache (needs tiered.install(model) first)
        self.min_prefix = max(1, min_prefix)
        self.device = next(model.parameters()).device
        self.forwards = 0  # model forward passes (prefix, suffix and decode steps)
        self.tokens_shared = 0  # prompt tokens not encoded again thanks to a shared prefix

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None, pos: torch.Tensor,
                cache: Any) -> tuple[torch.Tensor, Any]:
        """Last-position logits (float32) and the updated cache."""
        self.forwards += 1
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache,
                         use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :].float(), out.past_key_values

    def prefill(self, seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, Any, torch.Tensor, torch.Tensor]:
        """Encode ``seqs`` (each non-empty): last logits, cache, attention mask over the cache,
        and the position of each row's next token.

        Layout per row: ``[shared prefix][left padding][own suffix]``; padding is masked and
        positions skip it, so each row computes what it would alone."""
        dev = self.device
        p = min(common_prefix(seqs), min(len(s) for s in seqs) - 1) if self.share_prefix else 0
        cache = None
        if p >= self.min_prefix and len(seqs) > 1:
            one = torch.tensor([list(seqs[0][:p])], device=dev)
            _, cache = self.forward(one, torch.ones_like(one), torch.arange(p, device=dev)[None], None)
            cache.batch_repeat_interleave(len(seqs))
            self.tokens_shared += p * (len(seqs) - 1)
        else:
            p = 0
        sufs = [list(s[p:]) for s in seqs]
        width = max(len(s) for s in sufs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long, device=dev)
        mask = torch.zeros((len(seqs), p + width), dtype=torch.long, device=dev)
        mask[:, :p] = 1
        pos = torch.full((len(seqs), width), max(p - 1, 0), dtype=torch.long, device=dev)
        for i, s in enumerate(sufs):
            start = width - len(s)
            ids[i, start:] = torch.tensor(s, device=dev)
            mask[i, p + start:] = 1
            pos[i, start:] = torch.arange(p, p + len(s), device=dev)
        logits, cache = self.forward(ids, mask, pos, cache)
        return logits, cache, mask, pos[:, -1] + 1


def _pick(logits: torch.Tensor, how: Decoding, gens: Sequence[torch.Generator] | None) -> torch.Tensor:
    """One token per row: argmax, or a draw from the row's own generator."""
    if how.temperature <= 0 or gens is None:
        return logits.argmax(-1)
    scores = logits / how.temperature
    if how.top_k and how.top_k < scores.shape[-1]:
        kth = torch.topk(scores, how.top_k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if probs.device.type == "mps":  # Apple's MPS has no float64: the draw is made on the CPU
        probs = probs.cpu()
    cdf = probs.double().cumsum(-1)
    u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in gens]).to(cdf.device)
    # the first token whose cumulative probability exceeds u * total: never a zero-probability one
    idx = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).clamp(max=cdf.shape[-1] - 1)
    return idx[:, 0].to(logits.device)


def decode_rows(batch: PrefixBatch, seqs: Sequence[Sequence[int]], n: int, how: Decoding,
                seeds: Sequence[Sequence[int]] | None, text: Callable[[list[int]], str],
                stop: Callable[[str], bool] | None = None) -> list[list[list[int]]]:
    """Generated token ids, ``n`` rows per sequence (``seeds[i][j]`` seeds row j of seq i;
    None: greedy). ``text`` decodes ids for ``stop``, which ends a row once it returns True."""
    logits, cache, mask, pos = batch.prefill(seqs)
    tiered = batch.tiered
    if tiered:
        cache = TieredCache(cache, mask, n)
    elif n > 1:
        cache.batch_repeat_interleave(n)
        mask = mask.repeat_interleave(n, dim=0)
    if n > 1:
        logits, pos = logits.repeat_interleave(n, dim=0), pos.repeat_interleave(n, dim=0)
    rows = len(seqs) * n
    gens = None
    if seeds is not None:
        gens = [torch.Generator().manual_seed(seeds[r // n][r % n]) for r in range(rows)]
    out: list[list[int]] = [[] for _ in range(rows)]
    active = list(range(rows))
    for step in range(how.max_new_tokens):
        toks = _pick(logits, how, gens).tolist()
        keep = []
        for r, t in enumerate(toks):
            row = active[r]
            out[row].append(t)
            if t not in how.eos and not (stop is not None and stop(text(out[row]))):
                keep.append(r)
        if not keep or step == how.max_new_tokens - 1:
            break
        nxt = torch.tensor([toks[r] for r in keep], device=mask.device)
        if len(keep) < len(active):
            sel = torch.tensor(keep, device=mask.device)
            if tiered:
                cache.select(sel)
            else:
                cache.batch_select_indices(sel)
                mask = mask[sel]
            pos = pos[sel]
            active = [active[r] for r in keep]
            gens = None if gens is None else [gens[r] for r in keep]
        if tiered:
            seen = cache.seen
            seen_all = mask.new_ones((len(active), cache.get_seq_length() + 1))  # nothing masked:
            with active_cache(cache):  # the padding lives in the cache's own bias
                logits, _ = batch.forward(nxt[:, None], seen_all, pos[:, None], cache)
            if cache.seen - seen != len(cache.layers):
                raise TieredUnsupported(f"{cache.seen - seen} of {len(cache.layers)} layers used tiered attention")
        else:
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            logits, cache = batch.forward(nxt[:, None], mask, pos[:, None], cache)
        pos = pos + 1
    return [out[i * n:(i + 1) * n] for i in range(len(seqs))]
