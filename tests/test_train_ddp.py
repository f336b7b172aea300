"""Training scales with Lightning's own strategies (issue 18, item 4): ``robusteval train fit
--trainer.strategy ddp --trainer.devices 2`` on CPU (gloo) trains and exports once, and the
evaluation metrics gather every rank's rows, so ``train test`` on 2 ranks reports what 1 does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_train_cli import write_config

pytestmark = pytest.mark.slow


def robusteval(*args: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "robusteval.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def metric(output: str, name: str) -> float:
    found = re.findall(rf"{re.escape(name)}\s*│\s*(-?[\d.]+(?:e-?\d+)?)", output)
    assert found, output[-2000:]
    return float(found[-1])


def test_ddp_on_two_cpu_processes_trains_exports_once_and_evaluates_the_whole_split(tiny_bert, data_dir,
                                                                                     tmp_path) -> None:
    cfg = write_config(tmp_path, tiny_bert, data_dir, "ddp", epochs=1, limit=48)
    ddp = ["--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu"]
    out = robusteval("train", "fit", "--config", str(cfg), *ddp, cwd=tmp_path)
    assert out.count("exported the trained evaluator to") == 1  # rank 0 alone writes the export
    root = tmp_path / "ddp"
    last = root / "logs" / "version_0" / "checkpoints" / "last.ckpt"
    assert (last / "tensors.safetensors").is_file() and (root / "export" / "adapter_model.safetensors").is_file()
    one = robusteval("train", "test", "--config", str(cfg), "--ckpt_path", str(last), "--trainer.devices", "1",
                     "--trainer.accelerator", "cpu", cwd=tmp_path)
    two = robusteval("train", "test", "--config", str(cfg), "--ckpt_path", str(last), *ddp, cwd=tmp_path)
    assert metric(two, "test_spearman") == pytest.approx(metric(one, "test_spearman"), abs=1e-6)
