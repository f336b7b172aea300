"""Loaders reject invalid Unicode and non-finite human scores with file, line and field
(issue 11, observation 7); text in any script, and valid escapes, load unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robusteval.data import load_file
from robusteval.data.base import read_json_records
from robusteval.data.fed import load_fed
from robusteval.data.summeval import load_summeval
from robusteval.data.unieval_json import QAGS, load_unieval_json
from robusteval.data.xdial import load_xdial_csv
from robusteval.errors import DataFormatError
from robusteval.types import HumanScale

ROWS = [
    {"id": "en", "response": "The committee approved the budget.", "reference": "Budget approved.", "overall": 4},
    {"id": "zh", "response": "委员会批准了预算。", "reference": "预算获批。", "overall": 3},
    {"id": "ar", "response": "وافقت اللجنة على الميزانية.", "reference": "تمت الموافقة.", "overall": 5},
    {"id": "hi", "response": "समिति ने बजट को मंज़ूरी दी। क्\u200dष", "reference": "बजट मंज़ूर।", "overall": 2},
    {"id": "ru", "response": "Комитет утвердил бюджет.", "reference": "Бюджет утверждён.", "overall": 1},
    {"id": "fr", "response": "Le comité a approuvé le budget.", "reference": "Budget approuvé.", "overall": 3.5},
    {"id": "fa", "response": "می\u200cخواهم بروم", "reference": "می‌روم", "overall": 4},
]
COLUMNS = {"id": "id", "response": "response", "reference": "reference"}


def write_jsonl(path: Path, rows: list[dict], raw_lines: dict[int, str] | None = None) -> Path:
    """JSONL with ``rows``; ``raw_lines`` replaces lines (1-based) with exact text."""
    lines = [json.dumps(r, ensure_ascii=True) for r in rows]
    for n, text in (raw_lines or {}).items():
        lines[n - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def load(path: Path):
    return load_file(path, columns=COLUMNS, human={"overall": "overall"}, scales={"overall": (1, 5)})


def test_text_in_every_script_and_valid_escapes_load_unchanged(tmp_path) -> None:
    raw = {8: '{"id": "emoji", "response": "ok \\ud83d\\ude00 \\\\ud800 literal", "reference": "r", "overall": 1}'}
    samples = load(write_jsonl(tmp_path / "a.jsonl", [*ROWS, {}], raw))
    assert [s.response for s in samples[:7]] == [r["response"] for r in ROWS]
    assert samples[7].response == "ok \U0001f600 \\ud800 literal"  # a pair, and an escaped backslash


@pytest.mark.parametrize(("field", "value"), [("response", "fine \\ud800 thanks"), ("reference", "\\udfff"),
                                                ("id", "x\\udbff")])
def test_lone_surrogate_in_jsonl_names_file_line_and_field(tmp_path, field: str, value: str) -> None:
    row = {**ROWS[0], field: "PLACEHOLDER"}
    raw = {3: json.dumps(row).replace("PLACEHOLDER", value)}
    path = write_jsonl(tmp_path / "bad.jsonl", ROWS, raw)
    with pytest.raises(DataFormatError) as err:
        load(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 3, field)
    assert "lone surrogate" in str(err.value) and f"{path}, line 3" in str(err.value)


def test_lone_surrogate_in_a_csv_references_cell(tmp_path) -> None:
    path = tmp_path / "refs.csv"
    path.write_text('response,refs\nfine,"[""ok""]"\nfine,"[""\\ud800""]"\n', encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        load_file(path, columns={"response": "response", "references": "refs"})
    assert (err.value.line, err.value.field) == (3, "refs") and "lone surrogate" in str(err.value)


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", "1e400", '"inf"', '"nan"', "true"])
def test_non_finite_human_score_in_jsonl_is_rejected_with_line(tmp_path, value: str) -> None:
    raw = {2: json.dumps({**ROWS[1], "overall": 0}).replace('"overall": 0', f'"overall": {value}')}
    path = write_jsonl(tmp_path / "h.jsonl", ROWS, raw)
    with pytest.raises(DataFormatError) as err:
        load(path)
    assert (err.value.line, err.value.field) == (2, "overall")


@pytest.mark.parametrize("value", ["inf", "-inf", "1e400", "nan", "NaN"])
def test_non_finite_rating_in_csv_is_rejected_with_line(tmp_path, value: str) -> None:
    path = tmp_path / "turn.csv"
    path.write_text(f"english_ctx,english_res,ratings\nhello,hi there,4\nhow are you,fine,{value}\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        load_xdial_csv(path, "t", "overall", HumanScale(1, 5))
    assert (err.value.line, err.value.field) == (3, "ratings")


def test_summeval_style_jsonl_rejects_1e400(tmp_path) -> None:
    rec = {"doc_id": "d", "system_id": "M1", "system_output": "A summary.", "source": "An article.",
           "reference": "A reference.", "scores": {"coherence": 3, "consistency": 4, "fluency": 5, "relevance": 2}}
    raw = {2: json.dumps(rec).replace('"fluency": 5', '"fluency": 1e400')}
    path = write_jsonl(tmp_path / "s.jsonl", [rec, rec], raw)
    with pytest.raises(DataFormatError) as err:
        load_summeval(path)
    assert (err.value.line, err.value.field) == (2, "scores.fluency")


def _json_list(path: Path, records: list[dict], patch: tuple[str, str] | None = None) -> Path:
    text = "[\n" + ",\n".join(json.dumps(r, indent=1) for r in records) + "\n]\n"
    if patch:
        text = text.replace(*patch)
    path.write_text(text, encoding="utf-8")
    return path


QAGS_REC = {"source": "An article about the budget.", "system_output": "The budget passed.", "scores": {"consistency": 1}}


def test_json_list_records_carry_their_real_line(tmp_path) -> None:
    path = _json_list(tmp_path / "q.json", [QAGS_REC, QAGS_REC, QAGS_REC])
    lines = [line for line, _ in read_json_records(path)]
    text = path.read_text().splitlines()
    assert [text[n - 1].strip() for n in lines] == ["{"] * 3 and lines[0] == 2


def test_lone_surrogate_in_a_json_list_names_the_record_line_and_field(tmp_path) -> None:
    recs = [QAGS_REC, {**QAGS_REC, "system_output": "BAD"}, QAGS_REC]
    path = _json_list(tmp_path / "q.json", recs, ('"BAD"', '"The \\ud800 budget"'))
    with pytest.raises(DataFormatError) as err:
        load_unieval_json(path, "qags", "fact", QAGS)
    start = [line for line, _ in read_json_records(_json_list(tmp_path / "ok.json", recs))][1]
    assert (err.value.line, err.value.field) == (start, "system_output")


@pytest.mark.parametrize("value", ["Infinity", "NaN", "1e400", "-1e999"])
def test_non_finite_score_in_a_json_list_is_rejected(tmp_path, value: str) -> None:
    recs = [QAGS_REC, {**QAGS_REC, "scores": {"consistency": 12345}}]
    path = _json_list(tmp_path / "q.json", recs, ("12345", value))
    with pytest.raises(DataFormatError) as err:
        load_unieval_json(path, "qags", "fact", QAGS)
    assert err.value.field == "scores.consistency" and err.value.line is not None and err.value.line > 5


def test_fed_rejects_infinite_annotation(tmp_path) -> None:
    ann = {a: [1, 1] for a in ("Interesting", "Engaging", "Specific", "Relevant", "Correct",
                               "Semantically appropriate", "Understandable", "Fluent", "Overall")}
    rec = {"context": "User: hi\nSystem: hello", "response": "System: how are you?", "annotations": ann}
    bad = {**rec, "annotations": {**ann, "Overall": [4, 99999]}}
    path = _json_list(tmp_path / "fed.json", [rec, bad], ("99999", "1e400"))
    with pytest.raises(DataFormatError) as err:
        load_fed(path, "turn")
    assert err.value.field == "annotations.Overall" and err.value.line is not None and err.value.line > 3


def test_json_list_syntax_errors_still_name_the_line(tmp_path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[\n{"a": 1},\n{"a": 2}\n{"a": 3}\n]\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="line 4"):
        read_json_records(path)
    path.write_text('{"not": "a list"}', encoding="utf-8")
    with pytest.raises(DataFormatError, match="expected a JSON list of objects"):
        read_json_records(path)
    path.write_text("[]", encoding="utf-8")
    assert read_json_records(path) == []


def test_generic_loader_rejects_non_text_fields(tmp_path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [ROWS[0], {**ROWS[1], "reference": 7}])
    with pytest.raises(DataFormatError) as err:
        load(path)
    assert (err.value.line, err.value.field) == (2, "reference") and "expected text, got int" in str(err.value)


def test_blank_response_loads_and_is_empty_text_when_scored(tmp_path) -> None:
    import numpy as np

    from robusteval.errors import InputError
    from robusteval.metrics.base import Metric

    class CountingMetric(Metric):
        def _score(self, samples):
            return np.full(len(samples), 50.0)

    samples = load(write_jsonl(tmp_path / "z.jsonl", [ROWS[0], {**ROWS[0], "id": "zw", "response": "\u200b\u2060"}]))
    with pytest.raises(InputError, match="sample 'zw', field 'response': empty or invisible-only"):
        CountingMetric().score(samples)
    m = CountingMetric(on_empty="floor")
    assert m.score(samples).tolist()[1] == 0.0 and m.report()["fallbacks"] == {"empty_response": 1}


def test_jsonl_lines_end_at_newline_only(tmp_path) -> None:
    """A JSON string may hold U+2028, U+2029 or U+0085 raw; they do not end a JSON Lines line
    (the fuzz benchmark found str.splitlines cutting such a record in two)."""
    rows = [{**ROWS[0], "response": "one\u2028two\u2029three\x85four"}, ROWS[1],
            {**ROWS[2], "overall": 0}]
    path = tmp_path / "ls.jsonl"
    text = "\r\n".join(json.dumps(r, ensure_ascii=False) for r in rows).replace('"overall": 0', '"overall": NaN')
    path.write_text(text + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        load(path)
    assert (err.value.line, err.value.field) == (3, "overall")
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows[:2]), encoding="utf-8")
    assert [s.response for s in load(path)] == [rows[0]["response"], ROWS[1]["response"]]
