"""benchmarks/fuzz.py: deterministic inputs, honest classification, and a clean run of the
cheap components (the full run is a benchmark: see its docstring)."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from robusteval import Sample
from robusteval.errors import DataFormatError, InputError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fuzz() -> ModuleType:
    spec = importlib.util.spec_from_file_location("robusteval_fuzz", ROOT / "benchmarks" / "fuzz.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["robusteval_fuzz"] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def test_inputs_are_deterministic_and_cover_every_kind(fuzz, tmp_path) -> None:
    a = fuzz.Generator(7, tmp_path / "a").cases(600)
    b = fuzz.Generator(7, tmp_path / "b").cases(600)
    assert [c.sample for c in a] == [c.sample for c in b] and [c.kind for c in a] == [c.kind for c in b]
    kinds = {c.kind for c in a}
    assert {"lone_surrogate", "invisible_only", "control_chars", "rtl", "combining", "emoji", "scripts", "markup",
            "injection", "long_response", "many_turns", "missing_reference", "unreadable"} <= kinds
    assert any(k.startswith("file_") for k in kinds) and len(a) == 600
    assert sum(len(c.sample.response) >= 100_000 for c in a if c.sample) <= 3  # a handful of huge texts
    assert all(c.invalid for c in a if c.kind == "lone_surrogate")
    assert not any(c.blank for c in a if c.kind == "zwj_words")  # ZWNJ / ZWJ inside words are text


def test_classification(fuzz) -> None:
    comp = fuzz.Component("metric:x", "cheap", high=100.0, requires_reference=True)
    ok = fuzz.Case("a", "plain", Sample(id="a", task="dialogue", response="hi", reference="hello"))
    bad = fuzz.Case("b", "lone_surrogate", Sample(id="b", task="dialogue", response="h\ud800", reference="r"))
    blank = fuzz.Case("c", "invisible_only", Sample(id="c", task="dialogue", response="\u200b", reference="r"))
    noref = fuzz.Case("d", "missing_reference", Sample(id="d", task="dialogue", response="hi"))
    assert fuzz.classify_value(comp, ok, 0.0, True) == "ok"
    assert fuzz.classify_value(comp, ok, float("nan"), True) == "nan_range"
    assert fuzz.classify_value(comp, ok, 100.5, True) == "nan_range"
    assert fuzz.classify_value(comp, bad, 0.0, True) == "silent_zero"
    assert fuzz.classify_value(comp, bad, 3.0, True) == "accepted_invalid"
    assert fuzz.classify_value(comp, blank, 0.0, True) == "fallback"
    assert fuzz.classify_value(comp, blank, 0.0, False) == "silent_zero"
    assert fuzz.classify_value(comp, noref, 0.0, False) == "silent_zero"
    judge = fuzz.Component("metric:judge", "lm", needs_source=("summarization",))
    blank_doc = fuzz.Case("e", "blank_context", Sample(id="e", task="summarization", response="ok",
                                                      context=("\u200b",)))
    assert fuzz.classify_value(judge, blank_doc, 50.0, True) == "accepted_invalid"
    assert fuzz.classify_value(judge, replace(blank_doc, sample=replace(blank_doc.sample, task="dialogue")),
                               50.0, True) == "ok"
    assert fuzz.classify_error(comp, bad, InputError("b", "response", "x")) == "clear_error"
    assert fuzz.classify_error(comp, bad, InputError("zz", "response", "x")) == "vague_error"
    assert fuzz.classify_error(comp, bad, DataFormatError("f.jsonl", "x", line=3)) == "clear_error"
    assert fuzz.classify_error(comp, bad, DataFormatError("f.jsonl", "x")) == "vague_error"
    assert fuzz.classify_error(comp, bad, UnicodeEncodeError("utf-8", "x", 0, 1, "no")) == "foreign"


def test_failing_batches_are_split_down_to_the_failing_input(fuzz) -> None:
    calls: list[int] = []

    def run(samples: list[Sample]) -> np.ndarray:
        calls.append(len(samples))
        if any(s.id == "c2" for s in samples):
            raise ValueError("boom")
        return np.full(len(samples), 50.0)

    comp = fuzz.Component("metric:y", "cheap", run=run)
    cases = [fuzz.Case(f"c{i}", "plain", Sample(id=f"c{i}", task="dialogue", response="ok")) for i in range(5)]
    got = fuzz.run_batch(comp, cases)
    assert [cat for _, cat, _ in got] == ["ok", "ok", "foreign", "ok", "ok"]
    assert "ValueError: boom" in got[2][2]


def test_cheap_components_run_clean(fuzz, tmp_path, capsys) -> None:
    out = tmp_path / "fuzz.json"
    components = ("metric:chrf,detector:nonalnum,detector:speaker_tag,detector:generic,detector:context_copy,"
                  "detector:judge_injection,guard:*,load:*")
    assert fuzz.main(["--n", "400", "--seed", "3", "--components", components, "--quiet", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "guard:reject(chrf)" in text and "0 component(s) with foreign exceptions" in text
    rows = json.loads(out.read_text())
    assert set(rows) >= {"metric:chrf", "detector:nonalnum", "guard:floor(chrf)", "load:jsonl", "load:csv",
                         "load:json_list"}
    for name, row in rows.items():
        counts = row["counts"]
        assert counts["n"] > 0 and not any(counts.get(k, 0) for k in fuzz.FAILURES), (name, counts)
        if not name.startswith("load:"):
            assert counts["clear_error"] > 0 and counts["fallback"] > 0, name  # surrogates, blanks
