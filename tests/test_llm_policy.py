"""Where an API key may go, Retry-After parsing and backoff (robusteval.llm.policy)."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from robusteval.errors import RobustevalError
from robusteval.llm import OpenAICompatible, policy
from robusteval.llm.transport import HttpResponse, is_loopback


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ROBUSTEVAL_LLM_ALLOWED_HOSTS", "TOGETHER_API_KEY",
                "TOGETHER_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


class Recorder:
    """A transport that records what would be sent and answers with a good completion."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, str]]] = []

    def __call__(self, url, body, headers, timeout):
        self.sent.append((url, dict(headers)))
        return HttpResponse(200, {}, b'{"choices": [{"message": {"content": "ok"}}]}')


@pytest.mark.parametrize(("value", "seconds"), [
    ("1", 1.0), ("1.5", 1.5), (" 2 ", 2.0), ("0", 0.0), ("-3", 0.0), ("", None), (None, None),
    ("soon", None), ("nan", None), ("inf", None),
    (formatdate(1_000_010, usegmt=True), 10.0), (formatdate(999_990, usegmt=True), 0.0),
])
def test_retry_after_forms(value, seconds) -> None:
    got = policy.retry_after(value, now=1_000_000.0)
    assert got == (pytest.approx(seconds) if seconds is not None else None)


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25), ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
    ({"retry-after": "9"}, 9.0), ({}, None),
])
def test_server_wait_prefers_milliseconds(headers, seconds) -> None:
    assert policy.server_wait(headers.get, now=0.0) == seconds


def test_backoff_doubles_and_is_capped() -> None:
    assert [policy.backoff_delay(k, 0.5, 3.0) for k in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.3.2.1", "::1", "[::1]", "api.localhost"])
def test_loopback(host) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["", None, "example.com", "10.0.0.1", "localhost.example.com", "0.0.0.0"])
def test_not_loopback(host) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize("url", [
    "https://api.openai.com/v1", "https://API.OpenAI.com:443/v1", "http://127.0.0.1:8000/v1", "http://localhost/v1",
])
def test_openai_key_goes_to_its_own_host_and_loopback(monkeypatch, url) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    rec = Recorder()
    OpenAICompatible("m", base_url=url, cache=False, transport=rec).generate(["hi"])
    assert rec.sent[0][1]["Authorization"] == "Bearer sk-1"


@pytest.mark.parametrize("url", [
    "https://evil.example/v1",
    "https://api.openai.com.evil.example/v1",      # suffix trick
    "https://api.openai.com@evil.example/v1",      # userinfo trick: the host is evil.example
    "https://evil.example/api.openai.com/v1",
    "http://10.0.0.5:8000/v1",
])
def test_openai_key_is_refused_elsewhere_before_anything_is_sent(monkeypatch, url) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    rec = Recorder()
    with pytest.raises(RobustevalError, match=r"refusing to send the API key from \$OPENAI_API_KEY to host") as info:
        OpenAICompatible("m", base_url=url, cache=False, transport=rec)
    msg = str(info.value)
    assert "allowed_hosts=" in msg and "ROBUSTEVAL_LLM_ALLOWED_HOSTS=" in msg and "OPENAI_BASE_URL" in msg
    assert "sk-1" not in msg and "api.openai.com@" not in msg and rec.sent == []


def test_keyless_backend_goes_anywhere(monkeypatch) -> None:
    rec = Recorder()
    OpenAICompatible("m", base_url="https://gpu-box.lan/v1", cache=False, transport=rec).generate(["hi"])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    OpenAICompatible("m", base_url="https://gpu-box.lan/v1", api_key_env="", cache=False,
                     transport=rec).generate(["hi"])
    assert [("Authorization" in h) for _, h in rec.sent] == [False, False]


def test_ways_to_allow_a_host(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    rec = Recorder()
    OpenAICompatible("m", base_url="https://gw.corp.example/v1", allowed_hosts=["gw.corp.example"],
                     cache=False, transport=rec).generate(["a"])
    OpenAICompatible("m", base_url="https://gw.corp.example/v1", allowed_hosts="x.example,gw.corp.example",
                     cache=False, transport=rec).generate(["a"])
    OpenAICompatible("m", base_url="https://gw.corp.example:8443/v1", allowed_hosts=["gw.corp.example:8443"],
                     cache=False, transport=rec).generate(["a"])
    with pytest.raises(RobustevalError, match=r"gw\.corp\.example"):  # a port pins the port
        OpenAICompatible("m", base_url="https://gw.corp.example:9999/v1", allowed_hosts=["gw.corp.example:8443"],
                         cache=False, transport=rec)
    monkeypatch.setenv("ROBUSTEVAL_LLM_ALLOWED_HOSTS", "a.example, gw.corp.example")
    OpenAICompatible("m", base_url="https://gw.corp.example/v1", cache=False, transport=rec).generate(["a"])
    monkeypatch.delenv("ROBUSTEVAL_LLM_ALLOWED_HOSTS")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gw.corp.example/v1")
    be = OpenAICompatible("m", cache=False, transport=rec)  # the key's own base URL is the default
    be.generate(["a"])
    assert be.base_url == "https://gw.corp.example/v1"
    with pytest.raises(RobustevalError, match=r"'api\.openai\.com'"):  # OpenAI is no longer the key's host
        OpenAICompatible("m", base_url="https://api.openai.com/v1", cache=False, transport=rec)
    assert [h["Authorization"] for _, h in rec.sent] == ["Bearer sk-1"] * 5


def test_other_providers_keys_follow_their_own_base_url(monkeypatch) -> None:
    monkeypatch.setenv("TOGETHER_API_KEY", "tg-1")
    with pytest.raises(RobustevalError, match=r"\$TOGETHER_API_KEY.*TOGETHER_BASE_URL"):
        OpenAICompatible("m", base_url="https://api.together.xyz/v1", api_key_env="TOGETHER_API_KEY", cache=False)
    monkeypatch.setenv("TOGETHER_BASE_URL", "https://api.together.xyz/v1")
    rec = Recorder()
    be = OpenAICompatible("m", api_key_env="TOGETHER_API_KEY", cache=False, transport=rec)
    be.generate(["a"])
    assert rec.sent[0][0] == "https://api.together.xyz/v1/chat/completions"
    assert rec.sent[0][1]["Authorization"] == "Bearer tg-1"


def test_names_and_messages_never_carry_userinfo() -> None:
    be = OpenAICompatible("m", base_url="http://user:pw@127.0.0.1:1/v1", cache=False, transport=Recorder())
    assert be.name == "openai:m@http://127.0.0.1:1/v1"
    assert policy.redact("https://a:b@h.example/v1") == "https://h.example/v1"
