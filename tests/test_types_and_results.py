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


# -- what a resume checks (a fresh-eyes audit of resumes, 2026-11-28) -------------------------
def test_a_log_killed_while_writing_its_header_resumes_as_a_new_run(tmp_path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"_fingerprint": {"comm')  # torn before its newline: nothing was kept
    log = JsonlLog(path, resume=True, fingerprint={"command": "x"})
    log.append([{"id": "1"}])
    assert JsonlLog(path, resume=True, fingerprint={"command": "x"}).rows == {"1": {"id": "1"}}


def test_a_resume_after_the_facts_changed_is_another_run(tmp_path) -> None:
    """Every text a metric may read is in the samples' digest: the facts (``against: fact``),
    every reference, the answer, the declared language. The first digest hashed the response,
    context and first reference only, and a resume mixed scores of the two files."""
    from toy import LengthMetric

    from robusteval.errors import RunMismatchError
    from robusteval.results import samples_digest, score_with_log

    base = Sample(id="a", task="dialogue", response="hi", context=("c",), reference="r", fact="f")
    for changed in (Sample(id="a", task="dialogue", response="hi", context=("c",), reference="r", fact="g"),
                    Sample(id="a", task="dialogue", response="hi", context=("c",), reference="r", fact="f",
                           references=("r2",)),
                    Sample(id="a", task="dialogue", response="hi", context=("c",), reference="r", fact="f",
                           answer="x"),
                    Sample(id="a", task="dialogue", response="hi", context=("c",), reference="r", fact="f",
                           meta={"language": "fr"})):
        assert samples_digest([changed]) != samples_digest([base])
    rated = Sample(id="a", task="dialogue", response="hi", context=("c",), human={"overall": 4.0})
    rerated = Sample(id="a", task="dialogue", response="hi", context=("c",), human={"overall": 2.0})
    assert samples_digest([rated]) == samples_digest([rerated])  # scores do not read ratings ...
    assert samples_digest([rated], ratings=True) != samples_digest([rerated], ratings=True)  # training does
    score_with_log(LengthMetric(), [base], tmp_path / "s.jsonl", resume=False)
    edited = Sample(id="a", task="dialogue", response="hi", context=("c",), reference="r", fact="g")
    with pytest.raises(RunMismatchError, match="samples"):
        score_with_log(LengthMetric(), [edited], tmp_path / "s.jsonl", resume=True)


def test_the_empty_response_policy_is_part_of_a_metrics_identity() -> None:
    from robusteval import metrics

    default, floored = metrics.load("rougeL"), metrics.load("rougeL", on_empty="floor", empty_score=50.0)
    assert "on_empty" not in default.reproducibility()  # the default identity is unchanged
    assert "on_empty=floor,empty_score=50" in floored.reproducibility()
    assert metrics.load("rougeL", on_empty="floor").reproducibility() != floored.reproducibility()


def test_a_key_written_twice_is_read_once_with_its_later_row(tmp_path) -> None:
    """Two processes that resumed one folder at once both append a row: every reader keeps the
    key's first place and its later row, as JsonlLog does, so nothing is counted twice."""
    from robusteval.results import read_jsonl

    path = tmp_path / "scores.jsonl"
    path.write_text('{"id": "a", "score": 1}\n{"id": "b", "score": 2}\n{"id": "a", "score": 3}\n')
    assert read_jsonl(path) == [{"id": "a", "score": 3}, {"id": "b", "score": 2}]
    assert JsonlLog(path, resume=True).rows["a"] == {"id": "a", "score": 3}
    mixed = tmp_path / "mixed.jsonl"  # no field every row has: read as written
    mixed.write_text('{"id": "a"}\n{"x": 1}\n{"id": "a"}\n')
    assert len(read_jsonl(mixed)) == 3
