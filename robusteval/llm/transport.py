"""One HTTP POST with a hard total deadline, on the standard library.

``requests`` (and httpx, under the ``openai`` SDK) bound each socket operation, not a whole
request: a server that trickles a byte per second keeps a "60 s timeout" request alive for
hours. Here a watchdog timer shuts the socket down when the deadline passes, whatever phase
the request is in (sending, waiting for headers, reading the body), so a call never outlives
its ``timeout``. Redirects are not followed (an API key never travels to another host).

Proxies from the environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``) are honoured,
except for loopback hosts; ``https`` goes through a ``CONNECT`` tunnel. Name resolution is
the one step the watchdog cannot cut short.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import ipaddress
import socket
import threading
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

MAX_BODY = 32 * 2**20


@dataclass(frozen=True)
class HttpResponse:
    """Status, headers (names lower-cased) and the raw body of one answer."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class TransportError(Exception):
    """No HTTP answer at all: refused, reset, unreachable, too large."""


class TransportTimeout(TransportError):
    """No complete answer before the deadline."""


class Transport(Protocol):
    def __call__(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> HttpResponse: ...


def is_loopback(host: str | None) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _proxy_for(scheme: str, host: str, proxies: Mapping[str, str] | None) -> str | None:
    if is_loopback(host):
        return None
    table = dict(proxies) if proxies is not None else urllib.request.getproxies()
    url = table.get(scheme)
    if not url or urllib.request.proxy_bypass_environment(host, table if "no" in table else None):
        return None
    return url


def _connection(parts: SplitResult, timeout: float, proxies: Mapping[str, str] | None
                ) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
    """The connection to open, the request target and any proxy headers."""
    https = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if https else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    proxy = _proxy_for(parts.scheme, host, proxies)
    if proxy is None:
        cls = http.client.HTTPSConnection if https else http.client.HTTPConnection
        return cls(host, port, timeout=timeout), target, {}
    p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    auth = {}
    if p.username:
        token = f"{unquote(p.username)}:{unquote(p.password or '')}".encode()
        auth["Proxy-Authorization"] = "Basic " + base64.b64encode(token).decode()
    if https:
        conn = http.client.HTTPSConnection(p.hostname or "", p.port or 80, timeout=timeout)
        conn.set_tunnel(host, port, headers=auth)
        return conn, target, {}
    conn = http.client.HTTPConnection(p.hostname or "", p.port or 80, timeout=timeout)
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return conn, urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")), auth


def post(url: str, body: bytes, headers: Mapping[str, str], timeout: float,
         proxies: Mapping[str, str] | None = None) -> HttpResponse:
    """POST ``body`` to ``url``; the whole exchange ends within ``timeout`` seconds.

    Raises :class:`TransportTimeout` when the deadline passes and :class:`TransportError`
    when no answer comes back; any HTTP status is returned, not raised.
    """
    if timeout <= 0:
        raise TransportTimeout("no time left before the deadline")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TransportError(f"not an http(s) URL: {url!r}")
    conn, target, extra = _connection(parts, timeout, proxies)
    expired = threading.Event()
    opened: list[socket.socket] = []  # the connection lets go of its socket once the answer
    # starts if the server closes after it ("Connection: close"), so keep our own reference

    def expire() -> None:
        expired.set()
        sock = opened[0] if opened else conn.sock
        if sock is not None:  # wakes a blocked send/recv in the calling thread
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        if conn.sock is not None:
            opened.append(conn.sock)
        conn.request("POST", target, body=body, headers={**headers, **extra})
        resp = conn.getresponse()
        data = resp.read(MAX_BODY + 1)
        status, names = resp.status, {k.lower(): v for k, v in resp.getheaders()}
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set() or isinstance(exc, TimeoutError):
            raise TransportTimeout(f"no complete answer within {timeout:.3g} s") from None
        raise TransportError(f"{type(exc).__name__}: {exc}") from None
    finally:
        timer.cancel()
        conn.close()
    if expired.is_set():
        raise TransportTimeout(f"no complete answer within {timeout:.3g} s")
    if len(data) > MAX_BODY:
        raise TransportError(f"answer larger than {MAX_BODY // 2**20} MiB")
    return HttpResponse(status, names, data)
