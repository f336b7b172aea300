"""Issue 17 follow-ups: ``compare --report-only``, the listings' origin column, and files
(and any name ``robusteval.data.load`` takes) as guard calibration and compare clean sets,
with correlation entries and detectors whose names contain ':'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_plugins import plugins  # noqa: F401  (the fixture: a plugin distribution on sys.path)

from robusteval.cli.main import main, parse
from robusteval.errors import RobustevalError


# -- 1. compare --report-only ---------------------------------------------------------------
def test_compare_report_only_rerenders_a_finished_run_without_a_config(tmp_path, capsys) -> None:
    from test_report import make_report

    report = make_report()
    (tmp_path / "report.json").write_text(json.dumps(report))
    assert main(["compare", "--report-only", "--out-dir", str(tmp_path), "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"rendered {tmp_path / 'report.html'}" in out
    assert "Verdict: robustness and its validity cost" in (tmp_path / "report.html").read_text()
    assert "## Headline" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "report.json").read_text()) == report  # nothing rerun, nothing added


def test_compare_report_only_options_are_checked_and_left_out_of_the_fingerprint(tmp_path, capsys) -> None:
    _, cfg = parse(["compare", "--report-only", "--out_dir", str(tmp_path)])
    assert cfg.report_only and cfg.suites == []  # no config needed
    assert "report_only" not in cfg.raw and "screenshot" not in cfg.raw  # a run's fingerprint ignores them
    assert main(["compare", "--report-only", "--out-dir", str(tmp_path / "none")]) == 2
    assert "report.json not found" in capsys.readouterr().err
    assert main(["compare", "--out-dir", str(tmp_path), "--screenshot", "x.png"]) == 2
    assert "--screenshot goes with --report-only" in capsys.readouterr().err
    assert main(["compare", "--out-dir", str(tmp_path)]) == 2  # without --report-only the config is required
    assert "guard.detectors is required" in capsys.readouterr().err


# -- 2. listings say where each entry comes from --------------------------------------------
@pytest.mark.parametrize(("argv", "name"), [(["metrics", "list"], "charshare"), (["attacks", "list"], "exclaim"),
                                            (["detectors", "list"], "shout"), (["data", "list"], "plugrows")])
@pytest.mark.usefixtures("plugins")
@pytest.mark.filterwarnings("ignore:skipped")  # test_plugins' distribution also ships a broken and a shadowing entry
def test_listings_show_the_origin_of_builtins_and_plugins(capsys, argv, name) -> None:
    assert main([*argv, "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[name]["origin"].startswith(f"entry point {name} = plugmod:")
    assert rows[name]["origin"].endswith("(plugdist 0.3)")
    builtin = next(n for n in rows if n != name)
    assert rows[builtin]["origin"] == "built-in"
    assert main(argv) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert "plugin plugdist 0.3" in lines[name] and "entry point" not in lines[name]
    assert "built-in" in lines[builtin] and "plugdist" not in lines[builtin]


# -- 3. files as clean sets; correlation and detector names with ':' --------------------------
CLEAN_TEXTS = [
    ("how was your weekend?", "It was lovely, we walked by the river."),
    ("你周末过得怎么样？", "很好，我们去河边散步了。"),
    ("كيف كانت عطلتك؟", "كانت جميلة، مشينا بجانب النهر."),
    ("आपका सप्ताहांत कैसा था?", "अच्छा था, हम नदी के किनारे टहले।"),
    ("Как прошли выходные?", "Отлично, мы гуляли у реки."),
    ("Comment s'est passé ton week-end ?", "Très bien, nous avons marché au bord de la rivière."),
]


def clean_file(tmp_path: Path, copies: int = 4) -> Path:
    """A JSONL clean set in six languages with the usual column names (context, response)."""
    path = tmp_path / "my_clean.jsonl"
    rows = [{"id": f"c{k}-{i}", "context": ctx, "response": resp, "task": "dialogue"}
            for k in range(copies) for i, (ctx, resp) in enumerate(CLEAN_TEXTS)]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def rated_file(tmp_path: Path) -> Path:
    """A human-rated JSONL (score column) in a folder whose name has a ':' in it."""
    folder = tmp_path / "rated:set"
    folder.mkdir()
    path = folder / "rated.jsonl"
    rows = [{"id": f"r{i}", "context": ctx, "response": resp, "reference": resp, "score": float(1 + i % 5)}
            for i, (ctx, resp) in enumerate(CLEAN_TEXTS * 2)]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def test_a_file_is_a_clean_set_halved_by_conversation(tmp_path) -> None:
    from robusteval.detectors.clean import in_heldout, load_clean

    from robusteval.errors import DataFormatError, MissingResourceError, UnknownNameError

    path = str(clean_file(tmp_path))
    everything = load_clean(path)
    cal, held = load_clean(path, "calibration"), load_clean(path, "heldout")
    assert len(everything) == 24 and {s.response for s in everything} == {r for _, r in CLEAN_TEXTS}
    assert sorted(s.id for s in cal + held) == sorted(s.id for s in everything)
    assert all(not in_heldout(s) for s in cal) and all(in_heldout(s) for s in held) and cal and held
    # the four copies of each context fall on one side: no context is in both halves
    assert not {s.context for s in cal} & {s.context for s in held}
    assert len(cal) % 4 == 0 and len(held) % 4 == 0
    with pytest.raises(UnknownNameError, match=r"not a shipped clean set.*summeval-references"):
        load_clean("dailydialog-gud")
    with pytest.raises(TypeError, match="takes a Sample"):
        in_heldout(cal[0].id)
    # one context only: one half is empty, which is said (not a threshold fitted on nothing)
    one = tmp_path / "one_context.jsonl"
    one.write_text("".join(json.dumps({"id": f"x{i}", "context": "how are you?", "response": f"fine {i}",
                                       "task": "dialogue"}) + "\n" for i in range(40)), encoding="utf-8")
    assert len(load_clean(str(one))) == 40
    empty = "heldout" if not in_heldout(load_clean(str(one))[0]) else "calibration"
    with pytest.raises(DataFormatError, match=rf"one_context\.jsonl.*40 texts come from 1 conversation.*{empty} half is empty"):
        load_clean(str(one), empty)
    with pytest.raises(MissingResourceError, match=r"clean set .*nope\.jsonl"):
        load_clean(str(tmp_path / "nope.jsonl"))


def test_guard_calibrate_takes_a_jsonl_clean_set(tmp_path, capsys) -> None:
    from robusteval.detectors.clean import in_heldout, load_clean

    path = clean_file(tmp_path)
    out = tmp_path / "cal"
    assert main(["guard", "calibrate", "--detectors", "nonalnum,speaker_tag", "--clean", str(path),
                 "--target-fpr", "0.2", "--out-dir", str(out)]) == 0
    table = json.loads((out / "thresholds.json").read_text())
    n_cal = sum(not in_heldout(s) for s in load_clean(str(path)))
    assert n_cal == 12  # the Chinese, Arabic and French contexts, four copies each
    assert {e["n"] for e in table["detectors"].values()} == {n_cal}
    assert "threshold" in capsys.readouterr().out


def small_compare(tmp_path: Path, **guard: object) -> dict:
    return {"name": "files", "seed": 0, "budget": 4, "n_boot": 20,
            "guard": {"detectors": ["nonalnum", "speaker_tag"], "policy": "floor", **guard},
            "suites": [{"name": "dialogue", "dataset": "quickstart-dialogue", "limit": 2,
                        "split": {"val_fraction": 0.0, "test_fraction": 0.5},
                        "attacks": ["generic-cucumber"], "victims": ["rougeL"],
                        "correlation": ["quickstart-dialogue", "quickstart-summary:test"]}]}


@pytest.mark.usefixtures("plugins")
def test_compare_config_accepts_files_and_colon_names_everywhere(tmp_path) -> None:
    from robusteval.compare import parse as parse_compare
    from robusteval.compare.pipeline import SuiteData, check_names, correlation_target
    from robusteval.config.compare import CorrelationSpec
    from robusteval.errors import MissingResourceError, UnknownNameError

    clean, rated = str(clean_file(tmp_path)), str(rated_file(tmp_path))
    raw = small_compare(tmp_path, calibrate={"clean": [clean], "target_fpr": 0.2})
    raw["guard"]["detectors"].append("plugmod:ShoutDetector")  # module:attr detector
    raw["guard"]["fpr_sets"] = [clean, "quickstart-references"]
    raw["suites"][0]["correlation"] += ["plugmod:rows", rated, f"{rated}:test", {"dataset": "hf:user/set",
                                                                                   "split": "test"}]
    cfg = parse_compare(raw)
    check_names(cfg)  # module:attr detector, file clean sets, ':' in correlation names: all known
    corr = cfg.suites[0].correlation
    assert [correlation_target(e, "quickstart-dialogue") for e in corr] == [
        ("quickstart-dialogue", True), ("quickstart-summary", True), ("plugmod:rows", False),
        (rated, False), (rated, True), ("hf:user/set", True)]
    assert isinstance(corr[-1], CorrelationSpec)
    assert correlation_target("plugmod:test", "x") == ("plugmod:test", False)  # 'plugmod' is no dataset
    cfg.suites[0].correlation = corr[:-1]  # no Hugging Face download in a test
    sets = SuiteData(cfg.suites[0], cfg, None).correlation
    assert len(sets["plugmod:rows"]) == 2 and len(sets[rated]) == 12
    from robusteval.training.data import split_of

    split = cfg.suites[0].split  # the rated file's own test contexts, split as training splits it
    want = [s.id for s in sets[rated] if split_of(rated, s, split["val_fraction"], split["test_fraction"], 0) == "test"]
    assert [s.id for s in sets[f"{rated} (test split)"]] == want and "quickstart-summary (test split)" in sets
    bad = small_compare(tmp_path, calibrate={"clean": [clean]})
    bad["guard"]["detectors"].append("plugmod:Nope")
    with pytest.raises(RobustevalError, match=r"plugmod:Nope"):
        check_names(parse_compare(bad))
    bad = small_compare(tmp_path, calibrate={"clean": [clean]}, fpr_sets=[str(tmp_path / "missing.jsonl")])
    with pytest.raises(MissingResourceError, match=r"clean set .*missing\.jsonl"):
        check_names(parse_compare(bad))
    bad = small_compare(tmp_path, calibrate={"clean": ["no-such-clean-set"]})
    with pytest.raises(UnknownNameError, match=r"unknown clean set 'no-such-clean-set'"):
        check_names(parse_compare(bad))
    bad = small_compare(tmp_path, calibrate={"clean": [clean]})
    first = bad["guard"]["detectors"][0]
    bad["guard"]["detectors"].append({"name": first if isinstance(first, str) else first["name"]})
    with pytest.raises(RobustevalError, match=r"guard.detectors lists '.+' 2 times"):
        check_names(parse_compare(bad))  # refused before any work, as detectors.guard would refuse it
    bad = small_compare(tmp_path, calibrate={"clean": [clean]})
    bad["guard"]["detectors"] = ["nonalnum", "robusteval.detectors.nonalnum:NonAlnum"]  # one class, two spellings
    with pytest.raises(RobustevalError, match=r"guard.detectors lists 'nonalnum' 2 times"):
        check_names(parse_compare(bad))


def test_compare_calibrates_on_a_file_and_measures_its_false_positives(tmp_path) -> None:
    clean = str(clean_file(tmp_path))
    cfg = small_compare(tmp_path, calibrate={"clean": [clean], "target_fpr": 0.2})
    cfg["suites"][0]["correlation"] = ["quickstart-dialogue"]
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    assert main(["compare", "--config", str(path), "--out-dir", str(tmp_path / "run")]) == 0
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    fpr = report["guard"]["false_positive_rate"]["nonalnum"]
    from robusteval.detectors.clean import load_clean

    assert fpr[clean]["n"] == len(load_clean(clean, "heldout")) > 0
    cal = json.loads((tmp_path / "run" / "guard" / "thresholds.json").read_text())
    assert cal["detectors"]["nonalnum"]["n"] == len(load_clean(clean, "calibration"))


def test_calibrate_clean_given_as_a_comma_string_is_a_list() -> None:
    """``clean: "a,b"`` means two sets (as ``fpr_sets`` and ``--clean a,b`` do), never one set
    per character when the pipeline iterates over it."""
    from robusteval.compare import parse as parse_compare

    raw = small_compare(Path("."), calibrate={"clean": "quickstart-references, quickstart-references"})
    cfg = parse_compare(raw)
    assert cfg.guard.calibrate["clean"] == ["quickstart-references", "quickstart-references"]
    assert cfg.guard.fpr_sets == ["quickstart-references", "quickstart-references"]


def test_compare_calibrates_with_the_configured_confidence(tmp_path) -> None:
    """``guard.calibrate.confidence`` reaches the calibration: the run's thresholds file bounds
    each FPR at it (and says so); a confidence outside (0, 1) is refused when the config is read."""
    from robusteval.compare import parse as parse_compare
    from robusteval.compare.guarding import build_detectors
    from robusteval.results import JsonlLog
    from robusteval.stats import binomial_upper

    raw = small_compare(tmp_path, calibrate={"clean": ["quickstart-references"], "confidence": 0.9})
    cfg = parse_compare(raw)
    _, path = build_detectors(cfg, tmp_path, JsonlLog(tmp_path / "s.jsonl", key="key"), None)
    table = json.loads(Path(str(path)).read_text())
    assert table["confidence"] == 0.9 and table["per_detector_confidence"] == pytest.approx(0.95)  # two detectors
    for e in table["detectors"].values():
        flagged = round(e["calibration_fpr"] * e["n"])
        assert e["fpr_upper_bound"] == binomial_upper(flagged, e["n"], table["per_detector_confidence"])
    for bad in (1.5, 0, True, "high"):
        with pytest.raises(RobustevalError, match=r"guard\.calibrate\.confidence must be in"):
            parse_compare(small_compare(tmp_path, calibrate={"clean": ["quickstart-references"], "confidence": bad}))
    with pytest.raises(RobustevalError, match="confidence must be in"):
        parse(["guard", "calibrate", "--confidence", "1.0", "--out-dir", str(tmp_path / "x")])


def test_training_specs_keep_colons_that_belong_to_the_dataset(tmp_path) -> None:
    """``NAME[:ASPECT]`` for train/harden data: ``hf:`` names, ``module:attr`` and files keep their
    ':'; an aspect is split off only when the part before it is a dataset (one rule with
    compare's ``correlation:`` entries: robusteval.data.split_suffix)."""
    from robusteval.training.data import parse_spec

    rated = tmp_path / "rated.jsonl"
    rated.write_text('{"id": "a", "response": "x", "rating": 3}\n', encoding="utf-8")
    assert parse_spec("usr-topicalchat:overall") == ("usr-topicalchat", "overall")
    assert parse_spec("summeval:coherence") == ("summeval", "coherence")
    assert parse_spec("summeval") == ("summeval", "overall")
    assert parse_spec("hf:org/set") == ("hf:org/set", "overall")        # was ("hf", "org/set")
    assert parse_spec("nosuchmodule:rows") == ("nosuchmodule:rows", "overall")
    assert parse_spec(f"{rated}:rating") == (str(rated), "rating")


def test_a_training_runs_fingerprint_reads_every_rating_it_trains_on(tmp_path) -> None:
    """``read_digest`` covers every dataset a training run reads (datasets, test_datasets, the
    pre-training sets), ratings included: one rating edited in a test set is another run."""
    from robusteval.training.data import read_digest

    rated = tmp_path / "rated.jsonl"

    def write(first: float) -> None:
        rows = [{"id": f"r{i}", "context": ctx, "response": resp, "rating": float(1 + i % 5)}
                for i, (ctx, resp) in enumerate(CLEAN_TEXTS)]
        rows[0]["rating"] = first
        rated.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")

    write(2.0)
    adv = tmp_path / "attacks.jsonl"
    adv.write_text('{"key": "a|s0"}\n', encoding="utf-8")
    args = {"datasets": ["quickstart-dialogue"], "test_datasets": [f"{rated}:rating"], "limit": 2,
            "adversarial": [str(adv)]}
    before = read_digest(args, {"datasets": ["quickstart-summary"]})
    assert set(before) == {"quickstart-dialogue", "quickstart-summary", str(rated), f"adversarial:{adv}"}
    assert before["quickstart-dialogue"]["n"] == 2  # a rated set under the limit ...
    assert before["quickstart-summary"]["n"] > 2  # ... the pre-training set whole, as build_pool loads it
    write(4.0)
    adv.write_text('{"key": "a|s1"}\n', encoding="utf-8")
    after = read_digest(args, {"datasets": ["quickstart-summary"]})
    assert after["quickstart-dialogue"] == before["quickstart-dialogue"]
    assert after[str(rated)] != before[str(rated)] and after[f"adversarial:{adv}"] != before[f"adversarial:{adv}"]
