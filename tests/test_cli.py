from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest

from robusteval.cli.main import main
from robusteval.results import read_jsonl

REQUIRED = {"bleu", "chrf", "rouge1", "rouge2", "rougeL", "meteor", "bertscore", "unieval", "poe",
            "cross-encoder", "dialogrpt", "llm-judge"}


def test_metrics_list_json(capsys) -> None:
    assert main(["metrics", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} >= REQUIRED
    assert all(r["family"] and r["source"] for r in rows)


def test_data_list_json(capsys) -> None:
    assert main(["data", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = {r["name"] for r in rows}
    assert {"summeval", "dailydialog-zhao", "usr-topicalchat", "fed-turn-original"} <= names


def test_data_show(data_dir, capsys) -> None:
    assert main(["data", "show", "summeval", "--data-dir", str(data_dir), "-n", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["size"] == 1600 and out["samples"][0]["meta"]["system_id"] == "M11"


def _jsonl(tmp_path, n=6):
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps({"hyp": f"the cat sat on mat {i}", "ref": "the cat sat on the mat",
                                     "q": i % 5 + 1}) + "\n" for i in range(n)))
    return p


def test_score_file_and_resume(tmp_path, capsys) -> None:
    p = _jsonl(tmp_path)
    out = tmp_path / "out"
    args = ["score", "--metric", "rougeL", "--input", str(p), "--columns", "response=hyp",
            "--columns", "reference=ref", "--task", "summarization", "--out-dir", str(out)]
    assert main(args) == 0
    rows = read_jsonl(out / "scores.jsonl")
    assert len(rows) == 6 and all(0 < r["score"] <= 100 for r in rows)
    assert main(args) == 2  # exists, no --resume
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 0
    assert len(read_jsonl(out / "scores.jsonl")) == 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 6 and "rougeL" in summary["reproducibility"] and summary["missing"] == 0


@contextlib.contextmanager
def held_elsewhere(folder):
    """``folder``'s writer lock, held by another process until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from robusteval.results import exclusive_folder\n"
         f"with exclusive_folder({str(folder)!r}):\n    print('held', flush=True); sys.stdin.readline()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.communicate("\n", timeout=60)


def test_a_folder_another_process_writes_is_refused_and_free_again_after(tmp_path, capsys) -> None:
    """Two processes resuming one --out-dir would append to the same logs: the second is refused
    with one line naming the folder, and the lock dies with the process that held it."""
    p = _jsonl(tmp_path)
    out = tmp_path / "out"
    args = ["score", "--metric", "rougeL", "--input", str(p), "--columns", "response=hyp",
            "--columns", "reference=ref", "--task", "summarization", "--out-dir", str(out)]
    with held_elsewhere(out):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"{out} is being written by another robusteval process" in err and err.count("\n") == 1
        assert not (out / "scores.jsonl").exists()  # refused before any work
    assert main(args) == 0  # the holder is gone: the folder is free, and its lock file is no output
    assert main([*args, "--resume"]) == 0
    assert len(read_jsonl(out / "scores.jsonl")) == 6


def test_a_distributed_trainer_s_other_processes_do_not_take_the_folder_lock(tmp_path, monkeypatch) -> None:
    """Lightning's DDP launcher reruns the command line in one process per extra device, with
    LOCAL_RANK set: those work for the process holding the lock and must not be refused."""
    from types import SimpleNamespace

    from robusteval.cli.main import owning
    from robusteval.errors import FolderBusyError

    cfg = SimpleNamespace(out_dir=str(tmp_path / "out"))
    with held_elsewhere(tmp_path / "out"):
        with pytest.raises(FolderBusyError), owning(cfg):
            pass
        monkeypatch.setenv("LOCAL_RANK", "1")
        with owning(cfg):  # rank 1 of the run that holds it
            pass
    monkeypatch.setenv("LOCAL_RANK", "0")
    made = tmp_path / "fresh"
    with owning(SimpleNamespace(out_dir=str(made))):
        assert (made / ".robusteval.lock").exists()
    assert not made.exists()  # made for a run that wrote nothing: removed again


def test_score_errors_are_clear(tmp_path, capsys) -> None:
    p = _jsonl(tmp_path)
    rc = main(["score", "--metric", "bleu", "--input", str(p), "--columns", "response=hyp",
               "--out-dir", str(tmp_path / "o")])
    assert rc == 2
    assert "field 'reference'" in capsys.readouterr().err
    assert main(["score", "--metric", "nope", "--input", str(p), "--out-dir", str(tmp_path / "o2")]) == 2
    assert "unknown metric 'nope'" in capsys.readouterr().err
    assert main(["score", "--metric", "bleu", "--input", str(tmp_path / "missing.jsonl"),
                 "--out-dir", str(tmp_path / "o3")]) == 2
    err = capsys.readouterr().err
    assert "missing.jsonl" in err and "no such file" in err and err.count("\n") == 1  # one line, before any work


def test_metaeval_on_real_data(data_dir, tmp_path, capsys) -> None:
    out = tmp_path / "me"
    rc = main(["metaeval", "--metric", "rougeL", "--dataset", "usr-topicalchat", "--dataset",
               "dailydialog-zhao", "--aspects", "overall", "--n-boot", "50", "--out-dir", str(out),
               "--data-dir", str(data_dir)])
    assert rc == 0
    report = json.loads((out / "metaeval.json").read_text())
    r = report["results"]["usr-topicalchat"]["rougeL"]["overall"]
    assert r["n"] == 360 and -1 <= r["spearman"]["r"] <= 1 and r["spearman"]["ci95"]
    assert "needs a non-empty reference" in report["results"]["dailydialog-zhao"]["rougeL"]["skipped"]
    md = (out / "metaeval.md").read_text()
    assert "| rougeL |" in md and "usr-topicalchat" in md
    assert report["provenance"]["packages"]["torch"].startswith("2.13.0")
    again = ["metaeval", "--metric", "rougeL", "--dataset", "usr-topicalchat", "--n-boot", "50",
             "--out-dir", str(out), "--data-dir", str(data_dir)]
    assert main(again) == 2  # an existing score log is reused only on request
    assert "--resume" in capsys.readouterr().err
    assert main([*again, "--resume"]) == 0


@pytest.mark.parametrize("cmd", ["score", "metaeval", "data", "metrics", "setup", "attack", "attacks", "salient"])
def test_every_command_has_help(cmd, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main([cmd, "--help"])
    assert exc.value.code == 0
    assert "usage: robusteval" in capsys.readouterr().out


def test_attacks_list_json(capsys) -> None:
    assert main(["attacks", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 20
    assert all(r["name"] and r["family"] and r["source"] and r["direction"] in ("R+", "R-") for r in rows)


def test_attack_command_with_resume(data_dir, tmp_path, capsys) -> None:
    out = tmp_path / "att"
    args = ["attack", "--metric", "rougeL", "-o", "against=context", "--dataset", "dailydialog-zhao",
            "--attacks", "generic-hello,previous-utterance", "--limit", "5", "--out-dir", str(out),
            "--data-dir", str(data_dir)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["attacks"]["previous-utterance"]["attacked"] == 5
    assert summary["attacks"]["previous-utterance"]["criteria"]["beats_reference"]["asr"] == 1.0
    assert main([*args, "--resume"]) == 0
    assert len(read_jsonl(out / "results.jsonl")) == 10
    assert main([*args[:-4], "--attacks", "family:nope", "--out-dir", str(tmp_path / "x")]) == 2
    assert "no attack of family 'nope'" in capsys.readouterr().err


def test_attack_config_with_gold_and_victim_list(data_dir, tmp_path) -> None:
    cfg = tmp_path / "a.yaml"
    cfg.write_text("""
dataset: dailydialog-zhao
select: best-per-context
limit: 3
attacks: [generic-hello, previous-utterance]
gold: {name: rouge1, options: {against: context}}
victims:
  - {name: rougeL, label: r-ctx, options: {against: context}}
  - {name: bleu, label: b-ctx, options: {against: context}}
""")
    out = tmp_path / "att"
    assert main(["attack", "--config", str(cfg), "--out-dir", str(out), "--data-dir", str(data_dir)]) == 0
    for label in ("r-ctx", "b-ctx"):
        summary = json.loads((out / label / "summary.json").read_text())
        assert summary["n_samples"] == 3 and summary["selection"] == "best-per-context"
        assert summary["attacks"]["previous-utterance"]["criteria"]["gold"]["n"] == 3


def test_an_unexpected_value_error_is_one_line_and_says_how_to_see_its_traceback(tmp_path, monkeypatch,
                                                                                   capsys) -> None:
    monkeypatch.delenv("ROBUSTEVAL_TRACEBACK", raising=False)
    p = _jsonl(tmp_path)
    args = ["score", "--metric", "rougeL", "--input", str(p), "--columns", "response=hyp", "--columns",
            "reference=ref", "--out-dir", str(tmp_path / "o")]
    from robusteval import metrics

    def broken(*a, **k):
        raise ValueError("setting an array element with a sequence")  # as numpy says it, deep inside

    monkeypatch.setattr(metrics, "load", broken)
    assert main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "robusteval score: error: setting an array element with a sequence"
    assert "ROBUSTEVAL_TRACEBACK=1" in err[1] and "Traceback" not in "\n".join(err)
    monkeypatch.setenv("ROBUSTEVAL_TRACEBACK", "1")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "in broken" in err
    assert err.rstrip().splitlines()[-1] == "robusteval score: error: setting an array element with a sequence"


def test_a_robusteval_error_stays_one_line_without_the_hint(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("ROBUSTEVAL_TRACEBACK", raising=False)
    assert main(["score", "--metric", "no-such-metric", "--input", str(_jsonl(tmp_path)), "--out-dir",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("robusteval score: error:")
