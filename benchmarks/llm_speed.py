"""The LLM path's speed (issue 16, item 4): the AdvEval loop per sample before and after, the
shared-prefix ablation, and the OpenAI-compatible client's concurrency gain.

``adveval``: AdvEval R+ (``adveval-pos``, the defaults: 8 candidates, top 10, at most 5
iterations, generator at temperature 1 with 96 new tokens) with the local SmolLM2 as the
generator, the gold (llm-judge, AdvEval's dialogue prompt, the mean of 8 ratings sampled at
temperature 1) and the victim (llm-judge, G-Eval overall quality, probability-weighted), on
the best-rated response of the first N DailyDialog-Zhao contexts. Each (code root, sample)
runs in a fresh process (cold: no score cache, no warm model) and the roots alternate per
sample, so a background load hits both alike. The model load is not timed. ``--root
NAME=PATH`` names a checkout to import (repeatable; default: ``before`` = a fresh clone of
HEAD, ``after`` = this checkout). Reports the wall time per sample, the iterations, why the
loop stopped, and the seconds in the gold and victim judges (the rest is the generator).

``prefix``: in one root, the gold's and the victim's scoring of the 8 candidates of one
iteration with the shared prompt prefix encoded once vs per row (``share_prefix``), 3
alternating repeats, median.

``concurrency``: ``generate`` over P prompts against a local OpenAI-compatible server that
answers each request after ``--latency`` seconds, one fresh process and a fresh cache per
run: the ``before`` root (one request at a time), then this checkout at each
``--concurrency``. Answers must come back identical and in input order.

    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/llm_speed.py adveval --samples 2
    ROBUSTEVAL_DATA=../shared/data .venv/bin/python benchmarks/llm_speed.py prefix
    .venv/bin/python benchmarks/llm_speed.py concurrency --prompts 64 --latency 0.1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent


# ---- workers (run inside a root, in a fresh process) ----------------------------------------

def _samples(n: int) -> list[Any]:
    from robusteval import data
    from robusteval.data.select import select

    return select(data.load("dailydialog-zhao"), "best-per-context")[:n]


def _timed(obj: Any, attr: str, acc: dict[str, float], key: str) -> None:
    """Wrap ``obj.attr`` so its seconds add up in ``acc[key]`` (signature kept for call_with)."""
    import functools

    fn = getattr(obj, attr)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[key] += time.perf_counter() - t0

    setattr(obj, attr, wrapper)


def worker_adveval(index: int) -> dict[str, Any]:
    import robusteval
    from robusteval import attacks, metrics
    from robusteval.attacks.victim import CachedVictim

    sample = _samples(index + 1)[index]
    victim_metric = metrics.load("llm-judge")
    attack = attacks.load("adveval-pos")
    gold = attack.gold_for(sample.task)
    attack.generator  # noqa: B018 -- resolve (load) the shared model before timing
    acc = {"gold": 0.0, "victim": 0.0}
    _timed(gold, "score", acc, "gold")
    _timed(victim_metric, "score", acc, "victim")
    victim = CachedVictim(victim_metric)
    t0 = time.perf_counter()
    result = attack.run(sample, victim)
    wall = time.perf_counter() - t0
    return {"root": str(Path(robusteval.__file__).parent.parent), "sample": sample.id, "wall_s": wall,
            "iterations": result.meta["iterations"], "stop": result.meta["stop"],
            "candidates": len(result.trace) - 1, "gold_s": acc["gold"], "victim_s": acc["victim"],
            "gold_after": result.gold_after, "victim_after": result.victim_after}


def worker_prefix(repeats: int) -> dict[str, Any]:
    from robusteval import attacks, metrics

    sample = _samples(1)[0]
    victim = metrics.load("llm-judge")
    attack = attacks.load("adveval-pos")
    gold = attack.gold_for(sample.task)
    backend = gold.backend
    others = [s.response for s in _samples(9)[1:]]  # 8 fluent texts as the iteration's candidates
    cands = [sample.with_response(t) for t in others]
    times: dict[tuple[str, bool], list[float]] = {}
    scores: dict[tuple[str, bool], list[list[float]]] = {}
    for _ in range(repeats):
        for share in (True, False):
            backend.share_prefix = share
            for name, metric in (("gold", gold), ("victim", victim)):
                t0 = time.perf_counter()
                got = metric.score(cands)
                times.setdefault((name, share), []).append(time.perf_counter() - t0)
                scores.setdefault((name, share), []).append([round(float(x), 4) for x in got])
    prompts = [gold.prompt(c) for c in cands]
    from robusteval.llm.decode import common_prefix

    seqs = backend.token_ids(prompts)
    return {"median": {f"{n}|{s}": statistics.median(v) for (n, s), v in times.items()},
            "same_scores": {n: scores[(n, True)] == scores[(n, False)] for n in ("gold", "victim")},
            "prompt_tokens": [len(s) for s in seqs], "shared_tokens": common_prefix(seqs)}


class _Slow(BaseHTTPRequestHandler):
    """Answers every chat completion after ``latency`` seconds, echoing the prompt."""

    latency = 0.1
    lock = threading.Lock()
    in_flight = 0
    max_in_flight = 0

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.max_in_flight = max(cls.max_in_flight, cls.in_flight)
        time.sleep(cls.latency)
        text = f"Score: 7 | {body['messages'][0]['content']}"
        data = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}).encode()
        with cls.lock:
            cls.in_flight -= 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def worker_client(url: str, prompts: int, concurrency: int) -> dict[str, Any]:
    import inspect

    from robusteval.llm.openai_compat import OpenAICompatible

    opts: dict[str, Any] = {"base_url": url, "api_key_env": "", "cache": tempfile.mkdtemp(prefix="llmspeed-")}
    if "max_concurrency" in inspect.signature(OpenAICompatible).parameters:
        opts["max_concurrency"] = concurrency
    be = OpenAICompatible("bench", **opts)
    asked = [f"prompt {i}" for i in range(prompts)]
    t0 = time.perf_counter()
    out = be.generate(asked, ids=[f"s{i}" for i in range(prompts)])
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "in_order": out == [[f"Score: 7 | {p}"] for p in asked], "calls": be.calls}


# ---- the driver -------------------------------------------------------------------------------

def run_worker(root: Path, *args: str, timeout: float = 3600) -> dict[str, Any]:
    """Run ``this file _worker ...`` with ``root`` first on the import path; its last line is JSON."""
    env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if env.get("ROBUSTEVAL_DATA"):  # the worker runs in root: a relative data folder would point elsewhere
        env["ROBUSTEVAL_DATA"] = str(Path(env["ROBUSTEVAL_DATA"]).resolve())
    proc = subprocess.run([sys.executable, str(HERE), "_worker", *args], env=env, cwd=root, timeout=timeout,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {args} in {root} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def roots(specs: list[str] | None) -> dict[str, Path]:
    if specs:
        return {name: Path(path).resolve() for name, _, path in (s.partition("=") for s in specs)}
    before = Path(tempfile.mkdtemp(prefix="llmspeed-before-"))
    subprocess.run(["git", "clone", "-q", str(REPO), str(before)], check=True)
    return {"before": before, "after": REPO}


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def bench_adveval(args: argparse.Namespace) -> None:
    where = roots(args.root)
    rows = []
    print(f"# AdvEval loop per sample ({load_line()} at start)")
    for i in range(args.samples):
        names = list(where) if i % 2 == 0 else list(where)[::-1]
        for name in names:
            r = run_worker(where[name], "adveval", str(i))
            r["name"] = name
            rows.append(r)
            print(json.dumps(r), flush=True)
    print(f"\n({load_line()} at the end)\n")
    print("| code | sample | wall s | iterations | stop | candidates scored | gold s | victim s | generator + rest s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rest = r["wall_s"] - r["gold_s"] - r["victim_s"]
        print(f"| {r['name']} | {r['sample']} | {r['wall_s']:.1f} | {r['iterations']} | {r['stop']} | "
              f"{r['candidates']} | {r['gold_s']:.1f} | {r['victim_s']:.1f} | {rest:.1f} |")
    for name in where:
        mine = [r for r in rows if r["name"] == name]
        per_it = sum(r["wall_s"] for r in mine) / max(1, sum(r["iterations"] for r in mine))
        print(f"\n{name}: mean {statistics.mean(r['wall_s'] for r in mine):.1f} s per sample, "
              f"{per_it:.1f} s per iteration")


def bench_prefix(args: argparse.Namespace) -> None:
    name, path = next(iter(roots(args.root).items())) if args.root else ("after", REPO)
    r = run_worker(path, "prefix", str(args.repeats))
    print(f"# shared prefix on/off in {name} ({load_line()}); prompt tokens {r['prompt_tokens']}, "
          f"shared by all {r['shared_tokens']}\n")
    print("| scoring 8 candidates | shared prefix s | per row s | ratio | same scores |")
    print("|---|---|---|---|---|")
    for metric in ("gold", "victim"):
        on, off = r["median"][f"{metric}|True"], r["median"][f"{metric}|False"]
        print(f"| {metric} | {on:.2f} | {off:.2f} | {off / on:.2f}x | {r['same_scores'][metric]} |")


def bench_concurrency(args: argparse.Namespace) -> None:
    where = roots(args.root)
    _Slow.latency = args.latency
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    runs = [("before", where.get("before"), 1)] if "before" in where else []
    after = where.get("after", REPO)
    runs += [("after", after, c) for c in args.concurrency]
    print(f"# {args.prompts} prompts, {args.latency * 1000:.0f} ms per request ({load_line()})\n")
    print("| code | max_concurrency | wall s | requests/s | speed-up vs before | max in flight | in order |")
    print("|---|---|---|---|---|---|---|")
    base = None
    for name, root, c in runs:
        _Slow.max_in_flight = 0
        r = run_worker(root, "client", url, str(args.prompts), str(c))
        base = base or r["wall_s"]
        print(f"| {name} | {c if name == 'after' else '- (sequential)'} | {r['wall_s']:.2f} | "
              f"{args.prompts / r['wall_s']:.1f} | {base / r['wall_s']:.1f}x | {_Slow.max_in_flight} | "
              f"{r['in_order']} |", flush=True)
    server.shutdown()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        kind, rest = sys.argv[2], sys.argv[3:]
        out = {"adveval": lambda: worker_adveval(int(rest[0])), "prefix": lambda: worker_prefix(int(rest[0])),
               "client": lambda: worker_client(rest[0], int(rest[1]), int(rest[2]))}[kind]()
        print(json.dumps(out))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("adveval", help="AdvEval loop per sample, before vs after")
    a.add_argument("--samples", type=int, default=2)
    p = sub.add_parser("prefix", help="shared prefix on vs off (one root)")
    p.add_argument("--repeats", type=int, default=3)
    c = sub.add_parser("concurrency", help="OpenAI-compatible client, sequential vs concurrent")
    c.add_argument("--prompts", type=int, default=64)
    c.add_argument("--latency", type=float, default=0.1)
    c.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 16])
    for parser in (a, p, c):
        parser.add_argument("--root", action="append", metavar="NAME=PATH",
                            help="a checkout to import (repeatable); default before=clone of HEAD, after=.")
    args = ap.parse_args()
    if args.what in ("adveval", "prefix") and not os.environ.get("ROBUSTEVAL_DATA"):
        print("set ROBUSTEVAL_DATA to the data folder", file=sys.stderr)
        return 2
    {"adveval": bench_adveval, "prefix": bench_prefix, "concurrency": bench_concurrency}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
