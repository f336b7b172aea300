"""Pre/post-defense comparison: ``compare(config, out_dir)`` writes ``report.json``,
``report.md`` and a self-contained ``report.html`` under ``out_dir`` (see docs/compare.md for
the report schema and :mod:`robusteval.compare.pipeline` for what is measured)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robusteval.compare.config import CompareConfig, parse
from robusteval.compare.pipeline import VARIANTS, run_compare
from robusteval.config.compare import Tolerance

__all__ = ["VARIANTS", "CompareConfig", "Tolerance", "compare", "parse", "run_compare"]


def compare(config: dict[str, Any] | CompareConfig, out_dir: str | Path, resume: bool = False,
            data_dir: str | None = None, tolerance: Tolerance | None = None) -> dict[str, Any]:
    """Run the comparison and write the three reports; returns the report. ``tolerance`` (default
    :class:`Tolerance`'s) decides the verdicts of report.md and report.html; report.json records it."""
    import dataclasses

    from robusteval.compare.report_html import render
    from robusteval.compare.report_md import markdown
    from robusteval.results import provenance, write_json

    cfg = config if isinstance(config, CompareConfig) else parse(config)
    out = Path(out_dir)
    report = run_compare(cfg, out, resume=resume, data_dir=data_dir)
    tol = tolerance or Tolerance()
    report["provenance"] = {**provenance(cfg.raw), "tolerance": dataclasses.asdict(tol)}
    write_json(out / "report.json", report)
    (out / "report.md").write_text(markdown(report, tol), encoding="utf-8")
    (out / "report.html").write_text(render(report, tol), encoding="utf-8")
    return report
