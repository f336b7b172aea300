"""One configuration system: every command's config is a dataclass parsed by jsonargparse.
A typo is named with a suggestion before any work (one line, exit 2), ``--print_config``
round-trips through ``--config``, dotted overrides change one value, the old flags still work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from robusteval.cli.main import main, parse
from robusteval.config.parsing import ConfigError
from robusteval.results import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
HARDEN = ROOT / "configs" / "harden" / "dialogue_minilm.yaml"
COMPARE = ROOT / "configs" / "compare" / "quickstart.yaml"
ATTACK = ROOT / "configs" / "attacks" / "mu_lim_table2.yaml"
GUARD = ROOT / "configs" / "guard" / "defaults.yaml"
METAEVAL = ROOT / "configs" / "metaeval" / "liu_table6.yaml"


def _jsonl(tmp_path: Path) -> Path:
    p = tmp_path / "in.jsonl"
    rows = [{"id": "en", "response": "the cat sat on the mat", "reference": "the cat sat on the mat"},
            {"id": "fr", "response": "teacher: le chat est assis sur le tapis", "reference": "le chat est assis"},
            {"id": "zh", "response": "猫坐在垫子上", "reference": "猫坐在垫子上"},
            {"id": "ar", "response": "جلس القط على الحصيرة", "reference": "جلس القط"},
            {"id": "hi", "response": "बिल्ली चटाई पर बैठी", "reference": "बिल्ली चटाई पर बैठी"},
            {"id": "ru", "response": "кошка сидела на коврике", "reference": "кошка сидела"}]
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return p


def _cfg(tmp_path: Path, name: str, body: dict) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(body, allow_unicode=True), encoding="utf-8")
    return str(path)


# every command: a typo in a config key and in a flag, named with the closest key, exit 2, no work done
def _typo_cases(tmp_path: Path) -> list[tuple[list[str], str]]:
    out = str(tmp_path / "out")
    data = str(_jsonl(tmp_path))
    score = ["score", "--metric", "rougeL", "--dataset", data, "--out-dir", out]
    attack = ["attack", "--metric", "rougeL", "--dataset", data, "--attacks", "generic-hello", "--out-dir", out]
    return [
        ([*score, "--config", _cfg(tmp_path, "s.yaml", {"guard": {"detector": ["speaker_tag"]}})],
         "unknown key 'detector' in guard; did you mean 'detectors'?"),
        ([*score, "--limt", "3"], "unknown option --limt; did you mean '--limit'"),
        ([*attack, "--config", _cfg(tmp_path, "a.yaml", {"budjet": 3})], "unknown key 'budjet' at the top level; "
                                                                          "did you mean 'budget'?"),
        ([*attack, "--victim.nme", "bleu"], "unknown key 'nme' in victim; did you mean 'name'?"),
        (["guard", "calibrate", "--config", str(GUARD), "--out-dir", out, "--target_fp", "0.1"],
         "did you mean '--target_fpr'?"),
        (["guard", "evaluate", "--config", _cfg(tmp_path, "g.yaml", {"cleen": ["quickstart-references"]}),
          "--attack-results", out, "--out-dir", out], "unknown key 'cleen' at the top level; did you mean 'clean'?"),
        (["metaeval", "--config", _cfg(tmp_path, "m.yaml", {"metrics": [{"nmae": "bleu"}], "datasets": []}),
          "--out-dir", out], "unknown key 'nmae' in metrics[0]; did you mean 'name'?"),
        (["salient", "train", "--out-dir", out, "--train-doc", "3"], "did you mean '--train_docs'?"),
        (["compare", "--config", str(COMPARE), "--out-dir", out, "--guard.polcy", "flag"],
         "unknown option --guard.polcy; did you mean '--guard.policy'"),
        (["compare", "--config", _cfg(tmp_path, "c.yaml", {**yaml.safe_load(COMPARE.read_text()), "n_bot": 3}),
          "--out-dir", out], "unknown key 'n_bot' at the top level; did you mean 'n_boot'?"),
        (["quickstart", "--out-dir", out, "--guard.policy", "flor"],
         "guard.policy: expected one of flag, penalize, floor, reject, sanitize, got 'flor'; did you mean 'floor'?"),
        (["harden", "--config", str(HARDEN), "--out-dir", out, "--model.lora_rr", "4"],
         "model: unknown key 'lora_rr'; did you mean 'lora_r'"),
        (["harden", "--config", _cfg(tmp_path, "h.yaml", {"attack": {"dataset": "x", "attacks": ["y"],
                                                                     "buget": 3}}), "--out-dir", out],
         "unknown key 'buget' in attack; did you mean 'budget'?"),
        # a misspelled key whose value is an empty mapping leaves no dotted key for jsonargparse
        ([*score, "--config", _cfg(tmp_path, "e.yaml", {"optoins": {}})],
         "unknown key 'optoins' at the top level; did you mean 'options'?"),
        ([*attack, "--config", _cfg(tmp_path, "e2.yaml", {"guard": {"detectors": ["nonalnum"], "optoins": {}}})],
         "unknown key 'optoins' in guard"),
        ([*score, f"--config={_cfg(tmp_path, 'e3.yaml', {'optoins': {'a': {}}})}"],  # hollow at any depth
         "unknown key 'optoins' at the top level; did you mean 'options'?"),
        ([*score, "--config", _cfg(tmp_path, "ok.yaml", {"options": {}}),
          "--config", _cfg(tmp_path, "e4.yaml", {"gaurd": {}})],  # the second of two files
         "unknown key 'gaurd' at the top level; did you mean 'guard'?"),
        ([*score, "--config", "{optoins: {}}"],  # the config given as text
         "unknown key 'optoins' at the top level; did you mean 'options'?"),
        # deep in lists: the position of every list on the way
        (["compare", "--config", _cfg(tmp_path, "c2.yaml", {**yaml.safe_load(COMPARE.read_text()), "suites": [
            {**yaml.safe_load(COMPARE.read_text())["suites"][0],
             "victims": [{"name": "bleu"}, {"name": "bleu", "trian": {"epochs": 1}}]}]}), "--out-dir", out],
         "unknown key 'trian' in suites[0].victims[1]; did you mean 'train'?"),
    ]


def test_a_typo_is_named_with_a_suggestion_before_any_work(tmp_path, capsys) -> None:
    for argv, message in _typo_cases(tmp_path):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        command = " ".join(argv[:2]) if argv[0] in ("guard", "salient") else argv[0]
        assert err.startswith(f"robusteval {command}: error: ") and err.count("\n") == 1, err
        assert message in err, (argv, err)
        assert not (tmp_path / "out").exists(), argv


def test_compare_typos_deep_in_the_config_name_their_block(tmp_path) -> None:
    from robusteval.compare import parse as parse_compare

    base = yaml.safe_load(COMPARE.read_text())
    base["suites"][0]["victims"][0]["train"]["rounds"]["onlin"] = True
    with pytest.raises(ConfigError, match=r"rounds: unknown key 'onlin'; did you mean 'online'\?"):
        parse_compare(base)
    base = yaml.safe_load(COMPARE.read_text())
    base["suites"][1]["datset"] = "x"
    with pytest.raises(ConfigError, match=r"unknown key 'datset' in suites\[1\]; did you mean 'dataset'\?"):
        parse_compare(base)
    base = yaml.safe_load(COMPARE.read_text())
    base["suites"][0]["victims"][0]["optoins"] = {}  # empty: no dotted key left behind for jsonargparse
    with pytest.raises(ConfigError, match=r"unknown key 'optoins' in suites\[0\].victims\[0\]; did you mean 'options'\?"):
        parse_compare(base)
    base = yaml.safe_load(COMPARE.read_text())
    base["suites"][0]["victims"][0]["train"]["rounds"]["onlin"] = {}
    with pytest.raises(ConfigError, match=r"unknown key 'onlin'.*did you mean 'online'\?"):
        parse_compare(base)
    base = yaml.safe_load(COMPARE.read_text())
    base["suites"][0]["victims"][0]["options"] = {}  # an empty mapping where one belongs is fine
    parse_compare(base)
    base["guardd"] = {}
    before = json.dumps(base, sort_keys=True)
    with pytest.raises(ConfigError, match=r"unknown key 'guardd' at the top level; did you mean 'guard'\?"):
        parse_compare(base)
    assert json.dumps(base, sort_keys=True) == before  # the caller's dict is left as it was
    # dotted keys are nested keys, as jsonargparse reads them; its own __path__ is not a typo
    dotted = {**yaml.safe_load(COMPARE.read_text()), "guard.policy": "flag", "__path__": "c.yaml"}
    assert parse_compare(dotted).guard.policy == "flag"
    with pytest.raises(ConfigError, match=r"unknown key 'polcy' in guard; did you mean 'policy'\?"):
        parse_compare({**yaml.safe_load(COMPARE.read_text()), "guard.polcy": "flag"})
    base = yaml.safe_load(COMPARE.read_text())
    train = base["suites"][0]["victims"][0]["train"]
    train["checkpoint"], train["pretrain"] = "runs/base/export", {"datasets": ["dailydialog-zhao"]}
    with pytest.raises(ConfigError, match=r"checkpoint starts from a trained base, so pretrain .* would be ignored"):
        parse_compare(base)


@pytest.mark.parametrize("argv", [
    ["score", "--metric", "rougeL", "--dataset", "quickstart-dialogue", "--out-dir", "o",
     "--options.against", "context", "--guard", "speaker_tag,nonalnum", "--guard-policy", "flag"],
    ["attack", "--config", str(ATTACK), "--out-dir", "o", "--budget", "7"],
    ["guard", "calibrate", "--config", str(GUARD), "--out-dir", "o"],
    ["guard", "evaluate", "--attack-results", "r1", "--attack-results", "r2", "--out-dir", "o"],
    ["metaeval", "--config", str(METAEVAL), "--out-dir", "o"],
    ["salient", "train", "--out-dir", "o", "--epochs", "1"],
    ["compare", "--config", str(COMPARE), "--out-dir", "o", "--seed", "3"],
    ["harden", "--config", str(HARDEN), "--out-dir", "o", "--rounds", "5"],
])
def test_print_config_fed_back_reproduces_the_config(argv, tmp_path, capsys) -> None:
    _, cfg = parse(argv)
    with pytest.raises(SystemExit) as exc:
        parse([*argv, "--print_config"])
    assert exc.value.code == 0
    printed = capsys.readouterr().out
    assert yaml.safe_load(printed)["out_dir"] == "o"
    path = tmp_path / "printed.yaml"
    path.write_text(printed, encoding="utf-8")
    head = argv[:2] if argv[0] in ("guard", "salient") else argv[:1]
    _, again = parse([*head, "--config", str(path)])
    assert again == cfg


def test_a_dotted_override_changes_one_value(tmp_path) -> None:
    base = ["compare", "--config", str(COMPARE), "--out-dir", "o"]
    _, cfg = parse(base)
    _, changed = parse([*base, "--guard.policy", "flag"])
    assert cfg.guard.policy == "floor" and changed.guard.policy == "flag"
    changed.guard.policy = "floor"
    assert changed == cfg  # nothing else moved
    _, score = parse(["score", "--metric", "rougeL", "--dataset", "d", "--out-dir", "o",
                      "--config", _cfg(tmp_path, "s.yaml", {"options": {"against": "context", "n": 2}}),
                      "--options.n", "4"])
    assert score.options == {"against": "context", "n": 4}
    _, harden = parse(["harden", "--config", str(HARDEN), "--out-dir", "o", "--rounds.tolerance", "0.5"])
    assert harden.rounds["tolerance"] == 0.5 and harden.rounds["rounds"] == 2 and harden.rounds["online"] is True


def test_old_flags_mean_what_the_new_ones_do(tmp_path) -> None:
    g = _cfg(tmp_path, "g.yaml", {"guard": {"detectors": ["speaker_tag", "nonalnum"], "policy": "flag"}})
    old = parse(["score", "--metric", "rougeL", "--input", "f.jsonl", "-o", "against=context", "--columns",
                 "response=hyp", "--columns", "reference=ref", "--task", "summarization", "--out-dir", "o",
                 "--resume", "--guard", "speaker_tag,nonalnum", "--guard-policy", "flag"])[1]
    new = parse(["score", "--metric", "rougeL", "--dataset", "f.jsonl", "--options.against", "context",
                 "--columns.response", "hyp", "--columns.reference", "ref", "--task", "summarization",
                 "--out_dir", "o", "--resume", "true", "--config", g])[1]
    assert old == new and old.guard is not None and old.guard.detectors == ["speaker_tag", "nonalnum"]
    att = parse(["attack", "--metric", "rougeL", "-o", "against=context", "--input", "f.jsonl", "--attacks",
                 "generic-hello,previous-utterance", "--limit", "5", "--out-dir", "o", "--data-dir", "d",
                 "--guard", "speaker_tag"])[1]
    (victim,) = att.victim_list()
    assert (victim.name, victim.options, att.dataset, att.limit, att.data_dir) == (
        "rougeL", {"against": "context"}, "f.jsonl", 5, "d")
    assert victim.guard is not None and victim.guard.detectors == ["speaker_tag"] and victim.guard.policy == "floor"
    cal = parse(["guard", "calibrate", "--detectors", "nonalnum,speaker_tag", "--clean", "a,b", "--per-detector",
                 "--target-fpr", "0.05", "--by-group", "--min-n", "9", "--floor-at-default", "--out-dir", "o"])[1]
    assert (cal.detectors, cal.clean, cal.combined, cal.target_fpr, cal.by_group, cal.min_n, cal.floor_at_default) \
        == (["nonalnum", "speaker_tag"], ["a", "b"], False, 0.05, True, 9, True)
    me = parse(["metaeval", "--metric", "rougeL", "--dataset", "a", "--dataset", "b.jsonl", "--aspects",
                "overall,coherence", "--n-boot", "50", "--out-dir", "o"])[1]
    metrics, datasets = me.plan()
    assert [m.name for m in metrics] == ["rougeL"] and [d.name for d in datasets] == ["a", "b.jsonl"]
    assert datasets[1].aspects == ["overall", "coherence"] and me.n_boot == 50
    hard = parse(["harden", "--config", str(HARDEN), "--rounds", "4", "--out-dir", "o"])[1]
    block = yaml.safe_load(HARDEN.read_text())["rounds"]
    assert hard.as_dict()["rounds"] == {**block, "rounds": 4}  # only the count changes
    quick = parse(["quickstart", "--seed", "5"])[1]
    assert quick.out_dir == "runs/quickstart" and quick.seed == 5 and quick.name == "quickstart"


def test_score_and_attack_take_a_plain_function_a_file_and_a_guard_flag(tmp_path, monkeypatch, capsys) -> None:
    """The forms the plugins end-to-end test relies on: --metric module:attr, --dataset FILE,
    --guard, and a config's guard: block."""
    (tmp_path / "mymetric.py").write_text(
        "def overlap(predictions, references=None, sources=None):\n"
        "    return [100.0 * len(set(p.split()) & set(r.split())) / max(len(set(p.split())), 1)\n"
        "            for p, r in zip(predictions, references)]\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    data = _jsonl(tmp_path)
    out = tmp_path / "s"
    assert main(["score", "--metric", "mymetric:overlap", "--dataset", str(data), "--out-dir", str(out),
                 "--guard", "speaker_tag", "--guard-policy", "floor"]) == 0
    rows = {r["id"]: r for r in read_jsonl(out / "scores.jsonl")}
    assert rows["en"]["score"] == 100.0 and rows["fr"]["score"] == 0.0  # "teacher:" floored by the guard
    assert rows["fr"]["guard"]["flagged"] == ["speaker_tag"] and rows["fr"]["guard"]["raw_score"] > 0
    cfg = _cfg(tmp_path, "g.yaml", {"guard": {"detectors": ["speaker_tag"], "policy": "floor"}})
    assert main(["score", "--metric", "mymetric:overlap", "--dataset", str(data), "--out-dir", str(tmp_path / "s2"),
                 "--config", cfg]) == 0
    assert [r["guard"]["flagged"] for r in read_jsonl(tmp_path / "s2" / "scores.jsonl")] == [
        r["guard"]["flagged"] for r in rows.values()]  # the config's block is the flags' guard
    att = tmp_path / "a"
    assert main(["attack", "--metric", "mymetric:overlap", "--dataset", str(data), "--attacks",
                 "generic-hello,jumbled-words", "--limit", "3", "--out-dir", str(att)]) == 0
    summary = json.loads((att / "summary.json").read_text(encoding="utf-8"))
    assert summary["n_samples"] == 3 and set(summary["attacks"]) == {"generic-hello", "jumbled-words"}
