"""Bad input found by a CLI audit (2026-11-27): each case ends in a clear error naming the
file, sample, option or key (exit 2), or a counted outcome -- never a traceback, an empty
table with exit 0, or a row counted against the victim."""

from __future__ import annotations

import json

import pytest
import yaml

from robusteval import attacks, data, detectors, metrics
from robusteval.cli.main import main
from robusteval.config.compare import SuiteSpec
from robusteval.config.parsing import ConfigError
from robusteval.errors import DataFormatError, RobustevalError
from robusteval.registry import accepted_options, build

# one row per script the project promises to read (en, zh, ar, hi, ru, fr)
ROWS = [
    {"id": "en", "context": "How was the film?", "response": "the film was great", "reference": "a great film",
     "rating": 4},
    {"id": "zh", "context": "电影怎么样？", "response": "电影很好看", "reference": "很好看的电影", "rating": 5},
    {"id": "ar", "context": "كيف كان الفيلم؟", "response": "كان الفيلم رائعا", "reference": "فيلم رائع", "rating": 3},
    {"id": "hi", "context": "फ़िल्म कैसी थी?", "response": "फ़िल्म बहुत अच्छी थी", "reference": "अच्छी फ़िल्म",
     "rating": 2},
    {"id": "ru", "context": "Как фильм?", "response": "Фильм был отличный", "reference": "отличный фильм", "rating": 4},
    {"id": "fr", "context": "C'était comment ?", "response": "Le film était génial", "reference": "un film génial",
     "rating": 1},
]


def _jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


# -- options a factory does not take, or values it rejects ----------------------------------
def test_an_unknown_option_is_named_with_the_ones_the_factory_takes() -> None:
    with pytest.raises(RobustevalError, match=r"metric 'bleu': unknown option 'empty_scor' \(did you mean "
                                              r"'empty_score'\?\); it takes tokenize, max_ngram_order, against, "
                                              r"on_empty, empty_score"):
        metrics.load("bleu", empty_scor=1)
    with pytest.raises(RobustevalError, match=r"detector 'nonalnum': unknown option 'bogus'"):
        detectors.load("nonalnum", bogus=1)
    with pytest.raises(RobustevalError, match=r"attack 'repeat-words': unknown option 'q'"):
        attacks.load("repeat-words", q=0.5)


def test_the_errors_stay_the_builtin_types_the_constructors_raised() -> None:
    """Code that caught a constructor's ValueError or TypeError still catches it."""
    with pytest.raises(TypeError):
        metrics.load("bleu", bogus=1)
    with pytest.raises(ValueError):
        metrics.load("bleu", max_ngram_order=5)
    with pytest.raises(ValueError):
        attacks.load("repeat-words", p=2.0)


def test_a_rejected_value_names_the_factory_and_the_options_given() -> None:
    with pytest.raises(RobustevalError, match=r"metric 'bleu' with tokenize='nonexistent': "
                                              r"tokenize must be 'auto' or one of sacrebleu's .*13a"):
        metrics.load("bleu", tokenize="nonexistent")
    with pytest.raises(RobustevalError, match=r"metric 'chrf' with word_order='two': invalid literal"):
        metrics.load("chrf", word_order="two")


def test_accepted_options_follows_kwargs_up_the_mro_and_stays_open_when_it_cannot_know() -> None:
    class Base:
        def __init__(self, a: int = 0) -> None:
            self.a = a

    class Child(Base):
        def __init__(self, b: int = 0, **kwargs: object) -> None:
            super().__init__(**kwargs)  # type: ignore[arg-type]
            self.b = b

    def open_ended(**kwargs: object) -> dict[str, object]:
        return kwargs

    class Swallow(Base):  # keeps its own **kwargs (as a function metric does for its function)
        def __init__(self, **kwargs: object) -> None:
            super().__init__()
            self.kwargs = kwargs

    assert build(Swallow, {"threshold": 3}, "x").kwargs == {"threshold": 3}  # Python decides, not a guess

    class Inner:  # passes an option it takes on to a call that refuses it
        def __init__(self, tokenize: str = "x") -> None:
            dict(a=1).get(tokenize=tokenize)  # type: ignore[call-overload]

    with pytest.raises(TypeError) as err:
        build(Inner, {"tokenize": "y"}, "metric 'm'")
    assert "unknown option" not in str(err.value) and "metric 'm' with tokenize='y'" in str(err.value)

    class Lookup:
        def __init__(self, table: str = "a") -> None:
            self.value = {"a": 1}[table]

    with pytest.raises(KeyError) as key_err:  # still the KeyError it was, for code that caught it
        build(Lookup, {"table": "b"}, "metric 'm'")
    assert str(key_err.value) == "metric 'm' with table='b': no such choice 'b'"
    assert accepted_options(Child) == ["b", "a"]
    assert accepted_options(open_ended) is None
    assert build(open_ended, {"anything": 1}, "x") == {"anything": 1}  # nothing refused that might be taken
    assert build(Child, {"a": 2}, "x").a == 2
    with pytest.raises(RobustevalError, match=r"x: unknown option 'c'; it takes b, a"):
        build(Child, {"c": 1}, "x")


def test_the_cli_reports_a_bad_metric_option_in_one_line(tmp_path, capsys) -> None:
    path = _jsonl(tmp_path / "d.jsonl", ROWS)
    assert main(["score", "--metric", "bleu", "--dataset", path, "-o", "bogus=1",
                 "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "robusteval score: error: metric 'bleu': unknown option 'bogus'" in err and "Traceback" not in err


# -- empty data ------------------------------------------------------------------------------
def test_empty_files_and_headers_without_rows_are_refused(tmp_path) -> None:
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"empty\.jsonl: no lines: the data is empty"):
        data.load(str(tmp_path / "empty.jsonl"))
    (tmp_path / "header.csv").write_text("id,context,response,reference\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"header\.csv: no lines after the header \(id, context, response, "
                                              r"reference\): the data has no samples"):
        data.load(str(tmp_path / "header.csv"))
    # a header without rows still has its columns checked, as one with rows would
    (tmp_path / "wrong.csv").write_text("foo,bar\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"wrong\.csv: no response column: the data has foo, bar"):
        data.load(str(tmp_path / "wrong.csv"))
    # one JSON line saved as .csv: a header of JSON, no response column
    (tmp_path / "json.csv").write_text(json.dumps(ROWS[0]) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"json\.csv: no response column"):
        data.load(str(tmp_path / "json.csv"))


def test_a_negative_limit_is_refused(tmp_path) -> None:
    path = _jsonl(tmp_path / "d.jsonl", ROWS)
    assert len(data.load(path, limit=2)) == 2 and len(data.load(path, limit=0)) == 0
    import numpy as np

    assert len(data.load(path, limit=np.int64(3))) == 3
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(RobustevalError, match=r"limit must be a whole number >= 0"):
            data.load(path, limit=bad)  # type: ignore[arg-type]


def test_compare_split_fractions_and_limits_are_checked() -> None:
    def suite(**kw: object) -> SuiteSpec:
        return SuiteSpec(name="s", dataset="quickstart-dialogue", attacks=["all"], victims=["rougeL"], **kw)

    suite(split={"val_fraction": 0.0, "test_fraction": 1.0}).validate("suites[0]")  # every context tested
    for split in ({"val_fraction": 0.1, "test_fraction": 1.5}, {"val_fraction": 0.6, "test_fraction": 0.6},
                  {"val_fraction": -0.1}):
        with pytest.raises(ConfigError, match=r"suites\[0\]\.split: val_fraction and test_fraction are shares"):
            suite(split=split).validate("suites[0]")
    with pytest.raises(ConfigError, match=r"suites\[0\]\.limit must be at least 1 test context, got 0"):
        suite(limit=0).validate("suites[0]")


# -- metaeval --------------------------------------------------------------------------------
def test_metaeval_refuses_data_without_ratings_or_the_asked_aspect(tmp_path, capsys) -> None:
    unrated = _jsonl(tmp_path / "unrated.jsonl", [{k: v for k, v in r.items() if k != "rating"} for r in ROWS])
    assert main(["metaeval", "--metric", "chrf", "--dataset", unrated, "--out-dir", str(tmp_path / "m1")]) == 2
    assert "unrated.jsonl: no sample has a human rating" in capsys.readouterr().err
    assert not (tmp_path / "m1").exists()  # refused before the output folder is made
    rated = _jsonl(tmp_path / "rated.jsonl", ROWS)
    assert main(["metaeval", "--metric", "chrf", "--dataset", rated, "--aspects", "fluency",
                 "--out-dir", str(tmp_path / "m2")]) == 2
    assert "no sample is rated for aspect(s) fluency; the data has rating" in capsys.readouterr().err


def test_metaeval_counts_samples_without_the_rating(tmp_path) -> None:
    rows = [dict(r) for r in ROWS]
    del rows[2]["rating"]
    path = _jsonl(tmp_path / "d.jsonl", rows)
    assert main(["metaeval", "--metric", "chrf", "--dataset", path, "--out-dir", str(tmp_path / "m")]) == 0
    entry = json.loads((tmp_path / "m" / "metaeval.json").read_text())["results"][path]["chrf"]["rating"]
    assert (entry["n"], entry["unrated"]) == (5, 1)
    assert "Samples without the rating, so not correlated: rating: 1 of 6" in (tmp_path / "m" / "metaeval.md").read_text()
    # metrics with different limits see different counts: each count names its metrics
    cfg = tmp_path / "two.yaml"
    cfg.write_text(yaml.safe_dump({"metrics": [{"name": "chrf"}, {"name": "chrf", "label": "chrf-first-4", "limit": 4}],
                                   "datasets": [{"name": path}]}), encoding="utf-8")
    assert main(["metaeval", "--config", str(cfg), "--out-dir", str(tmp_path / "m2")]) == 0
    assert ("Samples without the rating, so not correlated: rating: 1 of 4 (chrf-first-4); rating: 1 of 6 (chrf)"
            in (tmp_path / "m2" / "metaeval.md").read_text())


def test_metaeval_that_measured_nothing_exits_2(tmp_path, capsys) -> None:
    rows = [dict(r) for r in ROWS]
    rows[1]["response"] = "\u200b"  # invisible-only: the metric refuses the set, so nothing is correlated
    path = _jsonl(tmp_path / "d.jsonl", rows)
    assert main(["metaeval", "--metric", "chrf", "--dataset", path, "--out-dir", str(tmp_path / "m")]) == 2
    captured = capsys.readouterr()
    assert "skipped chrf" in captured.out and "sample 'zh'" in captured.out
    assert "no metric could score any dataset" in captured.err
    assert (tmp_path / "m" / "metaeval.md").exists()  # the reasons are kept


# -- guard calibrate --------------------------------------------------------------------------
def test_calibrate_refuses_empty_clean_sets_and_blank_clean_texts(tmp_path, capsys) -> None:
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    assert main(["guard", "calibrate", "--detectors", "nonalnum", "--clean", str(tmp_path / "empty.jsonl"),
                 "--out-dir", str(tmp_path / "g1")]) == 2
    assert "empty.jsonl: no lines" in capsys.readouterr().err
    assert not (tmp_path / "g1" / "thresholds.json").exists()
    rows = [{**r, "id": f"{r['id']}{i}", "context": f"{r['context']} {i}"} for i in range(4) for r in ROWS]
    rows[3]["response"], rows[8]["response"] = "", "\u200b\u200b"
    path = _jsonl(tmp_path / "mixed.jsonl", rows)
    assert main(["guard", "calibrate", "--detectors", "nonalnum", "--clean", path,
                 "--out-dir", str(tmp_path / "g2")]) == 2
    err = capsys.readouterr().err
    assert f"clean set {path}: 2 of 24 responses are empty or invisible-only ('hi0', 'ar1')" in err
    assert not (tmp_path / "g2" / "thresholds.json").exists()


# -- attack ----------------------------------------------------------------------------------
def test_an_empty_original_scored_by_the_fallback_is_skipped_not_counted(tmp_path) -> None:
    rows = [dict(r) for r in ROWS]
    rows[1]["response"] = ""
    path = _jsonl(tmp_path / "d.jsonl", rows)
    out = tmp_path / "a"
    assert main(["attack", "--metric", "rougeL", "--dataset", path, "--attacks", "generic-hello",
                 "-o", "on_empty=floor", "--out-dir", str(out)]) == 0
    from robusteval.attacks.runner import read_results

    blank = next(r for r in read_results(out)[0] if r.sample_id == "zh")
    assert blank.outcome == "skipped" and "on_empty fallback" in blank.note
    summary = json.loads((out / "summary.json").read_text())["attacks"]["generic-hello"]
    assert (summary["attacked"], summary["skipped"], summary["n"]) == (5, 1, 6)


# -- command lines and config files -----------------------------------------------------------
def test_a_config_that_is_not_yaml_names_the_file_and_line(tmp_path, capsys) -> None:
    bad = tmp_path / "score.yaml"
    bad.write_text("metric: rougeL\ndataset: [d.jsonl\n", encoding="utf-8")
    assert main(["score", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"config {bad}: not valid YAML, line 3, column 1: expected ',' or ']'" in err


def test_the_underscore_spelling_of_a_list_flag_takes_one_value_too(tmp_path) -> None:
    """--attack_results DIR was refused ("expected list") while --attack-results DIR worked."""
    from robusteval.cli.main import parse

    for flag in ("--attack-results", "--attack_results"):
        _, cfg = parse(["guard", "evaluate", "--detectors", "nonalnum", "--clean", "quickstart-references",
                        flag, "runs/a", flag, "runs/b", "--out-dir", "o"])
        assert cfg.attack_results == ["runs/a", "runs/b"]
    _, cfg = parse(["guard", "evaluate", "--detectors", "nonalnum", "--clean", "quickstart-references",
                    "--attack_results", '["runs/a", "runs/c"]', "--out-dir", "o"])
    assert cfg.attack_results == ["runs/a", "runs/c"]  # a list as a whole still reads as one
    # a whole list sets the list, single values add to it (the flag used to be rewritten twice)
    cfg_file = tmp_path / "g.yaml"
    cfg_file.write_text("attack_results: [runs/z]\n", encoding="utf-8")
    for argv, expected in [
        (["--attack_results", '["runs/a"]', "--attack-results", "runs/b"], ["runs/a", "runs/b"]),
        (["--attack-results", "runs/a", '--attack_results=["runs/b"]'], ["runs/b"]),
        # after --config, as the help says: flags after it override it
        (["--attack-results", "runs/a", "--config", str(cfg_file), "--attack-results", "runs/b"], ["runs/a", "runs/b"]),
    ]:
        _, cfg = parse(["guard", "evaluate", "--detectors", "nonalnum", "--clean", "quickstart-references",
                        *argv, "--out-dir", "o"])
        assert cfg.attack_results == expected, argv
    with pytest.raises(ConfigError, match="give at least one --attack-results"):  # [] empties the list
        parse(["guard", "evaluate", "--detectors", "nonalnum", "--clean", "quickstart-references",
               "--attack-results", "runs/a", "--attack_results", "[]", "--out-dir", "o"])


def test_metaeval_checks_each_metrics_datasets_and_limits(tmp_path) -> None:
    from robusteval.config.metaeval import MetaDataset, MetaevalConfig, MetaMetric

    def cfg(**metric: object) -> MetaevalConfig:
        return MetaevalConfig(metrics=[MetaMetric(name="chrf", **metric)], datasets=[MetaDataset(name="d.jsonl")],
                              out_dir=str(tmp_path))

    with pytest.raises(ConfigError, match=r"metric chrf: datasets \['other.jsonl'\] are not among"):
        cfg(datasets=["other.jsonl"]).validate()
    with pytest.raises(ConfigError, match=r"metric chrf: limit must be at least 1, got -2"):
        cfg(limit=-2).validate()


def test_a_blank_original_behind_a_guard_is_skipped_without_running_the_attacks(tmp_path) -> None:
    rows = [dict(r) for r in ROWS]
    rows[4]["response"] = " \u200b "
    path = _jsonl(tmp_path / "d.jsonl", rows)
    out = tmp_path / "a"
    assert main(["attack", "--metric", "rougeL", "-o", "on_empty=floor", "--guard", "nonalnum",
                 "--dataset", path, "--attacks", "repeat-words,generic-hello", "--out-dir", str(out)]) == 0
    from robusteval.attacks.runner import BLANK_ORIGINAL, read_results

    blank = [r for r in read_results(out)[0] if r.sample_id == "ru"]
    assert len(blank) == 2 and all(r.outcome == "skipped" and r.note == BLANK_ORIGINAL for r in blank)
    assert all(r.adversarial is None and r.model_calls == 0 for r in blank)


def test_a_folder_skips_an_empty_shard_and_refuses_an_empty_split(tmp_path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    _jsonl(folder / "test-00000-of-00002.jsonl", ROWS)
    (folder / "test-00001-of-00002.jsonl").write_text("", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"test-00001-of-00002\.jsonl: no rows, skipped"):
        assert [s.id for s in data.load(str(folder))] == [r["id"] for r in ROWS]
    _jsonl(folder / "test-00000-of-00002.jsonl", [])
    with pytest.warns(UserWarning, match="no rows, skipped"), \
            pytest.raises(DataFormatError, match=r"none of its 2 data files has a row"):
        data.load(str(folder))
