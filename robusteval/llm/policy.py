"""Who may receive an API key, which answers are worth retrying, and how long to wait.

API keys: a key read from ``api_key_env`` is sent only to

* the host of the key's own base URL: ``<PREFIX>_BASE_URL`` for a ``<PREFIX>_API_KEY``
  variable (``OPENAI_BASE_URL``, default ``https://api.openai.com/v1``, for
  ``OPENAI_API_KEY``);
* hosts named in ``allowed_hosts=`` or in ``$ROBUSTEVAL_LLM_ALLOWED_HOSTS`` (comma-separated,
  ``host`` or ``host:port``);
* loopback (``localhost``, 127.0.0.0/8, ``::1``): local servers and tests.

Anything else is refused with an error that names the host and these three ways to allow it.
"""

from __future__ import annotations

import email.utils
import math
import os
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from robusteval.errors import RobustevalError
from robusteval.llm.transport import is_loopback

ALLOWED_HOSTS_ENV = "ROBUSTEVAL_LLM_ALLOWED_HOSTS"
DEFAULT_BASE_URLS = {"OPENAI_API_KEY": "https://api.openai.com/v1"}
# 408 timeout, 409 conflict, 425 too early, 429 rate limit, 5xx but "not implemented" and
# "version not supported": worth another try. Any other status fails at once.
RETRYABLE = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 507, 508, 509, 520, 521, 522, 523, 524, 529})


def redact(url: str) -> str:
    """``url`` without any ``user:password@`` part (safe for names and messages)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


def key_base_url(api_key_env: str) -> str | None:
    """The base URL a key variable belongs to: ``<PREFIX>_BASE_URL`` or a known default."""
    prefix = api_key_env[: -len("_API_KEY")] if api_key_env.endswith("_API_KEY") else None
    if prefix and os.environ.get(f"{prefix}_BASE_URL"):
        return os.environ[f"{prefix}_BASE_URL"]
    return DEFAULT_BASE_URLS.get(api_key_env)


def _host_port(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url if "://" in url else f"//{url}")
    try:
        port = parts.port
    except ValueError:
        port = None
    return (parts.hostname or "").lower(), port


def allowed_hosts(api_key_env: str, extra: Iterable[str] | None = None) -> list[str]:
    """The hosts (``host`` or ``host:port``) a key from ``api_key_env`` may go to, loopback aside."""
    names = [h.strip() for h in (extra or ())]
    names += [h.strip() for h in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",")]
    own = key_base_url(api_key_env)
    if own:
        names.append(_host_port(own)[0])
    return [n.lower() for n in names if n]


def check_key_destination(base_url: str, api_key_env: str, extra: Iterable[str] | None = None) -> None:
    """Raise :class:`RobustevalError` unless a key from ``api_key_env`` may go to ``base_url``."""
    host, port = _host_port(base_url)
    if is_loopback(host):
        return
    allowed = allowed_hosts(api_key_env, extra)
    if host in allowed or (port is not None and f"{host}:{port}" in allowed):
        return
    prefix = api_key_env[: -len("_API_KEY")] if api_key_env.endswith("_API_KEY") else None
    own = f"set {prefix}_BASE_URL to this URL, " if prefix else ""
    raise RobustevalError(
        f"refusing to send the API key from ${api_key_env} to host {host!r} ({redact(base_url)}): "
        f"that key may go only to {', '.join(allowed) or 'no host'} and loopback. To allow {host!r}, "
        f"{own}pass allowed_hosts=[{host!r}] (backend_options in a config), or set "
        f"{ALLOWED_HOSTS_ENV}={host}; to send no key, pass api_key_env=''")


def _seconds(value: str | None) -> float | None:
    """A non-negative number of seconds, or None when ``value`` is not a number."""
    try:
        seconds = float((value or "").strip())
    except ValueError:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP-date
    (relative to the wall-clock time ``now``); None when absent or unreadable."""
    if value is None or not value.strip():
        return None
    seconds = _seconds(value)
    if seconds is not None or value.strip().lower() in ("nan", "inf", "-inf", "infinity"):
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    return None if when is None else max(0.0, when.timestamp() - now)


def server_wait(header: Callable[[str], str | None], now: float) -> float | None:
    """The wait a 429/5xx answer asks for: OpenAI's ``retry-after-ms`` when it is a number,
    else ``Retry-After``; None when neither says."""
    ms = _seconds(header("retry-after-ms"))
    return ms / 1000 if ms is not None else retry_after(header("retry-after"), now)


def backoff_delay(failed_tries: int, base: float, cap: float) -> float:
    """Exponential backoff after ``failed_tries`` failures: base, 2*base, 4*base ... capped."""
    return min(cap, base * (2 ** max(0, failed_tries - 1)))


def tries_text(n: int) -> str:
    return f"{n} try" if n == 1 else f"{n} tries"
