"""``robusteval compare --seeds``: one run per seed, then the seeds side by side (counts and
means computed in robusteval.compare.seeds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from robusteval.cli.main import main
from robusteval.compare.seeds import across_seeds, markdown, relative_change


def _entry(successes: int, n: int, rho: float, plus: tuple[int, int] = (1, 4)) -> dict:
    def rate(k: int, m: int) -> dict:
        return {"successes": k, "n": m, "asr": k / m, "ci": [0.0, 1.0]}

    return {"available": True, "by_direction": {"R-": rate(successes, n), "R+": rate(*plus)}, "mean_spearman": rho}


def _report(plain: tuple[int, int], trained: tuple[int, int], rho: tuple[float, float], guarded: bool = True) -> dict:
    variants = {"plain": _entry(*plain, rho[0]), "trained": _entry(*trained, rho[1])}
    if guarded:
        variants["guarded"] = {**_entry(*plain, rho[0]), "available": True}
    return {"suites": {"s": {"victims": {"v": {"variants": variants}}}}}


def test_across_seeds_means_ranges_and_change_vs_plain() -> None:
    reports = {0: _report((10, 20), (5, 20), (0.30, 0.28)), 3: _report((8, 10), (2, 10), (0.20, 0.25), guarded=False)}
    rows = across_seeds(reports)
    # a variant missing from one seed is left out (no mean over fewer seeds than the header says)
    assert [(r["variant"]) for r in rows] == ["plain", "trained"]
    plain, trained = rows
    assert plain["across"]["R-"] == {"mean": pytest.approx((0.5 + 0.8) / 2), "min": 0.5, "max": 0.8, "seeds": 2}
    assert trained["per_seed"][0]["r_minus_change_vs_plain"] == pytest.approx(-0.5)  # 25 % vs 50 %
    assert trained["per_seed"][3]["r_minus_change_vs_plain"] == pytest.approx(-0.75)  # 20 % vs 80 %
    assert trained["across"]["r_minus_change_vs_plain"]["mean"] == pytest.approx(-0.625)
    assert plain["per_seed"][0]["r_minus_change_vs_plain"] is None and plain["across"]["r_minus_change_vs_plain"] is None
    assert trained["across"]["mean_spearman"] == {"mean": pytest.approx(0.265), "min": 0.25, "max": 0.28, "seeds": 2}
    assert trained["per_seed"][3]["R-"]["successes"] == 2 and trained["per_seed"][3]["R-"]["n"] == 10
    md = markdown(rows, [0, 3])
    assert "R- ASR % seed 3" in md and "25.0 [0.0, 100.0] (5/20)" in md and "-62.5 [-75.0, -50.0]" in md


def test_relative_change_is_undefined_against_zero() -> None:
    assert relative_change(0.2, 0.0) is None and relative_change(None, 0.5) is None
    assert relative_change(0.35, 0.5) == pytest.approx(-0.3)


def test_seeds_run_one_comparison_each_and_write_the_table(tmp_path: Path, capsys) -> None:
    cfg = {"name": "seeds", "budget": 4, "n_boot": 20,
           "guard": {"detectors": ["nonalnum", "speaker_tag"], "policy": "floor",
                     "calibrate": {"clean": ["quickstart-references"], "target_fpr": 0.05}},
           "suites": [{"name": "summary", "dataset": "quickstart-summary",
                       "split": {"val_fraction": 0.0, "test_fraction": 0.5},
                       "attacks": ["aspect-sentence-deletion", "dot-trigger"], "victims": ["rougeL"]}]}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run"
    assert main(["compare", "--config", str(path), "--out-dir", str(out), "--seeds", "[0, 1]"]) == 0
    for k in (0, 1):
        report = json.loads((out / f"seed-{k}" / "report.json").read_text())
        assert report["seed"] == k
    seeds = json.loads((out / "seeds.json").read_text())
    assert seeds["seeds"] == [0, 1] and {r["variant"] for r in seeds["rows"]} == {"plain", "guarded"}
    assert "R- ASR % seed 1" in (out / "seeds.md").read_text()
    assert "finished 2 seeds" in capsys.readouterr().out
    # each seed resumes on its own; a second run without --resume is refused
    assert main(["compare", "--config", str(path), "--out-dir", str(out), "--seeds", "[0, 1]", "--resume"]) == 0
    assert main(["compare", "--config", str(path), "--out-dir", str(out), "--seeds", "[0, 1]"]) == 2
    assert main(["compare", "--config", str(path), "--out-dir", str(out), "--seeds", "[1, 1]"]) == 2
