"""`robusteval train` (LightningCLI): fit/test from a config, pickle-free checkpoints, and a
SIGKILL in the middle of training resumed from the last checkpoint to the same final state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
import yaml
from lightning.pytorch.callbacks import Callback
from safetensors.torch import load_file

from robusteval.cli.main import main


def write_config(tmp: Path, tiny_bert: Path, data_dir: Path, name: str, epochs: int, limit: int = 120) -> Path:
    cfg = {
        "seed_everything": 0,
        "trainer": {"max_epochs": epochs, "default_root_dir": str(tmp / name), "log_every_n_steps": 1,
                    "enable_progress_bar": False,
                    "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger",
                               "init_args": {"save_dir": str(tmp / name), "name": "logs", "version": 0}}},
        "model": {"class_path": "robusteval.training.cross_encoder.CrossEncoderModule",
                  "init_args": {"checkpoint": str(tiny_bert), "lora_r": 4, "lr": 0.003, "lora_dropout": 0.1,
                                "export_dir": str(tmp / name / "export")}},
        "data": {"datasets": ["dailydialog-zhao"], "data_dir": str(data_dir), "limit": limit, "batch_size": 4,
                 "val_fraction": 0.2, "test_fraction": 0.2},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_train_fit_and_test_from_a_config(tiny_bert, data_dir, tmp_path, capsys) -> None:
    cfg = write_config(tmp_path, tiny_bert, data_dir, "run", epochs=2, limit=60)
    assert main(["train", "fit", "--config", str(cfg)]) == 0
    root = tmp_path / "run"
    last = root / "logs" / "version_0" / "checkpoints" / "last.ckpt"
    assert sorted(p.name for p in last.iterdir()) == ["state.json", "tensors.safetensors"]
    from robusteval.training.data import SPLIT_SCHEME

    state = json.loads((last / "state.json").read_text())  # the split a resume must continue on
    assert state["ScoringDataModule"] == {"split_scheme": SPLIT_SCHEME}
    tensors = load_file(str(last / "tensors.safetensors"))
    weights = [k for k in tensors if k.startswith("state_dict/")]
    assert weights and all("lora_" in k or ".head." in k for k in weights)  # adapter + head only
    assert not list(root.rglob("*.pt")) and not list(root.rglob("*.bin"))
    header = (root / "logs" / "version_0" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {"train_loss", "val_spearman", "val_spearman/dailydialog-zhao"} <= set(header)
    assert (root / "export" / "adapter_model.safetensors").is_file()  # LoRA + head (tests/test_exports.py)
    assert main(["train", "test", "--config", str(cfg), "--ckpt_path", str(last)]) == 0
    assert "test_spearman" in capsys.readouterr().out


def test_print_config(tiny_bert, data_dir, tmp_path, capsys) -> None:
    cfg = write_config(tmp_path, tiny_bert, data_dir, "pc", epochs=1)
    with pytest.raises(SystemExit) as e:
        main(["train", "fit", "--config", str(cfg), "--print_config"])
    assert e.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["model"]["init_args"]["lora_r"] == 4 and printed["data"]["batch_size"] == 4


def test_a_second_training_into_the_same_export_folder_is_refused(tiny_bert, data_dir, tmp_path, capsys) -> None:
    """`robusteval train fit` holds its model's export_dir as every other command holds its
    --out-dir: a second run exporting there is refused before it trains instead of writing one
    evaluator over the other."""
    from test_cli import held_elsewhere

    cfg = write_config(tmp_path, tiny_bert, data_dir, "twice", epochs=1, limit=40)
    held = tmp_path / "twice" / "export"
    with held_elsewhere(held):
        assert main(["train", "fit", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert f"{held} is being written by another robusteval process" in err
    assert not list((tmp_path / "twice").rglob("*.ckpt")) and not (held / "adapter_model.safetensors").exists()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["train", "fit", "--config", str(cfg)]) == 0  # free again: it trains and exports
    assert (held / "adapter_model.safetensors").is_file()
    assert not [w for w in seen if "exists and is not empty" in str(w.message)]  # no lock file in the log folder


class SigtermInSecondEpoch(Callback):
    """Sends this process SIGTERM after the first batch of epoch 1, once epoch 0's checkpoint
    is on disk: deterministic, unlike a kill from outside timed against the clock."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.current_epoch == 1 and batch_idx == 0:
            os.kill(os.getpid(), signal.SIGTERM)


def test_sigterm_stops_at_a_batch_end_exits_143_and_names_the_checkpoint(tiny_bert, data_dir, tmp_path,
                                                                           capsys) -> None:
    cfg = write_config(tmp_path, tiny_bert, data_dir, "term", epochs=3, limit=60)
    original = signal.getsignal(signal.SIGTERM)
    # a handler someone else left in the process (Ray's sys.exit, as an earlier test's ray.init
    # does) must not end the training mid-batch
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
    before = signal.getsignal(signal.SIGTERM)
    try:
        code = main(["train", "fit", "--config", str(cfg),
                     "--trainer.callbacks+=test_train_cli.SigtermInSecondEpoch"])
        assert signal.getsignal(signal.SIGTERM) is before  # the process's handler is back
    finally:
        signal.signal(signal.SIGTERM, original)
    err = capsys.readouterr().err
    assert code == 143  # not Lightning's SystemExit() status 0, which a scheduler reads as success
    last = tmp_path / "term" / "logs" / "version_0" / "checkpoints" / "last.ckpt"
    assert json.loads((last / "state.json").read_text())["epoch"] == 0
    assert "terminated (SIGTERM)" in err and f"--ckpt_path {last}" in err
    assert not (tmp_path / "term" / "export").exists()  # no export from an unfinished fit


@pytest.mark.slow
def test_sigkill_mid_training_then_resume_reaches_the_same_state(tiny_bert, data_dir, tmp_path) -> None:
    epochs = 5
    env = {**os.environ, "ROBUSTEVAL_DATA": str(data_dir)}
    cmd = [sys.executable, "-m", "robusteval.cli.main", "train", "fit"]
    # the uninterrupted run
    ref_cfg = write_config(tmp_path, tiny_bert, data_dir, "ref", epochs)
    subprocess.run([*cmd, "--config", str(ref_cfg)], check=True, env=env, capture_output=True)
    # the killed run: SIGKILL as soon as an epoch checkpoint exists, while later epochs train
    cfg = write_config(tmp_path, tiny_bert, data_dir, "killed", epochs)
    last = tmp_path / "killed" / "logs" / "version_0" / "checkpoints" / "last.ckpt"
    proc = subprocess.Popen([*cmd, "--config", str(cfg)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and not (last / "state.json").is_file():
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    state = json.loads((last / "state.json").read_text())
    assert state["epoch"] < epochs - 1, "the kill came too late to test a resume"
    # no evaluator was exported: at most the folder the killed run held, with its lock file alone
    export = tmp_path / "killed" / "export"
    assert not export.exists() or [p.name for p in export.iterdir()] == [".robusteval.lock"]
    subprocess.run([*cmd, "--config", str(cfg), "--ckpt_path", str(last)], check=True, env=env, capture_output=True)
    a = load_file(str(tmp_path / "ref" / "export" / "adapter_model.safetensors"))  # LoRA and the head
    b = load_file(str(tmp_path / "killed" / "export" / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(".head." in k for k in a)


def test_harden_rounds_attack_train_reattack(tiny_bert, data_dir, tmp_path, capsys) -> None:
    cfg = {"epochs": 1, "seed": 0, "test_rounds": "all",
           "rounds": {"rounds": 1, "epochs": 1, "tolerance": 1.0, "train_limit": 12, "val_limit": 4},
           "model": {"checkpoint": str(tiny_bert), "lora_r": 4, "lr": 0.003},
           "data": {"datasets": ["dailydialog-zhao"], "limit": 60, "batch_size": 8, "val_fraction": 0.2,
                    "test_fraction": 0.3},
           "attack": {"dataset": "dailydialog-zhao", "attacks": ["speaker-tag-user", "generic-hello", "reversed-words"],
                      "held_out": [], "test_limit": 6, "budget": 20}}
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "harden"
    assert main(["harden", "--config", str(path), "--data-dir", str(data_dir), "--out-dir", str(out)]) == 0
    state = json.loads((out / "harden.json").read_text())
    assert [r["round"] for r in state["rounds"]] == [0, 1]
    r0, r1 = state["rounds"]
    assert r0["added"] == 0 and r1["added"] > 0 and r1["init"] == r0["export"]  # round 1 continues the base
    assert r0["val_asr_detail"]["n"] == 3 * 4  # the training attacks on the validation contexts
    assert set(r0["test_asr"]) == {"dialogue-rules (R-)"} and r0["test_asr"]["dialogue-rules (R-)"]["n"] == 18
    assert "test_spearman" in r1["test"] and "val_spearman" in r1 and r1["valid"]  # tolerance 1.0 admits it
    assert state["chosen"] in (0, 1) and sum(r["kept"] for r in state["rounds"]) == 1
    assert (out / "rounds" / "round_1" / "model" / "export" / "adapter_model.safetensors").is_file()
    md = (out / "harden.md").read_text()
    assert "round 0" in md and "round 1" in md and "dialogue-rules (R-)" in md and "val Spearman" in md
    # resume: nothing left to do, nothing recomputed
    before = (out / "harden.json").read_text()
    assert main(["harden", "--config", str(path), "--data-dir", str(data_dir), "--out-dir", str(out), "--resume"]) == 0
    assert json.loads((out / "harden.json").read_text())["rounds"] == json.loads(before)["rounds"]


def test_only_the_rank_zero_process_holds_the_export_folder(monkeypatch) -> None:
    """Under a cluster launcher (srun with several tasks: SLURM_PROCID, not RANK) the trainer's
    cluster environment gives each process its rank; the extra ranks must not take the lock that
    rank 0 holds (they would be refused, and rank 0 would wait for them forever)."""
    from types import SimpleNamespace

    from robusteval.training.cli import TrainCLI

    for k in ("LOCAL_RANK", "RANK", "NODE_RANK"):
        monkeypatch.delenv(k, raising=False)

    def cli(rank: int, export: str | None = "out/export") -> SimpleNamespace:
        return SimpleNamespace(model=SimpleNamespace(export_dir=export), trainer=SimpleNamespace(global_rank=rank))

    assert TrainCLI.written_folders(cli(0), "fit") == ["out/export"]
    assert TrainCLI.written_folders(cli(1), "fit") == []  # SLURM_PROCID=1, as the cluster environment reads it
    assert TrainCLI.written_folders(cli(0), "test") == [] and TrainCLI.written_folders(cli(0, None), "fit") == []
    monkeypatch.setenv("LOCAL_RANK", "1")  # Lightning's own launcher, before the trainer knows its rank
    assert TrainCLI.written_folders(cli(0), "fit") == []


def test_a_checkpoint_of_another_split_is_not_resumed(tiny_bert, data_dir, tmp_path, capsys) -> None:
    """--ckpt_path on a checkpoint whose data were split otherwise is refused before training:
    one that records no scheme (every checkpoint written before 2026-11-28), or "conversation"
    for a dataset given as a path (then split by the path as written). A registered dataset
    split the same under "conversation" and resumes."""
    from robusteval.training.data import ScoringDataModule

    from robusteval.errors import RobustevalError

    ScoringDataModule(datasets=["dailydialog-zhao:overall"]).check_split("conversation")
    with pytest.raises(RobustevalError, match="split its data by 'conversation'"):
        ScoringDataModule(datasets=["data/mine.jsonl"]).check_split("conversation")
    cfg = write_config(tmp_path, tiny_bert, data_dir, "old", epochs=1, limit=40)
    assert main(["train", "fit", "--config", str(cfg)]) == 0
    last = tmp_path / "old" / "logs" / "version_0" / "checkpoints" / "last.ckpt"
    state = json.loads((last / "state.json").read_text())
    state.pop("ScoringDataModule")  # as a checkpoint of code before the scheme was recorded
    (last / "state.json").write_text(json.dumps(state))
    assert main(["train", "fit", "--config", str(cfg), "--trainer.max_epochs", "2", "--ckpt_path", str(last)]) == 2
    assert "a scheme it does not record (written before 2026-11-28)" in capsys.readouterr().err
