"""Decode-step attention that reads each prompt's KV cache once, not once per sample row.

Why: after batching, a decoding step of the AdvEval gold (8 candidates x 8 sampled ratings =
64 rows over ~300 prompt tokens) is bound by memory traffic, not arithmetic. With a plain
cache every row carries its own copy of its prompt's keys and values, which a step reads,
concatenates a token onto (a full copy), and, for grouped-query models like SmolLM2, expands
to every query head (another copy): several GB per step on a 135M model, the same per row as
one prompt at a time. Here the prompt part (``ctx``: one entry per prompt, fixed after the
prefill) and the generated part (``own``: one per row, growing) are kept apart, and the
step's attention is computed in two blocks merged under one softmax (the "cascade" or
shared-prefix attention of Hydragen / FlashInfer):

* ``ctx``: the queries of a prompt's rows are stacked as extra query positions of that
  prompt, so its keys and values are read once for all n samples (and never copied);
* ``own``: each row against its own few generated tokens.

Grouped-query heads are handled by reshaping queries, not by repeating keys. The function is
registered as an HF attention implementation that behaves exactly like ``sdpa`` unless a
:class:`TieredCache` is active in this thread (:func:`active`), so the prefill, the
probability scoring and :meth:`text_nll` are unchanged. ``TieredCache.seen`` counts the
layers that really went through it, so a model whose attention does not use the
registered function is detected instead of decoding with half its cache.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

NAME = "robusteval_tiered"
_ACTIVE: contextvars.ContextVar[TieredCache | None] = contextvars.ContextVar("robusteval_tiered", default=None)


class _Layer(CacheLayerMixin):
    """One layer: the prompts' keys/values (k, kv_heads, T, d) and the rows' own (B, kv_heads, t, d)."""

    def __init__(self, ctx_k: torch.Tensor, ctx_v: torch.Tensor) -> None:
        super().__init__()
        self.ctx_k, self.ctx_v = ctx_k, ctx_v
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor) -> None:  # ctx is given at construction
        pass

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor,
               cache_kwargs: dict[str, Any] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys is None:
            self.keys, self.values = key_states, value_states
        else:
            self.keys = torch.cat([self.keys, key_states], dim=-2)
            self.values = torch.cat([self.values, value_states], dim=-2)
        return self.keys, self.values

    def own_length(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[-2])

    def get_seq_length(self) -> int:
        return int(self.ctx_k.shape[-2]) + self.own_length()

    def get_mask_sizes(self, cache_position: torch.Tensor) -> tuple[int, int]:
        return self.get_seq_length() + int(cache_position.shape[0]), 0

    def get_max_cache_shape(self) -> int:
        return -1

    def select(self, rows: torch.Tensor) -> None:
        if self.keys is not None:
            self.keys, self.values = self.keys[rows], self.values[rows]


class TieredCache(Cache):
    """A prefilled cache of ``k`` prompts decoded as ``n`` rows each (row r of prompt g in slot j).

    ``ctx_mask``: (k, T) 1 where a prompt's cache column is a real token (0: padding)."""

    def __init__(self, prefilled: Any, ctx_mask: torch.Tensor, n: int) -> None:
        pairs = [(layer.keys, layer.values) for layer in prefilled.layers]
        super().__init__(layers=[_Layer(k, v) for k, v in pairs])
        k = int(ctx_mask.shape[0])
        self.n = n
        self.group = torch.arange(k, device=ctx_mask.device).repeat_interleave(n)
        self.slot = torch.arange(n, device=ctx_mask.device).repeat(k)
        self.bias = torch.zeros(ctx_mask.shape, dtype=pairs[0][0].dtype, device=ctx_mask.device)
        self.bias.masked_fill_(ctx_mask == 0, float("-inf"))
        self.seen = 0

    def select(self, rows: torch.Tensor) -> None:
        """Keep only ``rows`` (rows that ended leave the batch)."""
        self.group, self.slot = self.group[rows], self.slot[rows]
        for layer in self.layers:
            layer.select(rows)  # type: ignore[attr-defined]

    def attend(self, layer_idx: int, query: torch.Tensor, scale: float) -> torch.Tensor:
        """Attention output (B, 1, heads, d) of one decode step's ``query`` (B, heads, 1, d)."""
        layer: _Layer = self.layers[layer_idx]  # type: ignore[assignment]
        ctx_k, ctx_v, own_k, own_v = layer.ctx_k, layer.ctx_v, layer.keys, layer.values
        assert own_k is not None and own_v is not None
        b, heads, _, d = query.shape
        k, kv, t_ctx, _ = ctx_k.shape
        g = heads // kv
        q = query[:, :, 0, :].reshape(b, kv, g, d) * scale
        # ctx block: every row's query in its prompt's (n slots) grid, one matmul per prompt
        grid = q.new_zeros(k, self.n, kv, g, d)
        grid[self.group, self.slot] = q
        grid = grid.permute(0, 2, 3, 1, 4).reshape(k, kv, g * self.n, d)
        s_ctx = (grid @ ctx_k.transpose(-1, -2)).view(k, kv, g, self.n, t_ctx)
        s_ctx = s_ctx + self.bias[:, None, None, None, :]
        s_ctx = s_ctx.permute(0, 3, 1, 2, 4)[self.group, self.slot]          # (B, kv, g, T)
        s_own = torch.einsum("bhgd,bhtd->bhgt", q, own_k)                     # (B, kv, g, t)
        w = torch.softmax(torch.cat([s_ctx, s_own], dim=-1).float(), dim=-1).to(q.dtype)
        w_ctx, w_own = w[..., :t_ctx], w[..., t_ctx:]
        wgrid = w.new_zeros(k, self.n, kv, g, t_ctx)
        wgrid[self.group, self.slot] = w_ctx
        wgrid = wgrid.permute(0, 2, 3, 1, 4).reshape(k, kv, g * self.n, t_ctx)
        o_ctx = (wgrid @ ctx_v).view(k, kv, g, self.n, d).permute(0, 3, 1, 2, 4)[self.group, self.slot]
        out = o_ctx + torch.einsum("bhgt,bhtd->bhgd", w_own, own_v)
        self.seen += 1
        return out.reshape(b, 1, heads, d)


@contextlib.contextmanager
def active(cache: TieredCache) -> Iterator[TieredCache]:
    """Route this thread's attention through ``cache`` for the duration."""
    token = _ACTIVE.set(cache)
    try:
        yield cache
    finally:
        _ACTIVE.reset(token)


def attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              attention_mask: torch.Tensor | None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """``sdpa``, or the tiered decode step when a :class:`TieredCache` is active."""
    cache = _ACTIVE.get()
    if cache is None or query.shape[-2] != 1:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    scale = kwargs.get("scaling")
    scale = query.shape[-1] ** -0.5 if scale is None else float(scale)
    return cache.attend(int(module.layer_idx), query, scale), None


def install(model: Any) -> bool:
    """Register the attention (and sdpa's masks under its name) and switch ``model`` to it;
    False (model left as it is) when the model does not use ``sdpa``."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    AttentionInterface.register(NAME, attention)
    AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    try:
        model.set_attn_implementation(NAME)
    except (ValueError, TypeError, AttributeError):
        return False
    return getattr(model.config, "_attn_implementation", None) == NAME
