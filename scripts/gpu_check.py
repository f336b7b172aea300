"""Does robusteval train and score on a GPU with ``accelerator="auto"`` / ``device="auto"``?

The project never needs a GPU (CI runs on CPUs), so this is the check to run on a machine
that has one. Everything is built here from configs (the tests' tiny BERT, T5 and GPT-2,
``robusteval.tiny_models``) and the built-in
``quickstart-dialogue`` data, so it needs no download and no ``ROBUSTEVAL_DATA``. Steps, each
timed and reported:

1. ``robusteval harden`` of the cross-encoder module: base fit, one online adversarial round
   (R− margin, R+ consistency, the embedding adversary), the gate, the test attacks. Lightning
   picks the accelerator (``auto``); the check reads the device each model was trained on from
   its ``fit.json``.
2. The same for the UniEval-style Boolean-QA module on a tiny T5.
3. The hardened cross-encoder scored with ``device="auto"`` and with ``device="cpu"``: the
   largest difference in points (float32 kernels differ; it should be far below 0.1).
4. Median smoothing of that metric (``mask``, n=16, one seed) on both devices: the smoothed
   scores must agree as closely (the perturbations are drawn on the CPU, so they are the same).
5. The local LLM backend (tiny GPT-2): greedy and seeded sampled generation with the shared
   prompt prefix and the tiered attention on both devices, and next-token probabilities.

Prints one JSON object (and writes it to ``--out``/gpu_check.json); the exit status is 1 when
a step fails or, with ``--require-gpu``, when a step did not run on the GPU.

    .venv/bin/python scripts/gpu_check.py --out /tmp/gpu_check --require-gpu
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robusteval.tiny_models import TINY_BUILDERS


def gpu_peak_mb() -> float:
    import torch

    return torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else 0.0


def reset_peak() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def harden(out: Path, module: str, model: dict[str, Any], rounds: dict[str, Any]) -> dict[str, Any]:
    import yaml

    from robusteval.cli.main import main

    cfg = {"module": module, "epochs": 1, "seed": 0, "test_rounds": "all", "model": model, "rounds": rounds,
           "data": {"datasets": ["quickstart-dialogue"], "batch_size": 8, "val_fraction": 0.2,
                    "test_fraction": 0.3},
           "attack": {"dataset": "quickstart-dialogue", "budget": 10,
                      "attacks": ["speaker-tag-user", "generic-hello", "adveval-contraction"]}}
    path = out / f"{module}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    reset_peak()
    code = main(["harden", "--config", str(path), "--out-dir", str(out / module)])
    state = json.loads((out / module / "harden.json").read_text())
    r0, r1 = state["rounds"][0], state["rounds"][-1]
    if code != 0 or r1["round"] != 1 or not r1.get("added"):
        raise RuntimeError(f"harden {module}: exit {code}, rounds {[r['round'] for r in state['rounds']]}")
    # where Lightning trained each model (fit.json), not only whether anything touched the GPU:
    # the test attacks score on the GPU too, so a trainer fallen back to the CPU would hide there
    trained_on = sorted({json.loads(f.read_text())["device"] for f in (out / module).rglob("fit.json")})
    return {"on_gpu": bool(trained_on) and all(d.startswith("cuda") for d in trained_on), "trained_on": trained_on,
            "gpu_peak_mb": round(gpu_peak_mb(), 1), "val_spearman": [r0["val_spearman"], r1["val_spearman"]],
            "added": r1["added"], "round_1_kept": r1["kept"], "export": r1["export"]}


def scores_on(device: str, export: str, samples: list[Any], smoothed: bool = False) -> list[float]:
    from robusteval import metrics

    metric = metrics.load("cross-encoder", checkpoint=export, device=device)
    if smoothed:
        from robusteval.defenses import smooth

        metric = smooth(metric, perturbation="mask", n=16, seed=0)
    return [float(x) for x in metric.score(samples)]


def llm_on(device: str, model: Path) -> dict[str, Any]:
    from robusteval.llm.backends import LocalCausalLM

    llm = LocalCausalLM(model=str(model), device=device, batch_size=4)
    prompts = ["the cat sat on", "a dog ran to the", "hello", "is this a good answer ?"]
    return {"greedy": llm.generate(prompts, n=2, temperature=0.0, max_new_tokens=8),
            "sampled": llm.generate(prompts, n=4, temperature=1.0, max_new_tokens=8, seed=3),
            "probs": llm.next_token_probs(prompts, ["yes", "no"]).tolist()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("gpu_check_out"))
    ap.add_argument("--require-gpu", action="store_true", help="fail when no GPU was used")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    report: dict[str, Any] = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available(),
                              "device_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                              "steps": {}, "failed": []}
    from robusteval.metrics.base import resolve_device

    report["auto_device"] = resolve_device("auto")
    tiny: dict[str, Path] = {}
    for name, build in TINY_BUILDERS.items():
        (args.out / name).mkdir(exist_ok=True)
        tiny[name] = build(args.out / name)

    def step(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        t0 = time.perf_counter()
        try:
            got = fn()
        except Exception as exc:  # a failed step is reported, the others still run
            report["failed"].append(name)
            report["steps"][name] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
            return None
        got["seconds"] = round(time.perf_counter() - t0, 2)
        report["steps"][name] = got
        print(f"[gpu_check] {name}: {json.dumps(got, default=str)[:400]}", flush=True)
        return got

    ce = step("harden cross-encoder", lambda: harden(
        args.out, "cross-encoder", {"checkpoint": str(tiny["tiny_bert"]), "lora_r": 4, "lr": 5e-3,
                                    "embed_adv_weight": 1.0, "embed_eps": 0.05},
        {"rounds": 1, "epochs": 1, "tolerance": 1.0, "consistency_weight": 1.0}))
    step("harden boolqa", lambda: harden(
        args.out, "boolqa", {"checkpoint": str(tiny["tiny_t5"]), "task": "dialogue", "dimension": "naturalness",
                             "lora_r": 4, "lr": 0.01, "max_length": 128, "embed_adv_weight": 1.0, "embed_eps": 0.05},
        {"rounds": 1, "epochs": 1, "tolerance": 1.0, "consistency_weight": 1.0}))

    if ce is not None:
        from robusteval import data

        samples = data.load("quickstart-dialogue")[:40]

        def agree(smoothed: bool) -> dict[str, Any]:
            reset_peak()
            auto = scores_on("auto", ce["export"], samples, smoothed)
            peak = gpu_peak_mb()
            cpu = scores_on("cpu", ce["export"], samples, smoothed)
            diff = max(abs(a - b) for a, b in zip(auto, cpu, strict=True))
            if diff > 0.1:
                raise AssertionError(f"auto and cpu scores differ by up to {diff:.4f} points")
            return {"on_gpu": peak > 0, "n": len(samples), "max_abs_diff_points": round(diff, 6),
                    "gpu_peak_mb": round(peak, 1),
                    "mean_score": round(sum(auto) / len(auto), 3)}

        step("score cross-encoder auto vs cpu", lambda: agree(False))
        step("smoothed (mask, n=16) auto vs cpu", lambda: agree(True))

    def llm() -> dict[str, Any]:
        reset_peak()
        auto = llm_on("auto", tiny["tiny_lm"])
        peak = gpu_peak_mb()
        cpu = llm_on("cpu", tiny["tiny_lm"])
        pdiff = max(abs(a - b) for ra, rb in zip(auto["probs"], cpu["probs"], strict=True)
                    for a, b in zip(ra, rb, strict=True))
        if pdiff > 1e-3:
            raise AssertionError(f"next-token probabilities differ by {pdiff:.2e}")
        # greedy answers can differ only where two logits tie within float error; sampled ones
        # draw from per-sample seeded generators on the model's device, so equality is reported
        return {"on_gpu": peak > 0, "gpu_peak_mb": round(peak, 1), "probs_max_abs_diff": pdiff,
                "greedy_equal": auto["greedy"] == cpu["greedy"], "sampled_equal": auto["sampled"] == cpu["sampled"],
                "sampled_distinct_answers": len({t for x in auto["sampled"] for t in x})}

    step("local LLM auto vs cpu", llm)

    # every step that ran: its models trained (harden) or scored (the others) on the GPU
    ran = [s for s in report["steps"].values() if "error" not in s]
    used_gpu = bool(ran) and all(s["on_gpu"] for s in ran)
    report["used_gpu"] = used_gpu
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps({k: v for k, v in report.items() if k != "steps"}, default=str))
    if args.require_gpu and not used_gpu:
        print("[gpu_check] not every step ran on the GPU: " + ", ".join(
            n for n, st in report["steps"].items() if not st.get("on_gpu")), file=sys.stderr)
        return 1
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
