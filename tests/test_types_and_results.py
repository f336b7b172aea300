from __future__ import annotations

import json

import pytest

from robusteval import Sample
from robusteval.errors import DataFormatError
from robusteval.registry import Registry
from robusteval.results import JsonlLog


def test_sample_roundtrip_and_helpers() -> None:
    s = Sample(id="a", task="summarization", response="r", context=("doc",), reference="x",
               references=("y", "x"), human={"coherence": 3.0})
    assert s.all_references() == ("x", "y")
    assert Sample.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    t = s.with_response("new", attack="dot")
    assert t.response == "new" and t.meta["attack"] == "dot" and s.response == "r"


def test_registry_suggests_close_names() -> None:
    reg: Registry[int] = Registry("metric")
    reg.register("rougeL")(lambda: 1)
    with pytest.raises(KeyError, match="did you mean rougeL"):
        reg.get("rougel")
    with pytest.raises(ValueError, match="twice"):
        reg.register("rougeL")(lambda: 2)


def test_jsonl_log_resumes_without_loss_or_duplicates(tmp_path) -> None:
    path = tmp_path / "rows.jsonl"
    log = JsonlLog(path)
    log.append([{"id": "1", "score": 1.0}, {"id": "2", "score": 2.0}])
    with open(path, "a") as fh:  # a write torn by a kill
        fh.write('{"id": "3", "sco')
    with pytest.raises(FileExistsError, match="--resume"):
        JsonlLog(path)
    log2 = JsonlLog(path, resume=True)
    assert sorted(log2.rows) == ["1", "2"]
    log2.append([{"id": "2", "score": 9.0}, {"id": "3", "score": 3.0}])
    lines = path.read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["1", "2", "3"]
    assert json.loads(lines[1])["score"] == 2.0


def test_jsonl_log_corrupt_middle_line_names_line(tmp_path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "1"}\nnot json\n{"id": "3"}\n')
    with pytest.raises(DataFormatError, match="line 2"):
        JsonlLog(path, resume=True)


def test_score_log_refuses_repeated_ids_naming_the_first_repeat(tmp_path) -> None:
    from toy import LengthMetric

    from robusteval.errors import RobustevalError
    from robusteval.results import score_with_log

    samples = [Sample(id=i, task="dialogue", response=text) for i, text in
               [("x", "hello"), ("y", "你好"), ("z", "привет"), ("z", "bonjour"), ("y", "नमस्ते")]]
    with pytest.raises(RobustevalError, match=r"first repeated id: 'z', at positions \[2, 3\]"):
        score_with_log(LengthMetric(), samples, tmp_path / "s.jsonl", resume=False)
    assert not (tmp_path / "s.jsonl").exists()  # refused before the log is opened


def test_a_run_names_the_commit_it_started_with_even_when_the_checkout_moves_on(monkeypatch) -> None:
    """The fingerprint (at a run's start) and the report's provenance (at its end) read the same
    HEAD: a compare run whose checkout got a new commit while it ran named the later one."""
    import subprocess
    from types import SimpleNamespace

    from robusteval import results

    heads = iter(["a" * 40 + "\n", "b" * 40 + "\n"])
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: SimpleNamespace(returncode=0, stdout=next(heads)))
    results.git_commit.cache_clear()
    try:
        start = results.run_fingerprint(command="x")["code"]["git_commit"]
        assert results.provenance()["git_commit"] == start == "a" * 40
    finally:
        results.git_commit.cache_clear()


def test_reading_a_torn_log_says_what_it_skipped(tmp_path) -> None:
    """A reader (guard evaluate, compare's report) skips a torn last line, and says so."""
    from robusteval.results import read_jsonl

    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "1"}\n{"id": "2"}\n{"id": "3", "sco', encoding="utf-8")
    with pytest.warns(UserWarning, match=r"rows\.jsonl: line 3 is incomplete .*: skipped, 2 complete rows read"):
        assert [r["id"] for r in read_jsonl(path)] == ["1", "2"]
