"""The shared parse cache gives the same Docs whether a batch is split with a helper or not."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("spacy")

from robusteval.detectors import parsing

TEXTS = [
    "The committee approved the budget on Monday, said Anna Schmidt in Berlin.",
    "I don't think so. Let's meet at 5 p.m. instead?",
    "Le comité a approuvé le budget lundi.",
    "委员会周一批准了预算。",
    "وافقت اللجنة على الميزانية يوم الاثنين.",
    "समिति ने सोमवार को बजट को मंज़ूरी दी।",
    "Комитет утвердил бюджет в понедельник.",
    "   spaced   out\n\ntext  ",
]


def _annotations(doc: Any) -> list[tuple[Any, ...]]:
    """Every token annotation a detector may read, the whitespace, and the entities."""
    return [(t.text, t.whitespace_, t.norm_, t.lower_, t.tag_, t.pos_, str(t.morph), t.lemma_, t.dep_, t.head.i,
             t.ent_iob_, t.ent_type_, t.is_sent_start, t.is_alpha, t.is_stop, t.like_num) for t in doc] + [
        (e.start, e.end, e.label_) for e in doc.ents] + [(s.start, s.end) for s in doc.sents]


needs_helper = pytest.mark.skipif(not parsing.helper_available(),
                                  reason="no helper process here (not Linux, one core, or a daemonic process)")


@needs_helper
@pytest.mark.parametrize("ner", [False, True])
def test_helper_split_gives_the_same_docs(monkeypatch: pytest.MonkeyPatch, ner: bool) -> None:
    texts = [f"{t} ({i})" for i in range(12) for t in TEXTS]  # 96 distinct texts
    parsing.clear()
    monkeypatch.setattr(parsing, "PARALLEL_FROM", 10**9)
    here = [_annotations(d) for d in parsing.parse(texts, ner=ner)]
    parsing.clear()
    monkeypatch.setattr(parsing, "PARALLEL_FROM", 1)
    used: list[int] = []
    real = parsing._Helper.__init__
    monkeypatch.setattr(parsing._Helper, "__init__", lambda self, jobs, b: used.append(len(jobs[0][0])) or real(self, jobs, b))
    split = [_annotations(d) for d in parsing.parse(texts, ner=ner)]
    parsing.clear()
    assert used == [48]  # half the texts went to the helper
    assert split == here


def _fails(texts: list[str], ner: bool, batch_size: int) -> bytes:
    raise MemoryError("no room")


def _hangs(texts: list[str], ner: bool, batch_size: int) -> bytes:
    time.sleep(60)
    return b""


@needs_helper
@pytest.mark.parametrize("broken", [_fails, _hangs])
def test_a_failed_or_hung_helper_costs_only_time(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                                                 broken: Any) -> None:
    texts = [f"{t} ({i})" for i in range(4) for t in TEXTS]
    parsing.clear()
    monkeypatch.setattr(parsing, "PARALLEL_FROM", 10**9)
    here = [_annotations(d) for d in parsing.parse(texts)]
    parsing.clear()
    monkeypatch.setattr(parsing, "PARALLEL_FROM", 1)
    monkeypatch.setattr(parsing, "_parse_to_bytes", broken)  # the forked helper inherits it
    monkeypatch.setattr(parsing._Helper, "GRACE", 1.0)
    monkeypatch.setattr(parsing._Helper, "SETTLE", 0.5)
    monkeypatch.setattr(parsing._Helper, "SECONDS_PER_TEXT", 0.0)
    t = time.monotonic()
    with caplog.at_level("WARNING"):
        assert [_annotations(d) for d in parsing.parse(texts)] == here
    assert time.monotonic() - t < 30  # the hung helper was stopped at its deadline
    assert "spaCy helper process failed" in caplog.text
    parsing.clear()


def test_cache_serves_repeats_without_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    parsing.clear()
    first = parsing.parse(TEXTS[:3])
    monkeypatch.setattr(parsing, "_parse_split", lambda *a, **k: pytest.fail("parsed a cached text"))
    assert parsing.parse(TEXTS[:3] + TEXTS[:1]) == [*first, first[0]]
    parsing.clear()


def _summaries(n: int) -> list[Any]:
    from robusteval.types import Sample

    return [Sample(id=f"s{i}", task="summarization", response=f"The committee approved budget {i} on Monday.",
                   context=(f"Document {i}. The committee met on Monday and approved budget {i} after a vote.",),
                   reference=f"Budget {i} was approved by the committee on Monday.") for i in range(n)]


class _Waits:
    """A metric function; the test says its metric runs on a GPU (the CPU stays idle)."""

    def __call__(self, predictions: list[str], references: Any = None, sources: Any = None) -> list[float]:
        return [float(len(p) % 7) for p in predictions]


@needs_helper
def test_prefetch_parses_ahead_and_changes_no_number(monkeypatch: pytest.MonkeyPatch) -> None:
    from robusteval import detectors
    from robusteval.metrics.function import ensure_metric

    samples = _summaries(300)
    dets = ["parse_triple", {"name": "source_support"}, {"name": "gec", "options": {"backend": "builtin"}}]
    parsing.clear()
    plain = detectors.guard(_Waits(), dets, policy="penalize", prefetch=False)
    expected = plain.score(samples)
    rows = [plain.details(s) for s in samples]
    parsing.clear()
    metric = ensure_metric(_Waits())
    metric.device = "cuda:0"  # what the guard asks: does this metric leave the CPU idle?
    ahead = detectors.guard(metric, dets, policy="penalize")
    assert ahead.prefetch and not plain.prefetch
    real = parsing._parse_split
    calls: list[int] = []
    monkeypatch.setattr(parsing, "_parse_split", lambda texts, *a: calls.append(len(texts)) or real(texts, *a))
    assert list(ahead.score(samples)) == list(expected)
    assert [ahead.details(s) for s in samples] == rows
    assert calls == []  # every text the detectors parsed came from the helper
    parsing.clear()


def test_metric_on_cpu_gets_no_prefetch() -> None:
    from robusteval import detectors
    from robusteval.metrics.lexical import BLEU

    assert not BLEU().leaves_cpu_idle()
    assert not detectors.guard(BLEU(), ["nonalnum"]).prefetch


def test_config_guard_block_passes_prefetch() -> None:
    from robusteval.cli.common import load_metric
    from robusteval.config.common import GuardConfig

    on = load_metric("bleu", guard=GuardConfig(detectors=["nonalnum"], prefetch=True))
    auto = load_metric("bleu", guard=GuardConfig(detectors=["nonalnum"]))
    assert on.prefetch and not auto.prefetch
    assert "prefetch" not in GuardConfig(detectors=["nonalnum"], prefetch=True).as_block()  # not in fingerprints


@needs_helper
def test_prefetch_stops_its_helper_when_the_body_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parsing, "_parse_to_bytes", _hangs)  # a helper that would take a minute
    monkeypatch.setattr(parsing, "PARALLEL_FROM", 1)
    parsing.clear()
    t = time.monotonic()
    with pytest.raises(RuntimeError, match="metric failed"), parsing.prefetched([(x, False) for x in TEXTS] * 40) as n:
        assert n == len(TEXTS)  # distinct texts, all sent to the helper
        raise RuntimeError("metric failed")
    assert time.monotonic() - t < 30 and not parsing._CACHE
