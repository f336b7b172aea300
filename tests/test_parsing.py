"""The shared parse cache gives the same Docs whether a batch is split with a helper or not."""

from __future__ import annotations

import sys
from typing import Any

import pytest

pytest.importorskip("spacy")

from robusteval.detectors import parsing  # noqa: E402

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
    return [(t.text, t.tag_, t.pos_, str(t.morph), t.lemma_, t.dep_, t.head.i, t.ent_type_, t.is_sent_start)
            for t in doc]


@pytest.mark.parametrize("ner", [False, True])
def test_helper_split_gives_the_same_docs(monkeypatch: pytest.MonkeyPatch, ner: bool) -> None:
    texts = [f"{t} ({i})" for i in range(12) for t in TEXTS]  # 96 distinct texts
    parsing.clear()
    monkeypatch.setattr(parsing, "PARALLEL_FROM", 10**9)
    here = [_annotations(d) for d in parsing.parse(texts, ner=ner)]
    parsing.clear()
    monkeypatch.setattr(parsing, "PARALLEL_FROM", 1)
    used: list[bool] = []
    real = parsing._helper
    monkeypatch.setattr(parsing, "_helper", lambda: used.append(True) or real())
    split = [_annotations(d) for d in parsing.parse(texts, ner=ner)]
    parsing.clear()
    assert used == [True]
    assert split == here


@pytest.mark.skipif(sys.platform != "linux", reason="the helper is forked on Linux only")
def test_helper_is_forked_on_linux() -> None:
    pool = parsing._helper()
    assert pool is not None
    pool.shutdown()


def test_cache_serves_repeats_without_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    parsing.clear()
    first = parsing.parse(TEXTS[:3])
    monkeypatch.setattr(parsing, "_parse_split", lambda *a, **k: pytest.fail("parsed a cached text"))
    assert parsing.parse(TEXTS[:3] + TEXTS[:1]) == [*first, first[0]]
    parsing.clear()
