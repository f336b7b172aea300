from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import numpy as np
import pytest

from robusteval import Sample
from robusteval.errors import InputError, RobustevalError
from robusteval.llm.backends import OpenAICompatible
from robusteval.metrics.llm_judge import LLMJudge, parse_score

DLG = Sample(id="d1", task="dialogue", response="I am fine, thanks!", context=("Hi!", "How are you?"))
SUM = Sample(id="s1", task="summarization", response="A summary.", context=("An article.",))


class ScriptedBackend:
    """A deterministic stand-in LLM: returns scripted outputs / probabilities per call."""

    name = "scripted"

    def __init__(self, outputs: Sequence[Sequence[str]] = (), probs: Sequence[float] | None = None):
        self.outputs = [list(o) for o in outputs]
        self.probs = probs
        self.calls = 0
        self.cache_hits = 0
        self.prompts: list[str] = []
        self.seen: dict[str, float] = {}

    def generate(self, prompts, n=1, temperature=0.0, max_new_tokens=32, seed=0):
        self.calls += 1
        self.prompts += list(prompts)
        self.seen = {"n": n, "temperature": temperature, "seed": seed}
        return [self.outputs[i % len(self.outputs)][:n] for i in range(len(prompts))]

    def next_token_probs(self, prompts, options):
        self.calls += 1
        p = np.array(self.probs if self.probs is not None else [1.0] * len(options))
        return np.tile(p / p.sum(), (len(prompts), 1))


def test_parse_score_rules() -> None:
    assert parse_score("Score: 87", 0, 100) == 87
    assert parse_score("I'd say 150, no, 90.5", 0, 100) == 90.5
    assert parse_score("no number", 0, 100) is None
    assert parse_score("Content: 4\nGrammar: 5\nRelevance: 3", 1, 5, ("Content", "Grammar", "Relevance")) == 4.0
    assert parse_score("Content: 4\nGrammar: 9\nRelevance: 3", 1, 5, ("Content", "Grammar", "Relevance")) is None


def test_self_consistency_mean_and_scale_mapping() -> None:
    be = ScriptedBackend([["80", "60", "70", "90", "x", "50", "100", "30"]])
    judge = LLMJudge(backend=be, template="adveval-dialogue", n=8, seed=3)
    got = judge.score([DLG])[0]
    assert got == pytest.approx(np.mean([80, 60, 70, 90, 50, 100, 30]))
    assert be.seen == {"n": 8, "temperature": 1.0, "seed": 3}
    assert judge.report()["fallbacks"] == {"unparseable_outputs": 1}
    assert "Response (by B):" not in be.prompts[0] and "A: Hi!" in be.prompts[0]


def test_hu_analyze_rate_protocol() -> None:
    """Hu et al. 2024, App. C.2: "conduct analysis before rating scores of 1-5 and set
    temperature and sampling number to 1.0 and 10"; the sampled ratings are averaged."""
    outs = [f"The text is clear.\nRating: {r}" for r in (4, 5, 3, 4, 4, 5, 2, 4, 4, 5)]
    be = ScriptedBackend([["no rating here", *outs]])
    judge = LLMJudge(backend=be, template="hu-analyze-rate", aspect="Fluency")
    assert (judge.n, judge.temperature, judge.max_new_tokens) == (10, 1.0, 256)
    got = judge.score([SUM])[0]
    ratings = [4, 5, 3, 4, 4, 5, 2, 4, 4]  # the backend returns n = 10 outputs; one has no rating
    assert got == pytest.approx(100 * (np.mean(ratings) - 1) / 4)
    assert be.seen == {"n": 10, "temperature": 1.0, "seed": 0}
    assert judge.report()["fallbacks"] == {"unparseable_outputs": 1}
    assert "Analysis:" in be.prompts[0] and "Rating:" in be.prompts[0]
    assert judge.aspect == "Fluency"
    assert LLMJudge(backend=be, template="hu-analyze-rate", n=3, temperature=0.5).n == 3
    with pytest.raises(ValueError, match="at least 1"):
        LLMJudge(backend=be, template="hu-analyze-rate", n=0)


def test_probability_weighted_geval() -> None:
    be = ScriptedBackend(probs=[0.0, 0.0, 0.0, 0.5, 0.5])  # P(4)=P(5)=.5 -> 4.5 on 1-5
    judge = LLMJudge(backend=be, template="geval", aspect="Coherence", criteria_file=None)
    assert judge.score([DLG])[0] == pytest.approx(87.5)


def test_unparseable_is_counted_and_never_silent_zero() -> None:
    be = ScriptedBackend([["I cannot rate this."]], probs=[0, 0, 1, 0, 0])
    judge = LLMJudge(backend=be, template="geval", mode="parse")
    assert judge.score([DLG])[0] == pytest.approx(50.0)  # prob fallback: P(3) = 1
    assert judge.report()["fallbacks"]["unparseable"] == 1
    mid = LLMJudge(backend=ScriptedBackend([["??"]]), template="adveval-summary")
    assert mid.score([SUM])[0] == pytest.approx(50.0)
    assert mid.report()["fallbacks"]["unparseable"] == 1
    strict = LLMJudge(backend=ScriptedBackend([["??"]]), template="adveval-summary", on_unparseable="error")
    with pytest.raises(InputError, match="no parseable score"):
        strict.score([SUM])


def test_templates_and_criteria_file(tmp_path) -> None:
    crit = tmp_path / "aspect_criteria.json"
    crit.write_text(json.dumps({"Fluency": {"Gold": "Fluency: is the {T} fluent given the {S}?"}}))
    be = ScriptedBackend(probs=[1, 1, 1, 1, 1])
    judge = LLMJudge(backend=be, template="geval", aspect="Fluency", criteria_file=str(crit))
    assert "Fluency: is the summary fluent given the article?" in judge.prompt(SUM)
    with pytest.raises(ValueError, match="modes"):
        LLMJudge(backend=be, template="adveval-dialogue", mode="prob")
    with pytest.raises(ValueError, match="aspect 'Nope'"):
        LLMJudge(backend=be, template="geval", aspect="Nope", criteria_file=str(crit))


def test_geval_uses_shared_aspect_definitions(data_dir) -> None:
    judge = LLMJudge(backend=ScriptedBackend(probs=[1] * 5), template="geval", aspect="Fluency",
                     data_dir=str(data_dir))
    assert "grammatically correct, non-repetitive" in judge.prompt(DLG)


# ---- OpenAI-compatible backend against a local server -------------------------------

class _Handler(BaseHTTPRequestHandler):
    fail_first = 0
    requests: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        if type(self).fail_first > 0:
            type(self).fail_first -= 1
            self.send_response(503)
            self.end_headers()
            return
        if body.get("logprobs"):
            content = {"choices": [{"logprobs": {"content": [{"top_logprobs": [
                {"token": "4", "logprob": np.log(0.75)}, {"token": "5", "logprob": np.log(0.25)}]}]}}]}
        else:
            content = {"choices": [{"message": {"content": "Score: 72"}}] * body.get("n", 1)}
        data = json.dumps(content).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def server():
    srv = HTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.requests = []
    _Handler.fail_first = 0
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def test_openai_backend_retries_caches_and_scores(server, tmp_path) -> None:
    _Handler.fail_first = 2
    be = OpenAICompatible(model="m", base_url=server, backoff=0.01, cache=tmp_path)
    judge = LLMJudge(backend=be, template="adveval-dialogue", n=2)
    assert judge.score([DLG])[0] == pytest.approx(72.0)
    assert be.calls == 3 and len(_Handler.requests) == 3
    assert _Handler.requests[-1]["n"] == 2 and _Handler.requests[-1]["model"] == "m"
    judge.score([DLG])
    assert be.cache_hits == 1 and len(_Handler.requests) == 3  # served from the disk cache
    assert judge.report()["llm"]["retries"] == 2 and judge.report()["llm"]["cache_hits"] == 1
    probs = be.next_token_probs(["p"], ["1", "2", "3", "4", "5"])
    assert np.allclose(probs, [[0, 0, 0, 0.75, 0.25]])


def test_openai_backend_gives_up_after_bounded_retries(server, tmp_path) -> None:
    _Handler.fail_first = 10
    be = OpenAICompatible(model="m", base_url=server, backoff=0.0, max_retries=2, cache=tmp_path)
    with pytest.raises(RobustevalError, match=r"^prompt 1 of 1: LLM request failed: .*gave up after 3 tries \(HTTP 503"):
        be.generate(["hi"])
    assert len(_Handler.requests) == 3
    assert be.report()["retries"] == 2 and be.report()["failures"] == 1


def test_openai_backend_timeout_is_reported(tmp_path) -> None:
    be = OpenAICompatible(model="m", base_url="http://127.0.0.1:9/v1", timeout=0.5, max_retries=1,
                          backoff=0.0, cache=tmp_path)
    with pytest.raises(RobustevalError, match=r"ConnectionRefusedError|Timeout"):
        be.generate(["hi"])


@pytest.mark.slow
def test_local_smollm2_judge_runs_offline() -> None:
    judge = LLMJudge(template="geval", aspect="Overall_quality")
    out = judge.score([DLG, DLG.with_response("cucumber cucumber cucumber")])
    assert np.all((out >= 0) & (out <= 100)) and np.array_equal(out, judge.score([DLG, DLG.with_response("cucumber cucumber cucumber")]))
    gen = LLMJudge(template="adveval-dialogue", n=2, seed=1)
    a = gen.score([DLG])
    assert np.array_equal(a, LLMJudge(template="adveval-dialogue", n=2, seed=1).score([DLG]))


def test_spec_string_backends_are_shared(monkeypatch) -> None:
    from robusteval.llm import backends

    made = []
    monkeypatch.setattr(backends, "_SHARED", {})
    monkeypatch.setattr(backends, "load_backend", lambda spec=None, **kw: made.append(spec) or ScriptedBackend())
    a, b = backends.resolve_backend(None), backends.resolve_backend("local")
    assert a is b and made == [None]
    obj = ScriptedBackend()
    assert backends.resolve_backend(obj) is obj


def test_minimal_backends_work_and_are_reported() -> None:
    """A backend without ids/accept/on_error or report() still serves the judge."""
    from robusteval.llm import backend_report, call_with

    be = ScriptedBackend([["Score: 40"]])
    judge = LLMJudge(backend=be, template="adveval-dialogue")
    assert judge.score([DLG])[0] == pytest.approx(40.0)
    assert judge.report()["llm"] == {"backend": "scripted", "calls": 1, "cache_hits": 0}
    assert backend_report(be) == judge.report()["llm"]

    def flexible(prompts, **kw):
        return kw

    def strict(prompts, n=1):
        return n

    assert call_with(flexible, ["p"], optional={"ids": ["a"]}, n=2) == {"ids": ["a"], "n": 2}
    assert call_with(strict, ["p"], optional={"ids": ["a"], "on_error": "raise"}, n=3) == 3


def test_local_backend_samples_n_answers_per_prompt_in_one_call(tiny_lm) -> None:
    """All prompts and their n samples run as one batch, each sample seeded by (seed, prompt,
    sample index): reproducible, independent of the batch, different across seeds; greedy
    decoding repeats its one answer."""
    from robusteval.llm.backends import LocalCausalLM

    llm = LocalCausalLM(model=str(tiny_lm), batch_size=4)
    prompts = ["the cat sat on", "a dog ran to the", "hello"]
    a = llm.generate(prompts, n=5, temperature=1.0, max_new_tokens=6, seed=3)
    assert llm.calls == 1 and [len(x) for x in a] == [5, 5, 5]  # one batch: 3 prompts x 5 samples
    # a prompt's samples do not depend on the other prompts asked with it (nor on their order):
    # a gold cache shared across victims, a resumed run and a fresh one see the same ratings
    alone = [llm.generate([p], n=5, temperature=1.0, max_new_tokens=6, seed=3)[0] for p in prompts]
    assert alone == a
    assert llm.generate(prompts[::-1], n=5, temperature=1.0, max_new_tokens=6, seed=3) == a[::-1]
    assert llm.generate(prompts, n=5, temperature=1.0, max_new_tokens=6, seed=3) == a
    assert llm.generate(prompts, n=5, temperature=1.0, max_new_tokens=6, seed=4) != a
    assert len({t for x in a for t in x}) > 3  # sampled, not one answer repeated
    g = llm.generate(prompts, n=3, temperature=0.0, max_new_tokens=6)
    assert all(len(x) == 3 and len(set(x)) == 1 for x in g)


def test_a_judges_identity_holds_what_changes_its_prompt_or_output(tmp_path, tiny_lm) -> None:
    """A resumed score log continues only the same judge: the criterion's text (variant, file,
    data folder), the generation length, and a local backend's system prompt and prompt length
    are all part of it (they were not, and two judges writing different prompts shared one)."""
    from robusteval.llm.backends import LocalCausalLM, backend_identity

    crit = tmp_path / "aspect_criteria.json"
    crit.write_text(json.dumps({"Fluency": {"Gold": "Fluency: fluent?", "Short": "Is it fluent?"}}))
    be = ScriptedBackend(probs=[1, 1, 1, 1, 1])

    def judge(**kw) -> LLMJudge:
        return LLMJudge(backend=be, template="geval", aspect="Fluency", criteria_file=str(crit), **kw)

    gold, short = judge(), judge(criteria_variant="Short")
    assert gold.reproducibility() != short.reproducibility()
    assert judge(mode="parse", max_new_tokens=8).reproducibility() != \
        judge(mode="parse", max_new_tokens=16).reproducibility()
    assert gold.reproducibility() == judge().reproducibility()
    # a template that writes no criterion, and a judge that reads probabilities, do not depend
    # on what they never use (a resume with $ROBUSTEVAL_DATA exported is the same run)
    adveval = LLMJudge(backend=be, template="adveval-dialogue", aspect="Coherence")
    assert "criterion=" not in adveval.reproducibility() and "criterion=" in gold.reproducibility()
    assert "max_new" not in judge(mode="prob").reproducibility()
    assert "max_new=" in judge(mode="parse").reproducibility()
    plain = LocalCausalLM(str(tiny_lm))
    assert plain.prompt_settings == "" and backend_identity(plain) == plain.identity  # the default: weights only
    told = LocalCausalLM(str(tiny_lm), system="You are strict.", max_prompt_tokens=512)
    assert told.prompt_settings.startswith("system=") and "max_prompt_tokens=512" in told.prompt_settings
    assert backend_identity(told) != backend_identity(plain)


@pytest.mark.parametrize(("text", "fields"), [
    ("Rate {object} for {criterion}.", {"object", "criterion"}),
    ("Judge by {criterion!s:>4} and {aspect}", {"criterion", "aspect"}),  # a conversion and a spec
    ("{criterion.upper} {task_inputs[0]}", {"criterion", "task_inputs"}),
    ("literal {{criterion}} only", set()),
    ("no fields at all", set()),
])
def test_template_fields_finds_every_spelling_of_a_field(text: str, fields: set[str]) -> None:
    """The judge's identity holds the criterion's text when its template writes it in any
    spelling: a ``{criterion!s}`` template was read as writing none."""
    from robusteval.metrics.llm_judge import template_fields

    assert template_fields(text) == fields
