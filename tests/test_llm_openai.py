"""The OpenAI-compatible backend against a scripted local server (issue 11, obs. 9).

Each fault observed in the issue is reproduced here first: error-shaped 200s cached forever,
list bodies crashing, Retry-After ignored, per-read instead of total timeouts, "failed after
4 tries" after one try, errors without the sample, retries not reported, the API key sent to
any host. The server (:class:`FakeLLM`) runs on 127.0.0.1 in a thread; each request pops the
next :class:`Reply` from ``script`` (default: a good answer echoing the prompt) and is
recorded (path, headers, body); ``by_prompt`` scripts replies per prompt text instead, for
requests sent concurrently (their arrival order is not fixed), and ``max_in_flight`` records
how many requests the server was handling at once. Waits run on :class:`FakeTime`, so the
file takes seconds.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robusteval import Sample
from robusteval.errors import InputError, RobustevalError
from robusteval.llm import LLMRequestError, OpenAICompatible
from robusteval.llm.transport import post
from robusteval.metrics.llm_judge import LLMJudge


def good(content: str = "Score: 7", n: int = 1) -> dict[str, Any]:
    return {"choices": [{"index": i, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"} for i in range(n)]}


@dataclass
class Reply:
    status: int = 200
    body: Any = None          # JSON-able, or bytes sent as they are; None -> good answer
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0        # seconds before the status line
    drip: float = 0.0         # seconds between body bytes


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeLLM:
    """``with FakeLLM() as srv: srv.url`` -> ``http://127.0.0.1:PORT/v1``."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.by_prompt: dict[str, list[Reply]] = {}
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw.decode("utf-8"))
                prompt = body["messages"][0]["content"]
                with fake.lock:
                    fake.seen.append(Seen(self.path, dict(self.headers), body))
                    mine = fake.by_prompt.get(prompt)
                    reply = mine.pop(0) if mine else fake.script.pop(0) if fake.script else Reply()
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    self._answer(reply, body, prompt)
                finally:
                    with fake.lock:
                        fake.in_flight -= 1

            def _answer(self, reply: Reply, body: dict[str, Any], prompt: str) -> None:
                if reply.body is None:
                    reply.body = good(f"Score: 7 | {prompt}", body.get("n", 1))
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(
                    reply.body, ensure_ascii=False).encode("utf-8")
                time.sleep(reply.delay)
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                if reply.drip:
                    for b in data:
                        self.wfile.write(bytes([b]))
                        self.wfile.flush()
                        time.sleep(reply.drip)
                else:
                    self.wfile.write(data)

            def do_CONNECT(self) -> None:  # acting as an https proxy: record, refuse the tunnel
                with fake.lock:
                    fake.seen.append(Seen(f"CONNECT {self.path}", dict(self.headers), {}))
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up (deadline tests) is expected

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def auth(self) -> list[str | None]:
        return [s.headers.get("Authorization") for s in self.seen]


class FakeTime:
    """A clock that moves only when the backend sleeps (deadline/backoff tests take no time)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


# ---- fixtures ------------------------------------------------------------------------

pytestmark = pytest.mark.timeout(60)

SCRIPTS = {
    "english": "The committee approved the budget on Tuesday.",
    "chinese": "委员会周二批准了预算。",
    "arabic": "وافقت اللجنة على الميزانية يوم الثلاثاء.",
    "hindi": "समिति ने मंगलवार को बजट को मंज़ूरी दी।",
    "russian": "Комитет утвердил бюджет во вторник.",
    "french": "Le comité a approuvé le budget mardi, à l'unanimité.",
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ROBUSTEVAL_LLM_ALLOWED_HOSTS", "TEST_API_KEY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture()
def srv():
    with FakeLLM() as fake:
        yield fake


@pytest.fixture()
def ft() -> FakeTime:
    return FakeTime()


def backend(url: str, cache: Path | bool, ft: FakeTime | None = None, **kw: object) -> OpenAICompatible:
    opts: dict[str, object] = {"backoff": 0.5, "max_retries": 3, "timeout": 30.0, "api_key_env": ""}
    if ft is not None:
        opts.update(clock=ft.clock, sleep=ft.sleep)
    opts.update(kw)
    return OpenAICompatible(model="m", base_url=url, cache=cache, **opts)  # type: ignore[arg-type]


def cached_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


# ---- error-shaped and malformed 200s: never cached -----------------------------------

def test_error_in_a_200_is_retried_never_cached_and_a_rerun_gets_the_answer(srv, tmp_path, ft) -> None:
    err = Reply(body={"error": {"message": "model overloaded", "type": "server_error"}})
    srv.script = [err, Reply(body={"error": {"message": "model overloaded"}})]
    be = backend(srv.url, tmp_path, ft, max_retries=1)
    with pytest.raises(LLMRequestError, match=r"answered 200 with an error: model overloaded.*") as info:
        be.generate(["rate this"])
    assert "gave up after 2 tries" in str(info.value) and info.value.tries == 2
    assert cached_files(tmp_path) == [] and len(srv.seen) == 2 and ft.sleeps == [0.5]
    assert be.generate(["rate this"]) == [["Score: 7 | rate this"]]  # the rerun asks again
    assert be.generate(["rate this"]) == [["Score: 7 | rate this"]]  # now from the cache
    assert len(srv.seen) == 3 and len(cached_files(tmp_path)) == 1
    rep = be.report()
    assert {k: rep[k] for k in ("calls", "cache_hits", "retries", "failures", "fallbacks")} == {
        "calls": 3, "cache_hits": 1, "retries": 1, "failures": 1, "fallbacks": 0}
    assert "model overloaded" in rep["last_error"] and rep["waited_s"] == 0.5


@pytest.mark.parametrize(("body", "problem"), [
    ([1, 2], "a JSON list, not an object"),
    ([{"choices": [{"message": {"content": "5"}}]}], "a JSON list, not an object"),
    ("just a string", "a JSON string, not an object"),
    (b"<html>502 Bad Gateway</html>", "not JSON"),
    ({}, "no choices"),
    ({"choices": []}, "no choices"),
    ({"choices": [{"message": {"content": None}, "finish_reason": "content_filter"}]},
     "choice 0 has no text.*content_filter"),
    ({"choices": [{"message": {"role": "assistant", "tool_calls": []}}]}, "choice 0 has no text"),
    ({"choices": ["5"]}, "choice 0 has no text"),
    ({"object": "error", "message": "bad model"}, "answered 200 with an error: bad model"),
])
def test_malformed_200_is_a_clear_error_not_cached(srv, tmp_path, ft, body, problem) -> None:
    srv.script = [Reply(body=body)]
    be = backend(srv.url, tmp_path, ft, max_retries=0)
    with pytest.raises(LLMRequestError, match=problem):
        be.generate(["q"], ids=["s-1"])
    assert cached_files(tmp_path) == []
    assert be.report()["failures"] == 1
    assert be.generate(["q"]) == [["Score: 7 | q"]]  # nothing poisoned: the rerun asks again


def test_malformed_answer_fails_after_one_try_and_says_so(srv, tmp_path, ft) -> None:
    srv.script = [Reply(body=[1, 2])]
    be = backend(srv.url, tmp_path, ft, max_retries=4)
    with pytest.raises(LLMRequestError, match=r"after 1 try; not retried, not cached"):
        be.generate(["q"])
    assert len(srv.seen) == 1 and ft.sleeps == []


def test_poisoned_cache_entry_from_an_older_version_is_discarded(srv, tmp_path, ft) -> None:
    be = backend(srv.url, tmp_path, ft)
    be.generate(["q"])
    (entry,) = cached_files(tmp_path)
    entry.write_text(json.dumps({"error": {"message": "old poison"}}), encoding="utf-8")
    assert be.generate(["q"]) == [["Score: 7 | q"]]
    assert be.report()["cache_discarded"] == 1 and len(srv.seen) == 2
    assert json.loads(entry.read_text(encoding="utf-8"))["choices"]  # replaced by the answer
    entry.write_text("{not json", encoding="utf-8")
    assert be.generate(["q"]) == [["Score: 7 | q"]] and len(srv.seen) == 3


def test_missing_logprobs_is_an_error_and_not_cached(srv, tmp_path, ft) -> None:
    srv.script = [Reply(body=good("4"))]
    be = backend(srv.url, tmp_path, ft)
    with pytest.raises(LLMRequestError, match=r"sample 'x'.*no top_logprobs.*mode='parse'"):
        be.next_token_probs(["p"], ["1", "2"], ids=["x"])
    assert cached_files(tmp_path) == []
    top = [{"token": "4", "logprob": float(np.log(0.5))}, {"token": " 4", "logprob": float(np.log(0.25))},
           {"token": "5", "logprob": float(np.log(0.25))}]
    srv.script = [Reply(body={"choices": [{"logprobs": {"content": [{"top_logprobs": top}]}}]})]
    assert np.allclose(be.next_token_probs(["p"], ["4", "5"]), [[0.75, 0.25]])
    assert np.allclose(be.next_token_probs(["p"], ["4", "5"]), [[0.75, 0.25]])  # cached
    assert len(srv.seen) == 2 and be.cache_hits == 1


# ---- statuses, Retry-After and the deadline ------------------------------------------

@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_non_retryable_status_fails_at_once_with_an_honest_count(srv, tmp_path, ft, status) -> None:
    srv.script = [Reply(status=status, body={"error": {"message": "nope"}})]
    be = backend(srv.url, tmp_path, ft, max_retries=4)
    with pytest.raises(LLMRequestError, match=rf"HTTP {status}: .*nope.* after 1 try \(HTTP {status} is not retryable\)"):
        be.generate(["q"])
    assert len(srv.seen) == 1 and ft.sleeps == []
    rep = be.report()
    assert (rep["calls"], rep["retries"], rep["failures"]) == (1, 0, 1)


def test_redirect_is_not_followed_so_the_key_stays_home(srv, tmp_path, ft, monkeypatch) -> None:
    monkeypatch.setenv("TEST_API_KEY", "sk-local")
    with FakeLLM() as other:
        srv.script = [Reply(status=307, headers={"Location": other.url + "/chat/completions"})]
        be = backend(srv.url, tmp_path, ft, api_key_env="TEST_API_KEY")
        with pytest.raises(LLMRequestError, match=r"HTTP 307.*after 1 try"):
            be.generate(["q"])
        assert other.seen == [] and srv.auth() == ["Bearer sk-local"]


def test_retries_with_backoff_are_counted_and_reported(srv, tmp_path, ft) -> None:
    srv.script = [Reply(status=503), Reply(status=502), Reply(status=500)]
    be = backend(srv.url, tmp_path, ft, backoff=0.25, max_retries=3)
    assert be.generate(["q"]) == [["Score: 7 | q"]]
    assert ft.sleeps == [0.25, 0.5, 1.0]
    rep = be.report()
    assert {k: rep[k] for k in ("calls", "retries", "failures", "waited_s")} == {
        "calls": 4, "retries": 3, "failures": 0, "waited_s": 1.75}


def test_bounded_retries_then_an_honest_message(srv, tmp_path, ft) -> None:
    srv.script = [Reply(status=503, body={"error": "busy"}) for _ in range(3)]
    be = backend(srv.url, tmp_path, ft, max_retries=2)
    with pytest.raises(LLMRequestError, match=r"gave up after 3 tries \(HTTP 503: .*busy"):
        be.generate(["q"])
    assert len(srv.seen) == 3 and be.report()["retries"] == 2


@pytest.mark.parametrize("value", ["2", "1.5", " 3 "])
def test_retry_after_seconds_is_honoured(srv, tmp_path, ft, value) -> None:
    srv.script = [Reply(status=429, headers={"Retry-After": value})]
    be = backend(srv.url, tmp_path, ft, backoff=0.01)
    assert be.generate(["q"]) == [["Score: 7 | q"]]
    assert ft.sleeps == [float(value)] and be.report()["retries"] == 1


def test_retry_after_http_date_is_honoured(srv, tmp_path, ft) -> None:
    now = 1_750_000_000.0
    srv.script = [Reply(status=503, headers={"Retry-After": formatdate(now + 4, usegmt=True)})]
    be = backend(srv.url, tmp_path, ft, backoff=0.01, wall_clock=lambda: now)
    be.generate(["q"])
    assert ft.sleeps == [pytest.approx(4.0)]


def test_retry_after_past_the_deadline_fails_at_once(srv, tmp_path, ft) -> None:
    srv.script = [Reply(status=429, headers={"Retry-After": "120"})]
    be = backend(srv.url, tmp_path, ft, timeout=10.0)
    with pytest.raises(LLMRequestError, match=r"Retry-After asks for 120 s, past the 10 s deadline; stopped after 1 try"):
        be.generate(["q"], ids=["late"])
    assert ft.sleeps == [] and len(srv.seen) == 1


def test_deadline_is_total_across_retries(srv, tmp_path, ft) -> None:
    srv.script = [Reply(status=503) for _ in range(10)]
    be = backend(srv.url, tmp_path, ft, backoff=1.0, max_retries=10, timeout=5.0)
    with pytest.raises(LLMRequestError, match=r"next try is due in 4 s, past the 5 s deadline; stopped after 3 tries"):
        be.generate(["q"])
    assert ft.sleeps == [1.0, 2.0] and len(srv.seen) == 3


def test_deadline_holds_against_a_server_that_trickles_bytes(srv, tmp_path) -> None:
    srv.script = [Reply(drip=0.05)]  # ~60 bytes at 20/s: 3 s, each read well inside any read timeout
    be = backend(srv.url, tmp_path, timeout=0.6, max_retries=0)
    t0 = time.monotonic()
    with pytest.raises(LLMRequestError, match=r"no complete answer within 0\.6"):
        be.generate(["q"])
    assert time.monotonic() - t0 < 2.0


def test_deadline_holds_against_a_server_that_never_answers(srv, tmp_path) -> None:
    srv.script = [Reply(delay=3.0) for _ in range(6)]
    be = backend(srv.url, tmp_path, timeout=0.8, attempt_timeout=0.3, backoff=0.05, max_retries=5)
    t0 = time.monotonic()
    with pytest.raises(LLMRequestError, match=r"deadline|no complete answer"):
        be.generate(["q"])
    assert time.monotonic() - t0 < 2.0 and be.report()["retries"] >= 1


def test_connection_refused_is_retried_and_named(tmp_path, ft) -> None:
    be = backend("http://127.0.0.1:9/v1", tmp_path, ft, max_retries=1)
    with pytest.raises(LLMRequestError, match=r"gave up after 2 tries \(TransportError: ConnectionRefusedError"):
        be.generate(["q"])


# ---- errors name the sample ----------------------------------------------------------

def test_errors_name_the_sample_or_the_prompt_position(srv, tmp_path, ft) -> None:
    be = backend(srv.url, tmp_path, ft)
    srv.by_prompt = {"b": [Reply(status=400, body={"error": {"message": "context too long"}})]}
    with pytest.raises(LLMRequestError) as info:
        be.generate(["a", "b"], ids=["ok-1", "样本-二"])
    assert str(info.value).startswith("sample '样本-二': LLM request failed: openai:m@http://127.0.0.1:")
    assert info.value.sample_id == "样本-二" and info.value.status == 400
    srv.script = [Reply(status=404)]
    with pytest.raises(LLMRequestError, match=r"^prompt 2 of 2: LLM request failed"):
        be.generate(["a", "c"])  # "a" comes from the cache
    with pytest.raises(ValueError, match="1 ids for 2 prompts"):
        be.generate(["a", "c"], ids=["x"])


def test_fallback_mode_counts_instead_of_raising(srv, tmp_path, ft) -> None:
    srv.by_prompt = {"a": [Reply(status=400)], "b": [Reply(status=400)]}
    be = backend(srv.url, tmp_path, ft)
    assert be.generate(["a", "b", "c"], ids=["1", "2", "3"], on_error="fallback") == [
        [], [], ["Score: 7 | c"]]
    probs = be.next_token_probs(["d"], ["1"], on_error="fallback")  # answer has no logprobs
    assert np.isnan(probs).all()
    rep = be.report()
    assert (rep["failures"], rep["fallbacks"]) == (3, 3) and "sample" not in rep["last_error"]


def test_judge_names_the_sample_and_reports_backend_counters(srv, tmp_path, ft) -> None:
    smp = Sample(id="dlg-7", task="dialogue", response="Fine, thanks.", context=("How are you?",))
    srv.script = [Reply(status=503), Reply(status=400, body={"error": {"message": "bad request"}})]
    be = backend(srv.url, tmp_path, ft)
    judge = LLMJudge(backend=be, template="adveval-dialogue")
    with pytest.raises(LLMRequestError, match=r"^sample 'dlg-7': LLM request failed: .*HTTP 400.*after 2 tries"):
        judge.score([smp])
    lenient = LLMJudge(backend=be, template="adveval-dialogue", on_llm_error="midpoint")
    srv.script = [Reply(status=400)]
    assert lenient.score([smp])[0] == pytest.approx(50.0)
    rep = lenient.report()
    assert rep["fallbacks"] == {"llm_failed": 1}
    assert {k: rep["llm"][k] for k in ("calls", "retries", "failures", "fallbacks")} == {
        "calls": 3, "retries": 1, "failures": 2, "fallbacks": 1}
    assert "llm_error=midpoint" in lenient.reproducibility() and "llm_error" not in judge.reproducibility()


def test_judge_unparseable_output_is_counted_and_not_cached(srv, tmp_path, ft) -> None:
    smp = Sample(id="s9", task="dialogue", response="Sure.", context=("Help?",))
    srv.script = [Reply(body=good("I cannot rate this."))]
    be = backend(srv.url, tmp_path, ft)
    judge = LLMJudge(backend=be, template="adveval-dialogue")
    assert judge.score([smp])[0] == pytest.approx(50.0)  # midpoint, counted
    assert judge.report()["fallbacks"] == {"unparseable_outputs": 1, "unparseable": 1}
    assert judge.report()["llm"]["not_cached"] == 1 and cached_files(tmp_path) == []
    srv.script = [Reply(body=good("Score: 80"))]
    assert judge.score([smp])[0] == pytest.approx(80.0)  # asked again, not served the bad text
    assert judge.score([smp])[0] == pytest.approx(80.0) and be.cache_hits == 1 and len(srv.seen) == 2
    strict = LLMJudge(backend=backend(srv.url, tmp_path / "b", ft), template="adveval-dialogue",
                      on_unparseable="error")
    srv.script = [Reply(body=good("no idea"))]
    with pytest.raises(InputError, match=r"sample 's9', field 'response'.*no parseable score"):
        strict.score([smp])


def test_judge_prob_mode_failure_is_named_or_counted(srv, tmp_path, ft) -> None:
    smp = Sample(id="p1", task="dialogue", response="Yes.", context=("Ok?",))
    be = backend(srv.url, tmp_path, ft)
    with pytest.raises(LLMRequestError, match=r"^sample 'p1'.*no top_logprobs"):
        LLMJudge(backend=be, template="geval", mode="prob").score([smp])
    lenient = LLMJudge(backend=be, template="geval", mode="prob", on_llm_error="midpoint")
    assert lenient.score([smp])[0] == pytest.approx(50.0)
    assert lenient.report()["fallbacks"] == {"llm_failed": 1}


# ---- where the API key may go --------------------------------------------------------

def test_key_goes_to_loopback_and_none_is_sent_without_one(srv, tmp_path, ft, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    backend(srv.url, tmp_path, ft, api_key_env="OPENAI_API_KEY").generate(["q"])
    backend(srv.url, tmp_path / "2", ft, api_key_env="").generate(["q"])
    assert srv.auth() == ["Bearer sk-test", None]


def test_key_never_reaches_a_host_it_is_not_allowed_to(srv, tmp_path, ft, monkeypatch) -> None:
    """A non-loopback host reached through a local proxy: the proxy records what would leave."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    proxied = functools.partial(post, proxies={"http": srv.url.rsplit("/", 1)[0]})
    with pytest.raises(RobustevalError, match=r"refusing to send the API key from \$OPENAI_API_KEY to host "
                       r"'llm\.internal'.*api\.openai\.com.*allowed_hosts=\['llm\.internal'\].*"
                       r"ROBUSTEVAL_LLM_ALLOWED_HOSTS=llm\.internal") as info:
        backend("http://llm.internal/v1", tmp_path, ft, api_key_env="OPENAI_API_KEY", transport=proxied)
    assert "sk-secret" not in str(info.value) and srv.seen == []
    be = backend("http://llm.internal/v1", tmp_path, ft, api_key_env="OPENAI_API_KEY", transport=proxied,
                 allowed_hosts=["llm.internal"])
    assert be.generate(["q"]) == [["Score: 7 | q"]]
    assert srv.seen[0].path == "http://llm.internal/v1/chat/completions"
    assert srv.auth() == ["Bearer sk-secret"]
    monkeypatch.setenv("ROBUSTEVAL_LLM_ALLOWED_HOSTS", "other.example, llm.internal")
    backend("http://llm.internal/v1", tmp_path / "2", ft, api_key_env="OPENAI_API_KEY",
            transport=proxied).generate(["q"])
    assert srv.auth() == ["Bearer sk-secret"] * 2


def test_https_goes_through_a_proxy_tunnel_that_never_sees_the_key(srv, tmp_path, ft, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    proxied = functools.partial(post, proxies={"https": srv.url.rsplit("/", 1)[0]})
    be = backend("https://api.openai.com/v1", tmp_path, ft, api_key_env="OPENAI_API_KEY", transport=proxied,
                 max_retries=0)
    with pytest.raises(LLMRequestError, match=r"TransportError: .*Tunnel connection failed: 403"):
        be.generate(["q"])
    assert [s.path for s in srv.seen] == ["CONNECT api.openai.com:443"] and srv.auth() == [None]


# ---- text in several scripts ---------------------------------------------------------

def test_prompts_in_several_scripts_round_trip_and_key_the_cache(srv, tmp_path, ft) -> None:
    be = backend(srv.url, tmp_path, ft)
    prompts = list(SCRIPTS.values())
    got = be.generate(prompts, ids=list(SCRIPTS))
    assert got == [[f"Score: 7 | {p}"] for p in prompts]
    # sent concurrently: each text arrives once, in whatever order (answers keep input order)
    assert sorted(s.body["messages"][0]["content"] for s in srv.seen) == sorted(prompts)
    files = cached_files(tmp_path)
    assert len(files) == len(prompts)  # one key per text
    stored = " ".join(f.read_text(encoding="utf-8") for f in files)
    assert all(p in stored for p in prompts)  # readable UTF-8, not escapes
    assert be.generate(prompts) == got and be.cache_hits == len(prompts) and len(srv.seen) == len(prompts)
    assert be.generate([SCRIPTS["french"].replace("é", "e\u0301")])  # another text, another key
    assert len(srv.seen) == len(prompts) + 1


def test_judge_prompts_carry_every_script(srv, tmp_path, ft) -> None:
    samples = [Sample(id=f"{name}-1", task="summarization", response=text, context=(text + " " + text,))
               for name, text in SCRIPTS.items()]
    srv.script = [Reply(body=good("Score: 64")) for _ in samples]
    judge = LLMJudge(backend=backend(srv.url, tmp_path, ft), template="adveval-summary")
    assert np.allclose(judge.score(samples), 64.0)
    sent = [seen.body["messages"][0]["content"] for seen in srv.seen]  # in arrival order
    assert len(sent) == len(samples)
    for smp in samples:
        assert sum(f"Summary:\n{smp.response}" in text for text in sent) == 1
    srv.script = [Reply(status=400)]
    with pytest.raises(LLMRequestError, match=r"^sample 'chinese-2'"):
        judge.score([Sample(id="chinese-2", task="summarization", response=SCRIPTS["chinese"] + "。",
                            context=(SCRIPTS["chinese"],))])


def test_invalid_unicode_prompt_is_an_input_error_naming_the_sample(srv, tmp_path, ft) -> None:
    be = backend(srv.url, tmp_path, ft)
    with pytest.raises(InputError, match=r"sample 'bad', field 'prompt': the prompt is not valid Unicode"):
        be.generate(["ok", "x \ud800 y"], ids=["good", "bad"])
    assert srv.seen == []


# ---- concurrency (issue 16) ----------------------------------------------------------

def test_requests_overlap_and_answers_keep_input_order(srv, tmp_path) -> None:
    prompts = [f"p{i}" for i in range(8)]
    srv.by_prompt = {p: [Reply(delay=0.3)] for p in prompts}
    be = backend(srv.url, tmp_path / "a", max_concurrency=4)
    assert be.generate(prompts) == [[f"Score: 7 | {p}"] for p in prompts]
    assert 1 < srv.max_in_flight <= 4 and be.report()["calls"] == 8
    srv.by_prompt = {p: [Reply(delay=0.05)] for p in prompts}
    # a handler counts itself out only after its answer is sent: let the first batch's last ones finish
    # (on a loaded machine one was still counted when the next batch began: max_in_flight 2)
    deadline = time.monotonic() + 10
    while srv.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    srv.max_in_flight = 0
    one = backend(srv.url, tmp_path / "b", max_concurrency=1)
    assert one.generate(prompts) == [[f"Score: 7 | {p}"] for p in prompts]
    assert srv.max_in_flight == 1
    with pytest.raises(ValueError, match="max_concurrency"):
        backend(srv.url, tmp_path, max_concurrency=0)


def test_concurrent_failures_name_the_first_failing_sample_in_input_order(srv, tmp_path) -> None:
    prompts = [f"p{i}" for i in range(6)]
    ids = [f"id-{i}" for i in range(6)]
    # p1 fails last in time, p4 first: the error still names p1, the first in input order
    srv.by_prompt = {"p1": [Reply(status=400, delay=0.4)], "p4": [Reply(status=400)],
                     **{p: [Reply(delay=0.1)] for p in ("p0", "p2", "p3", "p5")}}
    be = backend(srv.url, tmp_path, max_concurrency=6)
    with pytest.raises(LLMRequestError, match=r"^sample 'id-1': .*HTTP 400") as info:
        be.generate(prompts, ids=ids)
    assert info.value.sample_id == "id-1"
    srv.by_prompt = {"p1": [Reply(status=400)], "p4": [Reply(status=400)]}
    got = be.generate(prompts, ids=ids, on_error="fallback")  # the rest come from the cache
    assert got == [[] if p in ("p1", "p4") else [f"Score: 7 | {p}"] for p in prompts]
    rep = be.report()
    assert rep["fallbacks"] == 2 and rep["failures"] == 4 and rep["cache_hits"] == 4


def test_retry_after_pauses_every_thread_not_only_the_one_told(tmp_path) -> None:
    """A 429 with Retry-After on one request holds back the others' next tries too."""
    from robusteval.llm.transport import HttpResponse

    starts: list[tuple[float, str]] = []
    lock = threading.Lock()
    told: list[float] = []

    def transport(url, body, headers, timeout):
        prompt = json.loads(body)["messages"][0]["content"]
        with lock:
            starts.append((time.monotonic(), prompt))
            first = prompt == "a" and not told
            if first:
                told.append(time.monotonic())
        if first:
            return HttpResponse(429, {"retry-after-ms": "700"}, b"{}")
        time.sleep(0.05)
        return HttpResponse(200, {}, json.dumps(good(f"ok {prompt}")).encode())

    prompts = ["a", *[f"q{i}" for i in range(20)]]
    be = OpenAICompatible(model="m", base_url="http://127.0.0.1:1/v1", api_key_env="", cache=tmp_path,
                          transport=transport, max_concurrency=2, timeout=30.0)
    assert be.generate(prompts) == [[f"ok {p}"] for p in prompts]
    t429 = told[0]
    # the other thread sends nothing between (soon after) the 429 and the server's time
    assert [p for t, p in starts if t429 + 0.25 < t < t429 + 0.65] == []
    assert be.report()["waited_s"] >= 0.7 + 0.3  # its own wait plus the other thread's hold
    assert be.report()["retries"] == 1
