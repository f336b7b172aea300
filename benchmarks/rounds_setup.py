"""What the round benchmarks (``null_rounds``, ``round_settings``, ``hardening_rounds``) share: their
command line and the compare config's first suite with its learned victim."""

from __future__ import annotations

import argparse
from typing import Any

from robusteval.compare.config import CompareConfig, SuiteSpec, TrainSpec
from robusteval.config.compare import parse_file


def parser(doc: str | None, base: bool) -> argparse.ArgumentParser:
    """``--config``, ``--out-dir``, ``--resume`` and, with ``base``, ``--base``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    if base:
        ap.add_argument("--base", required=True, help="the trained base export")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--resume", action="store_true")
    return ap


def first_suite(args: Any) -> tuple[CompareConfig, SuiteSpec, TrainSpec | None]:
    """The parsed config, its first suite and that suite's first ``train:`` block (or None)."""
    cfg = parse_file(args.config)
    suite = cfg.suites[0]
    return cfg, suite, next((v.train for v in suite.victims if v.train is not None), None)
