"""``robusteval compare --seeds``: one run per seed, then the seeds side by side (counts and
means computed in robusteval.compare.seeds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from robusteval.cli.main import main
from robusteval.compare.seeds import across_seeds, markdown, relative_change


def _rate(k: int, m: int) -> dict:
    return {"successes": k, "n": m, "asr": k / m if m else None, "ci": [0.0, 1.0] if m else None}


def _entry(minus: tuple[int, int], plus: tuple[int, int], rho: float | None) -> dict:
    return {"available": True, "by_direction": {"R-": _rate(*minus), "R+": _rate(*plus)}, "mean_spearman": rho}


def _report(**variants: tuple) -> dict:
    return {"suites": {"s": {"victims": {"v": {"variants": {k: _entry(*v) for k, v in variants.items()}}}}}}


def test_across_seeds_means_ranges_and_change_vs_plain() -> None:
    reports = {0: _report(plain=((10, 20), (1, 4), 0.30), trained=((5, 20), (2, 4), 0.28), guarded=((9, 20), (0, 4), 0.3)),
               3: _report(plain=((8, 10), (3, 4), 0.20), trained=((2, 10), (4, 4), 0.25))}
    rows = across_seeds(reports)
    # a variant missing from one seed is left out (no mean over fewer seeds than the header says)
    assert [r["variant"] for r in rows] == ["plain", "trained"]
    plain, trained = rows
    assert plain["across"]["R-"] == {"mean": pytest.approx((0.5 + 0.8) / 2), "min": 0.5, "max": 0.8, "seeds": 2}
    assert trained["across"]["R+"] == {"mean": pytest.approx((0.5 + 1.0) / 2), "min": 0.5, "max": 1.0, "seeds": 2}
    assert trained["per_seed"][0]["r_minus_change_vs_plain"] == pytest.approx(-0.5)  # 25 % vs 50 %
    assert trained["per_seed"][3]["r_minus_change_vs_plain"] == pytest.approx(-0.75)  # 20 % vs 80 %
    change = trained["across"]["r_minus_change_vs_plain"]
    # of the means: (22.5 % - 65 %) / 65 %; the per-seed ratios give the range
    assert change == {"of_means": pytest.approx((0.225 - 0.65) / 0.65, abs=1e-6), "min": -0.75, "max": -0.5,
                      "seeds": 2}
    assert plain["per_seed"][0]["r_minus_change_vs_plain"] is None and plain["across"]["r_minus_change_vs_plain"] is None
    assert trained["across"]["mean_spearman"] == {"mean": pytest.approx(0.265), "min": 0.25, "max": 0.28, "seeds": 2}
    assert trained["per_seed"][3]["R-"]["successes"] == 2 and trained["per_seed"][3]["R-"]["n"] == 10
    md = markdown(rows, [0, 3])
    assert "R- ASR % seed 3" in md and "25.0 [0.0, 100.0] (5/20)" in md
    assert "-65.4 (per seed -75.0 to -50.0)" in md and "75.0 [50.0, 100.0]" in md  # trained's R+ mean [min, max]
    assert "0.280, 0.250" in md


def test_a_seed_without_a_value_is_counted_not_hidden() -> None:
    """Plain at 0 % in two of three seeds: the per-seed ratio exists in one seed only, and the
    change of the means says what all three seeds did (training made things worse on average)."""
    reports = {0: _report(plain=((10, 20), (0, 0), 0.3), trained=((5, 20), (0, 0), None)),
               1: _report(plain=((0, 20), (0, 0), 0.3), trained=((4, 20), (1, 2), 0.3)),
               2: _report(plain=((0, 20), (0, 0), 0.3), trained=((4, 20), (0, 0), 0.3))}
    trained = across_seeds(reports)[1]
    change = trained["across"]["r_minus_change_vs_plain"]
    assert change["seeds"] == 1 and change["min"] == change["max"] == pytest.approx(-0.5)
    assert change["of_means"] == pytest.approx((13 / 60 - 10 / 60) / (10 / 60), abs=1e-5)  # +30 %: worse
    assert trained["across"]["R+"]["seeds"] == 1 and trained["across"]["mean_spearman"]["seeds"] == 2
    md = markdown(across_seeds(reports), [0, 1, 2])
    assert "30.0 (per seed -50.0 to -50.0; 1 of 3 seeds)" in md
    assert "50.0 [50.0, 50.0] (1 of 3 seeds)" in md and "0.300 [0.300, 0.300] (2 of 3 seeds)" in md


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
    seeds = json.loads((out / "seeds.json").read_text())
    assert seeds["seeds"] == [0, 1] and {r["variant"] for r in seeds["rows"]} == {"plain", "guarded"}
    assert "seed" not in seeds["provenance"]["config"]
    for k in (0, 1):
        report = json.loads((out / f"seed-{k}" / "report.json").read_text())
        fingerprint = json.loads((out / f"seed-{k}" / "fingerprint.json").read_text())
        assert report["seed"] == k and report["provenance"]["config"]["seed"] == k
        assert fingerprint["config"]["seed"] == k and "seeds" not in fingerprint["config"]
        for row in seeds["rows"]:  # the table holds each seed's own numbers
            entry = report["suites"]["summary"]["victims"][row["victim"]]["variants"][row["variant"]]
            assert row["per_seed"][str(k)]["R-"] == entry["by_direction"]["R-"]
    assert "R- ASR % seed 1" in (out / "seeds.md").read_text()
    assert "finished 2 seeds" in capsys.readouterr().out
    # each seed resumes on its own (under a longer list, or as a single run); without --resume
    # nothing is overwritten; a single run does not go into a --seeds folder
    assert main(["compare", "--config", str(path), "--out-dir", str(out), "--seeds", "[0, 1, 2]", "--resume"]) == 0
    assert json.loads((out / "seeds.json").read_text())["seeds"] == [0, 1, 2]
    assert main(["compare", "--config", str(path), "--out-dir", str(out / "seed-1"), "--seed", "1", "--resume"]) == 0
    assert main(["compare", "--config", str(path), "--out-dir", str(out), "--seeds", "[3]"]) == 2
    assert main(["compare", "--config", str(path), "--out-dir", str(out)]) == 2
    assert main(["compare", "--config", str(path), "--out-dir", str(out), "--seeds", "[1, 1]"]) == 2
    err = capsys.readouterr().err
    assert "earlier --seeds run" in err and "holds a --seeds run" in err and "distinct seeds" in err


def _dot_trigger_config(folder: Path, name: str, test_fraction: float) -> Path:
    """A small compare config file: ROUGE-L under one trigger attack on quickstart-summary."""
    cfg = {"name": name, "budget": 2, "n_boot": 10, "guard": {"detectors": ["nonalnum"], "policy": "floor",
                                                     "calibrate": {"clean": ["quickstart-references"]}},
           "suites": [{"name": "summary", "dataset": "quickstart-summary",
                       "split": {"val_fraction": 0.0, "test_fraction": test_fraction},
                       "attacks": ["dot-trigger"], "victims": ["rougeL"]}]}
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_seed_whose_split_cannot_work_is_refused_before_any_seed_runs(tmp_path: Path, capsys) -> None:
    """quickstart-summary's 12 contexts at test_fraction 0.1: seed 0 has two test contexts,
    seed 2 none. The run stops before seed 0 starts, not after it."""
    path = _dot_trigger_config(tmp_path, "s", test_fraction=0.1)
    out = tmp_path / "run"
    assert main(["compare", "--config", str(path), "--out-dir", str(out), "--seeds", "[0, 2]"]) == 2
    err = capsys.readouterr().err
    assert "compare, suite summary: the split of quickstart-summary (12 contexts" in err
    assert "seed 2) leaves test without a context" in err
    assert not (out / "seed-0").exists()


def test_a_resume_with_another_data_folder_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    """The data folder from $ROBUSTEVAL_DATA is part of the run's fingerprint (resolved: a
    relative and an absolute spelling are one folder)."""
    path = _dot_trigger_config(tmp_path, "d", test_fraction=0.5)
    (tmp_path / "data").mkdir()
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ROBUSTEVAL_DATA", "data")
    assert main(["compare", "--config", str(path), "--out-dir", "run"]) == 0
    monkeypatch.setenv("ROBUSTEVAL_DATA", str(tmp_path / "data"))
    assert main(["compare", "--config", str(path), "--out-dir", "run", "--resume"]) == 0
    monkeypatch.setenv("ROBUSTEVAL_DATA", str(tmp_path / "other"))
    capsys.readouterr()
    assert main(["compare", "--config", str(path), "--out-dir", "run", "--resume"]) == 2
    assert "data_dir" in capsys.readouterr().err


def test_a_model_seed_other_than_the_runs_is_refused() -> None:
    from robusteval.compare.config import TrainSpec
    from robusteval.compare.learned import model_seeded
    from robusteval.errors import RobustevalError

    class Cfg:
        seed = 2

    assert model_seeded(TrainSpec(model={"lr": 0.1}), Cfg())["seed"] == 2  # type: ignore[arg-type]
    assert model_seeded(TrainSpec(model={"seed": 2}), Cfg())["seed"] == 2  # type: ignore[arg-type]
    with pytest.raises(RobustevalError, match="top-level seed"):
        model_seeded(TrainSpec(model={"seed": 0}), Cfg())  # type: ignore[arg-type]


def test_a_seed_folder_another_process_writes_is_refused(tmp_path: Path, capsys) -> None:
    """A --seeds run locks each seed's folder as it runs it, besides its own: a single-seed run
    of ``<out>/seed-0`` (what the refusal of a single run in a --seeds folder advises) and the
    --seeds run must not append to one folder's logs at the same time."""
    from test_cli import held_elsewhere

    path = _dot_trigger_config(tmp_path, "s", test_fraction=0.5)
    out = tmp_path / "run"
    for busy in (0, 1):  # the last seed too: refused before the first seed runs, not hours later
        with held_elsewhere(out / f"seed-{busy}"):  # --resume: the holder's folder is there already
            assert main(["compare", "--config", str(path), "--out-dir", str(out), "--seeds", "[0, 1]",
                         "--resume"]) == 2
        err = capsys.readouterr().err
        assert f"{out / f'seed-{busy}'} is being written by another robusteval process" in err
        assert not (out / "seed-0" / "fingerprint.json").exists() and not (out / "seed-1").exists()
