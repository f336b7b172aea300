"""Throughput of the Ray backend (issue 18): an attack campaign on this machine with the local
backend and with 1 and 2 Ray workers, and the Ray overhead per unit of work.

``campaign``: the first ``--samples`` of ``--dataset`` (default robusteval's shipped quickstart
dialogues, 24 samples; ``dailydialog-zhao`` with ``--data-dir`` for more) x the attacks in
``ATTACKS`` (static rules, one victim query each, plus the master-keys search, which queries
the victim up to ``--budget`` times) against a real victim (``--metric``, its ``--option
KEY=VALUE``: ``bertscore`` = BERTScore on the shipped MiniLM,
compute-bound; ``rougeL``, light, overhead-bound). Every measurement is cold: a fresh victim
and fresh attacks (metrics.load / attacks.load, no score cache carried over), a fresh results
log, the same samples and attacks on every side; the local victim's load is timed with its
run (each Ray worker loads its own copy inside the timed map); one untimed local score first
brings the imports and the model files into memory for every side alike. The Ray instance is started
once (its start is reported apart) and reused. Sides alternate per repeat (local, ray-1,
ray-2, then again), medians over ``--repeats``. Reported: wall seconds, rows/s, and the steady
rate after the first sample came back (what an added worker buys once the workers are up);
ratios against the local backend in the same run; and checks that every side's rows are the
local rows (exactly, and in outcome, verdicts and texts, with the largest score difference).

``overhead``: ``--units`` no-op units (a worker method that returns its argument) through the
local executor and through 1 Ray worker: the Ray time per unit is the cost a unit pays for
being shipped, scheduled and returned (plus the one-time actor start, reported apart).

    .venv/bin/python benchmarks/ray_scaling.py [--json OUT.json] campaign --metric bertscore --samples 24
    .venv/bin/python benchmarks/ray_scaling.py [--json OUT.json] overhead --units 2000
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

ATTACKS = ("generic-hello", "reversed-words", "repeat-words", "previous-utterance-prefix", "judge-master-keys")


class Echo:
    """A worker whose unit costs nothing: what is left is the executor's own cost."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def run(self, unit: int) -> int:
        return unit


def timed_campaign(side: str, metric: str, options: dict[str, str], samples: list[Any], budget: int,
                   folder: Path) -> dict[str, Any]:
    from robusteval import attacks, execution, metrics
    from robusteval.attacks.runner import run_attacks

    executor = execution.load("local") if side == "local" else execution.load("ray", workers=int(side[-1]))
    start = time.perf_counter()
    first: list[float] = []
    victim = metrics.load(metric, **options)  # fresh: no cache from an earlier side
    chosen = [attacks.load(a) for a in ATTACKS]

    with execution.use(executor):
        log_path = folder / f"{side}.jsonl"
        original = executor.map

        def map_watch(*args: Any, **kw: Any) -> Any:
            for item in original(*args, **kw):
                if not first:
                    first.append(time.perf_counter())
                yield item

        executor.map = map_watch  # type: ignore[method-assign]
        rows = list(run_attacks(samples, chosen, victim, log_path, progress=False, budget=budget))
    wall = time.perf_counter() - start
    steady_rows = len(rows) - len(ATTACKS)
    return {"side": side, "wall_s": wall, "rows": len(rows), "rows_per_s": len(rows) / wall,
            "steady_rows_per_s": steady_rows / (wall - (first[0] - start)) if first and wall > first[0] - start
            else None, "first_sample_s": first[0] - start if first else None,
            "rows_digest": {r["key"]: {k: v for k, v in r.items() if k != "wall_time"} for r in rows}}


def campaign(args: argparse.Namespace) -> dict[str, Any]:
    import ray

    from robusteval import data, metrics

    samples = data.load(args.dataset, args.data_dir)[: args.samples]
    # untimed: the imports and the model files into memory, for every side alike
    metrics.load(args.metric, **args.options).score(samples[:1])
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    ray_start = time.perf_counter() - t0
    sides = ["local", "ray-1", "ray-2"]
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for side in sides:
                folder = Path(tmp) / f"{rep}"
                folder.mkdir(exist_ok=True)
                runs[side].append(timed_campaign(side, args.metric, args.options, samples, args.budget, folder))
                r = runs[side][-1]
                print(f"  repeat {rep} {side:<6} {r['wall_s']:7.2f} s  {r['rows_per_s']:6.2f} rows/s  steady "
                      f"{r['steady_rows_per_s'] or float('nan'):6.2f} rows/s", flush=True)
    ray.shutdown()
    local_rows = runs["local"][0]["rows_digest"]
    same = all(r["rows_digest"] == local_rows for s in sides for r in runs[s])

    def verdicts(rows: dict[str, Any]) -> dict[str, Any]:
        return {k: (r["outcome"], r["success"], r["adversarial"]) for k, r in rows.items()}

    same_verdicts = all(verdicts(r["rows_digest"]) == verdicts(local_rows) for s in sides for r in runs[s])
    worst = max(abs((r["rows_digest"][k]["victim_after"] or 0.0) - (local_rows[k]["victim_after"] or 0.0))
                for s in sides for r in runs[s] for k in local_rows)
    table = {}
    for s in sides:
        med = {k: statistics.median(r[k] for r in runs[s]) for k in ("wall_s", "rows_per_s", "steady_rows_per_s")}
        table[s] = {**{k: round(v, 3) for k, v in med.items()}, "rows": runs[s][0]["rows"],
                    "first_sample_s": round(statistics.median(r["first_sample_s"] for r in runs[s]), 3)}
    for s in sides:
        for k in ("rows_per_s", "steady_rows_per_s"):
            table[s][f"{k}_vs_local"] = round(table[s][k] / table["local"][k], 3)
        table[s]["steady_vs_ray1"] = round(table[s]["steady_rows_per_s"] / table["ray-1"]["steady_rows_per_s"], 3)
    return {"metric": args.metric, "options": args.options, "dataset": args.dataset, "samples": len(samples),
            "attacks": list(ATTACKS), "budget": args.budget,
            "repeats": args.repeats, "ray_start_s": round(ray_start, 2), "rows_equal_local": same,
            "verdicts_and_texts_equal_local": same_verdicts, "largest_score_difference": worst, "sides": table}


def overhead(args: argparse.Namespace) -> dict[str, Any]:
    import ray

    from robusteval import execution

    units = list(range(args.units))
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    ray_start = time.perf_counter() - t0
    out: dict[str, Any] = {"units": args.units, "ray_start_s": round(ray_start, 2)}
    for side in ("local", "ray-1", "ray-2"):
        ex = execution.load("local") if side == "local" else execution.load("ray", workers=int(side[-1]))
        start = time.perf_counter()
        first = None
        got = []
        for _, v in ex.map(Echo, [side], "run", units):
            if first is None:
                first = time.perf_counter() - start
            got.append(v)
        wall = time.perf_counter() - start
        ex.release()
        assert sorted(got) == units
        assert first is not None
        per = (wall - first) / max(1, len(units) - 1)
        out[side] = {"wall_s": round(wall, 3), "first_unit_s": round(first, 3), "per_unit_ms": round(1000 * per, 3)}
        print(f"  {side:<6} {wall:7.3f} s  first unit {first:6.3f} s  then {1000 * per:7.3f} ms/unit", flush=True)
    ray.shutdown()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("campaign")
    c.add_argument("--metric", default="bertscore")
    c.add_argument("--option", action="append", default=[], help="KEY=VALUE metric option (repeatable)")
    c.add_argument("--dataset", default="quickstart-dialogue")
    c.add_argument("--data-dir", default=None)
    c.add_argument("--samples", type=int, default=24)
    c.add_argument("--budget", type=int, default=20)
    c.add_argument("--repeats", type=int, default=2)
    o = sub.add_parser("overhead")
    o.add_argument("--units", type=int, default=2000)
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args()
    args.options = dict(o.split("=", 1) for o in getattr(args, "option", []))
    result = campaign(args) if args.what == "campaign" else overhead(args)
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
