"""``robusteval compare``: attack each victim metric plain, guarded, adversarially trained and
guarded + trained; ASR per family, human correlation per variant, detector false positives
and ROC curves. Writes ``report.json`` (schema: docs/compare.md), ``report.md`` and a
self-contained ``report.html`` under ``--out-dir``; every stage logs append-only there and
``--resume`` continues a killed run. ``--report-only`` re-renders ``report.md`` and
``report.html`` of a finished run from its ``report.json`` (``--screenshot PNG`` pictures it).

``robusteval quickstart``: the same on robusteval's own small rated dialogues and summaries
(package data; no network, no data folder): trains a small MiniLM evaluator, attacks it,
guards it, hardens it and compares (``configs/compare/quickstart.yaml``).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from robusteval.cli.common import Command
from robusteval.config.compare import CompareCommand, Tolerance
from robusteval.errors import RobustevalError

QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "compare" / "quickstart.yaml"


def _run(cfg: CompareCommand, command: str) -> int:
    from robusteval.compare import compare
    from robusteval.compare.report_md import HEADLINE, failure_warnings, headline_rows, table

    assert cfg.out_dir is not None  # validated
    out = Path(cfg.out_dir)
    start = time.perf_counter()
    tol = cfg.tolerance or Tolerance()
    if cfg.seeds:
        return _run_seeds(cfg, out, tol, command, start)
    if (out / "seeds.json").is_file():
        raise RobustevalError(f"{out} holds a --seeds run (seeds.json): resume it with --seeds, or resume one seed "
                              f"with --out-dir {out}/seed-<k> --seed <k>")
    report = compare(cfg.comparison(), out, resume=cfg.resume, tolerance=tol)
    print()
    print("\n".join(table(HEADLINE, headline_rows(report, tol))))
    for line in failure_warnings(report):
        print(f"warning: {line}")
    print(f"\n{command} finished in {time.perf_counter() - start:.0f} s")
    print(f"report: {out / 'report.html'}  (also {out / 'report.md'}, {out / 'report.json'})")
    return 0


def _run_seeds(cfg: CompareCommand, out: Path, tol: Tolerance, command: str, start: float) -> int:
    """``--seeds``: one ordinary run per seed in ``out/seed-<k>``, then the seeds side by side
    (:mod:`robusteval.compare.seeds`)."""
    from robusteval.compare import compare
    from robusteval.compare.pipeline import check_seed_splits
    from robusteval.compare.seeds import across_seeds, markdown
    from robusteval.results import exclusive_folder, provenance, write_json

    assert cfg.seeds
    if (out / "fingerprint.json").is_file():
        raise RobustevalError(f"{out} holds a single-seed run; give --seeds runs their own --out-dir")
    earlier = sorted(p.name for p in out.glob("seed-*")) + (["seeds.json"] if (out / "seeds.json").is_file() else [])
    if earlier and not cfg.resume:
        raise FileExistsError(f"{out} holds an earlier --seeds run ({', '.join(earlier)}): pass --resume to continue "
                              "it, or choose another --out-dir")
    check_seed_splits(cfg.comparison(), cfg.seeds)  # a split one seed cannot use fails before any seed runs
    reports = {}
    with contextlib.ExitStack() as held:
        # every seed's folder under its own lock too, from the start: a single-seed run of one
        # (--out-dir <out>/seed-<k>, as the refusal above advises) must not write it while this
        # run does, nor make this run fail hours later when it reaches that seed
        for k in cfg.seeds:
            held.enter_context(exclusive_folder(out / f"seed-{k}"))
        for k in cfg.seeds:
            print(f"== seed {k}: {out / f'seed-{k}'}")
            reports[k] = compare(cfg.comparison(seed=k), out / f"seed-{k}", resume=cfg.resume, tolerance=tol)
    rows = across_seeds(reports)
    recorded = {k: v for k, v in cfg.raw.items() if k != "seed"}  # each seed's own is in its report
    write_json(out / "seeds.json", {"seeds": list(cfg.seeds), "rows": rows,
                                    "provenance": provenance({**recorded, "seeds": list(cfg.seeds)})})
    text = markdown(rows, list(cfg.seeds))
    (out / "seeds.md").write_text(text, encoding="utf-8")
    print()
    print(text)
    print(f"{command} finished {len(cfg.seeds)} seeds in {time.perf_counter() - start:.0f} s")
    print(f"seeds: {out / 'seeds.md'} (also {out / 'seeds.json'}); each seed's report in {out}/seed-<k>/")
    return 0


def report_only(cfg: CompareCommand) -> int:
    """``--report-only``: report.md and report.html of the finished run in ``--out-dir`` again,
    from its report.json (:func:`robusteval.compare.render.render_report`)."""
    from robusteval.compare.render import render_report, screenshot

    assert cfg.out_dir is not None  # validated
    out = Path(cfg.out_dir)
    if not (out / "report.json").is_file():
        raise RobustevalError(f"{out / 'report.json'} not found: --report-only re-renders a finished run "
                              "(run `robusteval compare` first)")
    render_report(out, cfg.data_dir, tol=cfg.tolerance)  # None: the tolerance the run recorded
    print(f"rendered {out / 'report.html'} and {out / 'report.md'} from {out / 'report.json'}")
    if cfg.screenshot:
        print(f"screenshot {screenshot(out / 'report.html', cfg.screenshot)}")
    return 0


def run(cfg: CompareCommand) -> int:
    return report_only(cfg) if cfg.report_only else _run(cfg, "compare")


def run_quickstart(cfg: CompareCommand) -> int:
    return report_only(cfg) if cfg.report_only else _run(cfg, "quickstart")


def quickstart_argv(argv: list[str]) -> list[str]:
    """``robusteval quickstart`` is ``compare --config configs/compare/quickstart.yaml
    --out-dir runs/quickstart`` unless told otherwise."""
    given = {a.partition("=")[0] for a in argv}
    head = [] if "--config" in given else ["--config", str(QUICKSTART)]
    if "--config" not in given and not QUICKSTART.is_file():
        raise RobustevalError(f"config {QUICKSTART} not found (the quickstart config ships with the repository "
                              "checkout; pass --config)")
    if not given & {"--out-dir", "--out_dir"}:
        head += ["--out_dir", "runs/quickstart"]
    return head + argv


COMMANDS = [
    Command("compare", "pre/post-defense comparison with an HTML report", run, CompareCommand, __doc__),
    Command("quickstart", "offline demo: train, attack, guard, harden, compare", run_quickstart, CompareCommand,
            __doc__),
]
