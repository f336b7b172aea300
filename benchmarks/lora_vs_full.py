"""LoRA vs full fine-tuning of the MiniLM cross-encoder on the same batches: the share of
trainable parameters (target <= 1 %) and the time per optimizer step (forward + backward +
AdamW), as a ratio LoRA / full, median over steps after a warm-up, in one run.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/lora_vs_full.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import torch
from robusteval.training.cross_encoder import CrossEncoderModule
from robusteval.training.data import ScoringDataModule

STEPS, WARMUP, BATCH = 12, 2, 16


def step_times(module: CrossEncoderModule, batches: list) -> list[float]:
    module.train()
    opt = module.configure_optimizers()
    times = []
    for i, batch in enumerate(batches):
        t = time.perf_counter()
        loss = sum(module.losses(batch).values())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i >= WARMUP:
            times.append(time.perf_counter() - t)
    return times


def same_batches() -> list:
    """The first ``STEPS`` train batches of DailyDialog-Zhao, in a fixed order: both sides of a
    step-time comparison train on exactly these."""
    torch.manual_seed(0)
    dm = ScoringDataModule(datasets=["dailydialog-zhao"], batch_size=BATCH, negatives=0)
    dm.setup("fit")
    it = iter(dm.train_dataloader())
    return [next(it) for _ in range(STEPS)]


def main() -> int:
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the data folder", file=sys.stderr)
        return 2
    batches = same_batches()
    lora = CrossEncoderModule(lora_r=8)
    full = CrossEncoderModule(full_finetune=True)
    t_lora, t_full = [], []
    for _ in range(2):  # alternate to even out machine noise
        t_lora += step_times(lora, batches)
        t_full += step_times(full, batches)
    lt, la = lora.trainable_share()
    ft, fa = full.trainable_share()
    ml, mf = statistics.median(t_lora), statistics.median(t_full)
    print(f"batches: {STEPS} x {BATCH} DailyDialog-Zhao (context, response) pairs, "
          f"cpu threads {torch.get_num_threads()}")
    print(f"LoRA r=8 (query, value) + head: {lt:,} of {la:,} parameters trainable = {100 * lt / la:.3f} % "
          "(target <= 1 %)")
    print(f"full fine-tuning: {ft:,} of {fa:,} trainable = {100 * ft / fa:.1f} %")
    print(f"step time median: LoRA {ml * 1000:.0f} ms, full {mf * 1000:.0f} ms; ratio LoRA / full = {ml / mf:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
