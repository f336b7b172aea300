"""An OpenAI-compatible ``/chat/completions`` backend (OpenAI, vLLM, llama.cpp server, ...).

Every request has a total deadline (``timeout`` seconds across all tries and waits). It
retries only what may succeed next time (connection errors, timeouts, 408/409/425/429/5xx
and 200s carrying an ``error``), waiting with exponential backoff or as the server asks
(``retry-after-ms``, else ``Retry-After`` in seconds or as an HTTP-date; a wait that would
end past the deadline fails at once). Any other status, or a 200 that is not a usable
answer, fails at once, after one try, and says so. Only usable answers are cached (and only
those the caller accepts); errors name the sample. The API key goes only to the hosts
:mod:`robusteval.llm.policy` allows. :meth:`OpenAICompatible.report` counts calls, cache
hits, retries, failures and fallbacks.

Concurrency: the prompts of one call are sent by up to ``max_concurrency`` threads at once
(a remote model answers many requests in the time of one; the local judge's AdvEval gold
scores 8 candidates per iteration). Each request keeps its own deadline, starting when its
first try is sent; results come back in input order; with ``on_error="raise"`` the error is
the first failing prompt's in input order, prompts not yet sent are cancelled and those in
flight finish (usable answers are still cached). A ``Retry-After`` pauses every thread, not
only the one that got it: no request is sent before the server's time (unless that is past
its own deadline, when it fails at once).

Why not the ``openai`` SDK: it is not a dependency, its timeouts (httpx) bound each socket
operation rather than the request, it honours ``Retry-After`` only up to 60 s (longer waits
fall back to its own 0.5-8 s backoff), its waits use the real clock, it keeps no cache, and
it sends the key to any ``base_url``. Why not ``requests``: same per-read timeout.

Example (a local server)::

    be = OpenAICompatible("qwen", base_url="http://127.0.0.1:8000/v1", api_key_env="")
    be.generate(["Rate 1-5: ..."], ids=["dlg-17"])  # errors read "sample 'dlg-17': ..."
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from robusteval.errors import InputError, RobustevalError
from robusteval.llm import answers, policy
from robusteval.llm.cache import ResponseCache, request_key
from robusteval.llm.errors import LLMRequestError, where
from robusteval.llm.stats import CallStats
from robusteval.llm.transport import Transport, TransportError, post
from robusteval.paths import cache_dir

ON_ERROR = ("raise", "fallback")
DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAICompatible:
    """A ``/chat/completions`` endpoint with a deadline, honest retries and a disk cache.

    ``timeout``: total seconds per request (all tries, waits and reads together);
    ``attempt_timeout``: optional cap per try; ``max_retries``: tries after the first;
    ``backoff``/``max_backoff``: exponential waits (1, 2, 4 ... s, capped) unless the server
    sends ``Retry-After``; ``cache``: a folder, None (``$ROBUSTEVAL_CACHE/llm_cache``) or
    False; ``base_url``: default ``$OPENAI_BASE_URL`` or OpenAI for ``OPENAI_API_KEY``;
    ``api_key_env``: variable holding the key ('' sends none); ``allowed_hosts``: extra hosts
    that may receive it; ``max_concurrency``: requests in flight at once (1: one at a time);
    ``transport``, ``clock``, ``sleep``, ``wall_clock``: injectable for tests (called from
    the worker threads).
    """

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 timeout: float = 120.0, max_retries: int = 4, backoff: float = 1.0,
                 max_backoff: float = 30.0, attempt_timeout: float | None = None,
                 cache: str | os.PathLike[str] | bool | None = None,
                 allowed_hosts: Sequence[str] | None = None, transport: Transport | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 wall_clock: Callable[[], float] = time.time, max_concurrency: int = 8) -> None:
        if not timeout > 0 or max_retries < 0 or backoff < 0:
            raise ValueError("timeout must be > 0, max_retries and backoff >= 0")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        if isinstance(allowed_hosts, str):
            allowed_hosts = [h for h in allowed_hosts.split(",") if h.strip()]
        base_url = base_url or (policy.key_base_url(api_key_env) if api_key_env else None) or DEFAULT_BASE_URL
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.name = f"openai:{model}@{policy.redact(self.base_url)}"
        self.api_key_env = api_key_env
        key = os.environ.get(api_key_env, "") if api_key_env else ""
        if key:
            policy.check_key_destination(self.base_url, api_key_env, allowed_hosts)
        self._headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
        self.timeout = float(timeout)
        self.attempt_timeout = attempt_timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        if cache is False:
            self.cache = ResponseCache(None)
        else:
            self.cache = ResponseCache(cache_dir() / "llm_cache" if cache is None or cache is True else cache)
        self.transport: Transport = transport or post
        self.clock, self.sleep, self.wall_clock = clock, sleep, wall_clock
        self.max_concurrency = int(max_concurrency)
        self.stats = CallStats()
        self._lock = threading.Lock()  # guards stats and _not_before across worker threads
        self._not_before = -math.inf   # clock time the server asked us to wait for (Retry-After)

    # -- counters ---------------------------------------------------------------------
    @property
    def calls(self) -> int:
        return self.stats.calls

    @property
    def cache_hits(self) -> int:
        return self.stats.cache_hits

    def report(self) -> dict[str, Any]:
        """``backend`` plus the :class:`~robusteval.llm.stats.CallStats` counters."""
        return {"backend": self.name, **self.stats.as_dict()}

    # -- the public interface -----------------------------------------------------------
    def generate(self, prompts: Sequence[str], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 32, seed: int = 0, *, ids: Sequence[str] | None = None,
                 accept: Callable[[list[str]], bool] | None = None, on_error: str = "raise") -> list[list[str]]:
        """Up to ``n`` texts per prompt. ``ids`` name the samples in errors; an answer that
        ``accept`` rejects is returned but not cached; ``on_error="fallback"`` gives ``[]``
        for a failed prompt (counted in ``fallbacks``) instead of raising."""
        _check(prompts, ids, on_error)

        def one(i: int) -> list[str]:
            payload = {"model": self.model, "messages": [{"role": "user", "content": prompts[i]}],
                       "n": n, "temperature": temperature, "max_tokens": max_new_tokens, "seed": seed}
            return self._request(payload, lambda d: answers.chat_texts(d, n), where(i, len(prompts), ids), accept)

        return [[] if isinstance(r, LLMRequestError) else r for r in self._each(len(prompts), one, on_error)]

    def next_token_probs(self, prompts: Sequence[str], options: Sequence[str], *,
                         ids: Sequence[str] | None = None, on_error: str = "raise") -> np.ndarray:
        """P(option) as the first token, renormalized over ``options``; with
        ``on_error="fallback"`` a failed prompt's row is NaN (counted) instead of an error."""
        _check(prompts, ids, on_error)

        def one(i: int) -> Any:
            payload = {"model": self.model, "messages": [{"role": "user", "content": prompts[i]}],
                       "max_tokens": 1, "temperature": 0.0, "logprobs": True, "top_logprobs": 20}
            return self._request(payload, lambda d: answers.option_probs(d, options), where(i, len(prompts), ids), None)

        out = np.zeros((len(prompts), len(options)))
        for i, r in enumerate(self._each(len(prompts), one, on_error)):
            out[i] = np.nan if isinstance(r, LLMRequestError) else r
        return out

    # -- many requests ----------------------------------------------------------------------
    def _each(self, count: int, one: Callable[[int], Any], on_error: str) -> list[Any]:
        """``one(i)`` for every prompt index, up to ``max_concurrency`` at once, in input order;
        a failure is raised (the first in input order) or, in fallback mode, counted and
        returned as the :class:`LLMRequestError` in its slot."""
        def settle(fn: Callable[[], Any]) -> Any:
            try:
                return fn()
            except LLMRequestError as exc:
                if on_error == "raise":
                    raise
                self._count(fallbacks=1)
                return exc

        if count <= 1 or self.max_concurrency == 1:
            return [settle(lambda i=i: one(i)) for i in range(count)]
        pool = ThreadPoolExecutor(min(self.max_concurrency, count), thread_name_prefix="robusteval-llm")
        try:
            futures = [pool.submit(one, i) for i in range(count)]
            return [settle(f.result) for f in futures]
        finally:  # after a raise: cancel what was not sent, let what is in flight finish
            pool.shutdown(wait=True, cancel_futures=True)

    def _count(self, **deltas: float) -> None:
        with self._lock:
            for key, value in deltas.items():
                setattr(self.stats, key, getattr(self.stats, key) + value)

    # -- one request ----------------------------------------------------------------------
    def _request(self, payload: dict[str, Any], parse: Callable[[dict[str, Any]], Any],
                 at: tuple[str, str | None], accept: Callable[[Any], bool] | None) -> Any:
        key = request_key(self.base_url, payload)
        cached = self.cache.get(key)
        if cached is not None:
            try:
                result = parse(answers.check_object(cached))
                usable = accept is None or bool(accept(result))
            except answers.BadAnswer:
                usable = False
            if usable:
                self._count(cache_hits=1)
                return result
            self._count(cache_discarded=1)
            self.cache.drop(key)
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        url = f"{self.base_url}/chat/completions"
        deadline = self.clock() + self.timeout
        tries, last = 0, ""
        while True:
            left = deadline - self.clock()
            if left <= 0:
                raise self._fail(at, f"no answer within the {self.timeout:g} s deadline after "
                                 f"{policy.tries_text(tries)} ({last})", tries)
            held = self._not_before - self.clock()
            if held > 0:  # another request was told to wait: so is this one
                if self.clock() + held >= deadline:
                    raise self._fail(at, f"the server asked to wait {held:g} s more, past the {self.timeout:g} s "
                                     f"deadline; stopped after {policy.tries_text(tries)}"
                                     + (f" ({last})" if last else ""), tries)
                self.sleep(held)
                self._count(waited_s=held)
                left = deadline - self.clock()
            tries += 1
            self._count(calls=1, retries=int(tries > 1))
            wait: float | None = None
            try:
                resp = self.transport(url, body, self._headers, min(left, self.attempt_timeout or math.inf))
            except TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status == 200:
                    try:
                        data = answers.decode(resp.body)
                        result = parse(data)
                    except answers.BadAnswer as exc:
                        last = str(exc)
                        if not exc.retryable:
                            raise self._fail(at, f"{last} (after {policy.tries_text(tries)}; not retried, "
                                             "not cached)", tries, 200) from None
                    else:
                        if accept is None or accept(result):
                            self.cache.put(key, data)
                        else:
                            self._count(not_cached=1)
                        return result
                else:
                    last = f"HTTP {resp.status}: {answers.excerpt(resp.body)}"
                    if resp.status not in policy.RETRYABLE:
                        raise self._fail(at, f"{last} after {policy.tries_text(tries)} (HTTP {resp.status} "
                                         "is not retryable)", tries, resp.status)
                    wait = policy.server_wait(resp.header, self.wall_clock())
                    if wait is not None:
                        with self._lock:
                            self._not_before = max(self._not_before, self.clock() + wait)
            if tries > self.max_retries:
                raise self._fail(at, f"gave up after {policy.tries_text(tries)} ({last})", tries)
            pause = wait if wait is not None else policy.backoff_delay(tries, self.backoff, self.max_backoff)
            if self.clock() + pause >= deadline:
                why = f"Retry-After asks for {pause:g} s" if wait is not None else f"the next try is due in {pause:g} s"
                raise self._fail(at, f"{why}, past the {self.timeout:g} s deadline; stopped after "
                                 f"{policy.tries_text(tries)} ({last})", tries)
            self.sleep(pause)
            self._count(waited_s=pause)

    def _fail(self, at: tuple[str, str | None], detail: str, tries: int,
              status: int | None = None) -> LLMRequestError:
        err = LLMRequestError(at[0], self.name, detail, sample_id=at[1], tries=tries, status=status)
        with self._lock:
            self.stats.failures += 1
            self.stats.last_error = str(err)
        return err


def _check(prompts: Sequence[str], ids: Sequence[str] | None, on_error: str) -> None:
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, not {on_error!r}")
    if ids is not None and len(ids) != len(prompts):
        raise ValueError(f"{len(ids)} ids for {len(prompts)} prompts")
    for i, prompt in enumerate(prompts):
        try:
            prompt.encode("utf-8")
        except UnicodeEncodeError as exc:
            why = f"the prompt is not valid Unicode ({exc.reason} at character {exc.start})"
            if ids is not None:
                raise InputError(str(ids[i]), "prompt", why) from None
            raise RobustevalError(f"prompt {i + 1} of {len(prompts)}: {why}") from None
