"""The guard command line: detectors list, guarded score/attack outputs, calibrate + evaluate."""

from __future__ import annotations

import json

import yaml

from robusteval import Sample, attacks, detectors, metrics
from robusteval.attacks.runner import run_attacks
from robusteval.cli.main import main
from robusteval.results import read_jsonl

NINE = ["context_copy", "gec", "generic", "judge_injection", "nonalnum", "parse_triple", "perplexity",
        "source_support", "speaker_tag"]


def test_detectors_list_json(capsys) -> None:
    assert main(["detectors", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == NINE and all(r["family"] and r["source"] for r in rows)


def test_score_with_a_guard_block_writes_flags(tmp_path) -> None:
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "hyp": "the cat sat on the mat", "ref": "the cat sat on the mat"},
        {"id": "b", "hyp": "teacher: the cat sat on the mat", "ref": "the cat sat on the mat"}]) + "\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"metric": "rougeL", "guard": {"detectors": ["speaker_tag"], "policy": "floor"}}))
    assert main(["score", "--config", str(cfg), "--input", str(inp), "--columns", "response=hyp",
                 "--columns", "reference=ref", "--out-dir", str(tmp_path / "o")]) == 0
    rows = read_jsonl(tmp_path / "o" / "scores.jsonl")
    assert rows[0]["score"] == 100.0 and rows[0]["guard"]["flagged"] == []
    assert rows[1]["score"] == 0.0 and rows[1]["guard"]["flagged"] == ["speaker_tag"]
    assert rows[1]["guard"]["raw_score"] > 80
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["guard"] == {"scored": 2, "flagged_any": 1, "flagged": {"speaker_tag": 1}}
    assert summary["counters"]["guard.flagged.speaker_tag"] == 1  # from the log's rows
    cfg.write_text(yaml.safe_dump({"metric": "rougeL", "guard": {"detector": ["speaker_tag"]}}))
    assert main(["score", "--config", str(cfg), "--input", str(inp), "--columns", "response=hyp",
                 "--columns", "reference=ref", "--out-dir", str(tmp_path / "o2")]) == 2


def test_attack_rows_carry_the_guard_flags(tmp_path) -> None:
    # generic at its class threshold: the shipped English dialogue default (calibrated on
    # well-rated replies, several of which are short and generic) never fires
    victim = detectors.guard(metrics.load("rougeL", against="context"),
                             ["speaker_tag", {"name": "generic", "options": {"threshold": 0.75}}])
    s = Sample(id="x", task="dialogue", response="i would love to go to the park with you tomorrow",
               context=("do you want to go to the park tomorrow ?",))
    log = run_attacks([s], [attacks.load("speaker-tag-user"), attacks.load("generic-hello")], victim,
                      tmp_path / "r.jsonl", progress=False)
    rows = {r["attack"]: r for r in log}
    assert rows["speaker-tag-user"]["victim_after"] == 0.0
    assert rows["speaker-tag-user"]["meta"]["guard"]["adversarial"]["flagged"] == ["speaker_tag"]
    assert rows["generic-hello"]["meta"]["guard"]["adversarial"]["flagged"] == ["generic"]
    assert rows["generic-hello"]["meta"]["guard"]["original"]["flagged"] == []


def test_guard_calibrate_then_evaluate_on_real_data(data_dir, tmp_path, capsys, monkeypatch) -> None:
    dets = "nonalnum,speaker_tag,generic,judge_injection,context_copy"
    common = ["--data-dir", str(data_dir), "--detectors", dets, "--clean", "dailydialog-good,usr-topicalchat-ground-truth"]
    assert main(["guard", "calibrate", *common, "--target-fpr", "0.05", "--out-dir", str(tmp_path / "g")]) == 0
    table = json.loads((tmp_path / "g" / "thresholds.json").read_text())
    assert table["per_detector_fpr"] == 0.01 and set(table["detectors"]) == set(dets.split(","))
    # the calibration halves, drawn by conversation (98 replies from 37 of DailyDialog-Zhao's 96 conversations)
    assert table["clean_sets"] == {"dailydialog-good": 98, "usr-topicalchat-ground-truth": 28}
    assert table["clean_split"] == "conversation"
    assert main(["attack", "--dataset", "dailydialog-zhao", "--data-dir", str(data_dir), "--metric", "rougeL",
                 "-o", "against=context", "--attacks", "speaker-tag-user,generic-hello,previous-utterance",
                 "--limit", "20", "--out-dir", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    assert main(["guard", "evaluate", *common, "--thresholds", str(tmp_path / "g" / "thresholds.json"),
                 "--attack-results", str(tmp_path / "a"), "--out-dir", str(tmp_path / "e")]) == 0
    out = capsys.readouterr().out
    assert "Detection rate" in out and "False-positive rate" in out
    ev = json.loads((tmp_path / "e" / "evaluation.json").read_text())
    fam = ev["detection_by_family"]
    assert fam["speaker_tag"]["dialogue-rules (R-)"]["n"] == 60
    by_attack = ev["detection_by_attack"]
    assert by_attack["speaker_tag"]["speaker-tag-user"]["rate"] == 1.0
    # well-rated human replies include "okay ." and "thank you .": at a 1 % FPR the generic
    # detector cannot fire on an exact generic reply without flagging them too
    assert table["detectors"]["generic"]["never_fires"] is True
    assert by_attack["context_copy"]["previous-utterance"]["rate"] == 1.0
    assert ev["false_positive_rate"]["combined"]["dailydialog-good"]["rate"] <= 0.1
    # a resumed evaluation reuses every suspicion instead of recomputing it: no detector runs
    from robusteval.detectors.base import Detector

    def no_rerun(self, samples):
        raise AssertionError(f"{self.name} recomputed {len(samples)} suspicions on resume")

    n = len((tmp_path / "e" / "suspicion.jsonl").read_text().splitlines())
    monkeypatch.setattr(Detector, "detect", no_rerun)
    assert main(["guard", "evaluate", *common, "--thresholds", str(tmp_path / "g" / "thresholds.json"),
                 "--attack-results", str(tmp_path / "a"), "--out-dir", str(tmp_path / "e"), "--resume"]) == 0
    assert len((tmp_path / "e" / "suspicion.jsonl").read_text().splitlines()) == n
    assert json.loads((tmp_path / "e" / "evaluation.json").read_text())["detection_by_attack"] == by_attack


def test_one_config_file_drives_calibrate_and_evaluate(tmp_path, capsys) -> None:
    """configs/guard/default.yaml is shared by both subcommands: evaluate accepts its calibration
    keys and checks the thresholds file against them (it used to refuse target_fpr)."""
    import yaml

    cfg = tmp_path / "g.yaml"
    cfg.write_text(yaml.safe_dump({"detectors": ["nonalnum", "speaker_tag"], "clean": ["quickstart-references"],
                                   "target_fpr": 0.05, "combined": True}))
    assert main(["guard", "calibrate", "--config", str(cfg), "--out-dir", str(tmp_path / "g")]) == 0
    assert main(["attack", "--dataset", "quickstart-dialogue", "--metric", "rougeL", "-o", "against=context",
                 "--attacks", "speaker-tag-user", "--limit", "4", "--out-dir", str(tmp_path / "a")]) == 0
    thresholds = str(tmp_path / "g" / "thresholds.json")
    args = ["guard", "evaluate", "--config", str(cfg), "--thresholds", thresholds, "--attack-results",
            str(tmp_path / "a")]
    assert main([*args, "--out-dir", str(tmp_path / "e")]) == 0
    capsys.readouterr()
    assert main([*args, "--target_fpr", "0.01", "--out-dir", str(tmp_path / "e2")]) != 0
    assert "calibrated with target_fpr=0.05, but the config asks for target_fpr=0.01" in capsys.readouterr().err
    assert not (tmp_path / "e2" / "evaluation.json").exists()
    # a config asking for an FPR bound is refused a file calibrated without one
    assert main([*args, "--confidence", "0.95", "--out-dir", str(tmp_path / "e5")]) != 0
    assert "calibrated with confidence=None, but the config asks for confidence=0.95" in capsys.readouterr().err
    assert main(["guard", "calibrate", "--config", str(cfg), "--confidence", "0.95", "--out-dir",
                 str(tmp_path / "g3")]) == 0
    assert "at 97.5 % confidence" in capsys.readouterr().out  # 0.95 split between the two detectors
    bounded = str(tmp_path / "g3" / "thresholds.json")
    assert main([*args[:5], bounded, *args[6:], "--confidence", "0.95", "--out-dir", str(tmp_path / "e4")]) == 0
    # a file calibrated before clean text was halved by conversation would be evaluated on a
    # held-out half that overlaps its fit: refused, with what to do
    old = json.loads((tmp_path / "g" / "thresholds.json").read_text())
    old.pop("clean_split")
    (tmp_path / "old.json").write_text(json.dumps(old))
    args[args.index(thresholds)] = str(tmp_path / "old.json")
    assert main([*args, "--out-dir", str(tmp_path / "e3")]) != 0
    assert "records no clean_split" in capsys.readouterr().err and not (tmp_path / "e3" / "evaluation.json").exists()


def test_calibrate_by_group_prints_each_groups_bound(tmp_path, capsys) -> None:
    """With --by-group and --confidence every group's line shows its detectors' FPR bounds,
    the values the thresholds file records (they were printed only for the pooled table)."""
    out = tmp_path / "g"
    assert main(["guard", "calibrate", "--detectors", "nonalnum", "--clean", "quickstart-references",
                 "--by-group", "--min-n", "1", "--confidence", "0.95", "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    table = json.loads((out / "thresholds.json").read_text())
    assert table["groups"]
    for group, entry in table["groups"].items():
        bound = entry["detectors"]["nonalnum"]["fpr_upper_bound"]
        line = next(x for x in printed.splitlines() if x.startswith(f"  {group} (n={entry['n']})"))
        assert f"nonalnum {entry['detectors']['nonalnum']['threshold']:.3g} (bound {100 * bound:.2f}%)" in line
