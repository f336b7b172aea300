"""The Ray backend (issue 18) on a local 2-worker Ray cluster: an attack campaign gives the
local backend's rows; a worker killed mid-run and a driver killed mid-run lose and duplicate
nothing; scoring and detection run there too; the CLI takes --backend ray."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ray_helpers import ATTACKS, CrashOnce, make_samples
from toy import LengthMetric

from robusteval import attacks, execution
from robusteval.attacks.runner import run_attacks
from robusteval.cli.main import main
from robusteval.errors import RobustevalError
from robusteval.results import read_jsonl, score_with_log

ray = pytest.importorskip("ray", reason="the Ray backend is the optional extra: pip install 'robusteval[ray]'")
TESTS = str(Path(__file__).resolve().parent)
VOLATILE = ("wall_time",)  # seconds differ from run to run; everything else must not


@pytest.fixture(scope="module")
def cluster():
    """A local Ray instance with 2 CPUs (so 2 workers); its workers import tests/ modules."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = TESTS + (os.pathsep + old if old else "")  # the raylet and its workers inherit it
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def rows_by_key(rows) -> dict[str, dict]:
    """Rows by key, each once, without their wall time; a fitting sample's row (left out of
    every ASR) without its call counts too: the driver's cache is warm from fitting, a
    worker's is not (robusteval.attacks.victim.CachedVictim.__reduce__)."""
    out = {}
    for r in rows:
        if "_fingerprint" in r:
            continue
        assert r["key"] not in out, f"duplicated row {r['key']}"
        fitting = r["meta"].get("fitting_sample")
        drop = (*VOLATILE, "model_calls", "cache_hits") if fitting else VOLATILE
        out[r["key"]] = {k: v for k, v in r.items() if k not in drop}
        if fitting:
            out[r["key"]]["meta"] = {k: v for k, v in r["meta"].items() if k != "victim_counters"}
    return out


def campaign(path: Path, victim, n: int = 12) -> dict[str, dict]:
    """``path``'s stem names the run's own folder (its fitted.json too: a fitted attack found
    there would be loaded, not fitted, and its fitting scores would not be in the cache)."""
    path = path.parent / path.stem / "results.jsonl"
    chosen = [attacks.load(a) for a in ATTACKS]
    return rows_by_key(run_attacks(make_samples(n), chosen, victim, path, progress=False, budget=20))


def test_a_campaign_on_two_ray_workers_gives_the_local_rows(cluster, tmp_path) -> None:
    local = campaign(tmp_path / "local.jsonl", LengthMetric())
    ex = execution.load("ray", workers=2)
    with execution.use(ex):
        remote = campaign(tmp_path / "ray.jsonl", LengthMetric())
    assert len(local) == 12 * len(ATTACKS) and remote == local  # same rows, same verdicts, same call counts
    assert any(r["success"]["beats_reference"] for r in remote.values())  # a campaign that fools the victim
    assert ex.describe()["workers"] == 2 and not ex.started_here  # it joined the running cluster


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(cluster, tmp_path) -> None:
    marker = tmp_path / "crashed"
    local = campaign(tmp_path / "local.jsonl", CrashOnce(str(marker)))  # the driver never crashes
    assert not marker.exists()
    with execution.use(execution.load("ray", workers=2, retries=2)):
        remote = campaign(tmp_path / "ray.jsonl", CrashOnce(str(marker)))
    assert marker.exists() and int(marker.read_text()) != os.getpid()  # a worker process did die
    assert remote == local


def test_a_unit_whose_worker_always_dies_is_named_and_finished_rows_stay(cluster, tmp_path) -> None:
    with execution.use(execution.load("ray", workers=1, retries=0)), \
            pytest.raises(RobustevalError, match=r"sample 's5' failed on a Ray worker that died 1 times"):
        campaign(tmp_path / "ray.jsonl", CrashOnce(str(tmp_path / "marker"), always=True))
    kept = rows_by_key(read_jsonl(tmp_path / "ray" / "results.jsonl"))
    assert kept and all(r["sample_id"] != "s5" for r in kept.values())  # finished samples are on disk


def test_worker_errors_come_back_as_the_same_exception(cluster, tmp_path) -> None:
    from robusteval.errors import InputError

    bad = make_samples(3)
    bad[1] = bad[1].with_response("\u200b")  # invisible-only text: the metric refuses it by name
    with pytest.raises(InputError) as local:
        score_with_log(LengthMetric(), bad, tmp_path / "local.jsonl", resume=False)
    with execution.use(execution.load("ray", workers=2)), pytest.raises(InputError) as remote:
        score_with_log(LengthMetric(), bad, tmp_path / "ray.jsonl", resume=False)
    assert str(remote.value) == str(local.value) and remote.value.sample_id == "s1"  # no remote traceback in it


def test_scoring_and_detection_on_ray_equal_local(cluster, tmp_path) -> None:
    from robusteval.detectors.calibrate import detect_logged

    from robusteval import detectors

    samples = make_samples(70)
    local = score_with_log(LengthMetric(), samples, tmp_path / "local.jsonl", resume=False, chunk=8)
    det = detectors.load("nonalnum")
    local_s = detect_logged(det, samples, chunk=8)
    with execution.use(execution.load("ray", workers=2)):
        remote = score_with_log(LengthMetric(), samples, tmp_path / "ray.jsonl", resume=False, chunk=8)
        remote_s = detect_logged(det, samples, chunk=8)
    np.testing.assert_array_equal(local, remote)
    np.testing.assert_array_equal(local_s, remote_s)
    assert rows_by_key_id(tmp_path / "ray.jsonl") == rows_by_key_id(tmp_path / "local.jsonl")


def rows_by_key_id(path: Path) -> dict[str, dict]:
    return {r["id"]: r for r in read_jsonl(path) if "id" in r}


def write_dataset(path: Path, n: int, no_context_every: int = 0) -> Path:
    """``make_samples(n)`` as a JSONL file; with ``no_context_every`` some rows have no context."""
    with path.open("w", encoding="utf-8") as fh:
        for i, s in enumerate(make_samples(n)):
            row = {"id": s.id, "response": s.response}
            if not (no_context_every and i % no_context_every == 0):
                row["context"] = list(s.context)
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def test_cli_attack_driver_killed_then_resumed_on_ray_equals_local(cluster, tmp_path) -> None:
    """``robusteval attack --backend ray --ray-address ...`` in a process killed mid-run; the
    same command with --resume finishes it: every row once, equal to a local run."""
    data = write_dataset(tmp_path / "data.jsonl", 30)
    args = ["attack", "--metric", "toy:LengthMetric", "--options.delay", "0.05", "--dataset", str(data),
            "--task", "dialogue", "--attacks", ",".join(ATTACKS[:4]), "--budget", "20"]
    out = tmp_path / "ray"
    env = {**os.environ, "PYTHONPATH": TESTS + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "robusteval.cli.main", *args, "--out-dir", str(out),
                             "--backend", "ray", "--ray-address", cluster, "--workers", "2"],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    log = out / "results.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text(encoding="utf-8").splitlines()) >= 1 + 4 * 6:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended before the kill: {proc.stderr.read().decode()[-2000:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = rows_by_key(read_jsonl(log))
    assert 4 * 6 <= len(partial) < 4 * 30, "the kill must land midway"
    assert main([*args, "--out-dir", str(out), "--backend", "ray", "--resume"]) == 0
    assert main([*args, "--out-dir", str(tmp_path / "local")]) == 0
    resumed, local = rows_by_key(read_jsonl(log)), rows_by_key(read_jsonl(tmp_path / "local" / "results.jsonl"))
    assert len(local) == 4 * 30 and resumed == local
    assert all(partial[k] == resumed[k] for k in partial)  # finished rows kept as they were


def test_cli_guard_calibrate_and_score_on_ray_equal_local(cluster, tmp_path) -> None:
    data = write_dataset(tmp_path / "rated.jsonl", 60)
    clean = write_dataset(tmp_path / "clean.jsonl", 60, no_context_every=3)  # context_copy: not applicable there
    runs = {}
    for side, extra in (("local", []), ("ray", ["--backend", "ray", "--workers", "2"])):
        out = tmp_path / side
        assert main(["guard", "calibrate", "--detectors", "nonalnum,speaker_tag,context_copy", "--clean", str(clean),
                     "--target-fpr", "0.2", "--out-dir", str(out / "guard"), *extra]) == 0
        assert main(["score", "--metric", "rougeL", "-o", "against=context", "--dataset", str(data), "--task",
                     "dialogue", "--guard", "nonalnum", "--guard-policy", "floor", "--out-dir", str(out / "score"),
                     *extra]) == 0
        table = json.loads((out / "guard" / "thresholds.json").read_text())
        assert table.pop("provenance")["execution"]["backend"] == side  # the backend really switched
        runs[side] = (table, rows_by_key_id(out / "score" / "scores.jsonl"))
    assert runs["ray"] == runs["local"]
    assert runs["ray"][0]["detectors"]["context_copy"]["report"]["fallbacks"]  # counted on the workers, reported


def test_a_guarded_victim_ships_with_its_guard(cluster, tmp_path) -> None:
    """The guard forwards attribute reads to its metric; the metric's recipe must not make the
    guarded victim travel as the bare metric (the workers would attack it unguarded)."""
    from robusteval.detectors.guarded import GuardedMetric

    from robusteval import detectors, metrics
    from robusteval.execution import shippable, unship

    def victim():
        return detectors.guard(metrics.load("toy:LengthMetric"), ["nonalnum", "speaker_tag"], policy="floor")

    rebuilt = unship(shippable(victim()))  # a guard travels as the recipe of a guard, never as the bare metric
    assert isinstance(rebuilt, GuardedMetric) and [d.name for d in rebuilt.detectors] == ["nonalnum", "speaker_tag"]
    local = campaign(tmp_path / "local.jsonl", victim())
    with execution.use(execution.load("ray", workers=2)):
        remote = campaign(tmp_path / "ray.jsonl", victim())
    assert remote == local
    attacked = [r for r in remote.values() if r["outcome"] == "attacked"]
    assert attacked and all(r["meta"]["guard"]["adversarial"]["suspicion"] for r in attacked)


def test_an_object_that_cannot_travel_is_named(cluster, tmp_path) -> None:
    import threading

    class Locked(LengthMetric):
        name = "locked"

        def __init__(self) -> None:
            super().__init__()
            self.lock = threading.Lock()  # no pickle for a lock

    with execution.use(execution.load("ray", workers=2)), \
            pytest.raises(RobustevalError, match=r"cannot send Locked locked \(cannot pickle .*lock.*\) to Ray workers; load it by name"):
        score_with_log(Locked(), make_samples(4), tmp_path / "scores.jsonl", resume=False)


def test_actors_and_a_victim_built_from_its_recipe_serve_every_stage(cluster, tmp_path) -> None:
    """Two attack stages in one ``use`` block: the two actors build the victim once each (not
    once per stage), and the block's end stops them."""
    from robusteval import metrics

    builds = tmp_path / "builds.txt"
    victim = metrics.load("ray_helpers:CountedBuilds", log=str(builds))  # the driver's own copy: one line
    ex = execution.load("ray", workers=2)
    with execution.use(ex):
        first = campaign(tmp_path / "stage1.jsonl", victim)
        actors = list(ex._actors)
        second = campaign(tmp_path / "stage2.jsonl", victim)
        assert ex._actors == actors  # the same actors served the second stage
    pids = builds.read_text().split()
    assert pids.count(str(os.getpid())) == 1 and len(pids) == 1 + 2  # one build per worker, for both stages
    assert first == second and ex._actors == []  # released when the block ended
    # another driver object from the same recipe (a checkpoint folder the next round rewrote)
    # is built anew on the workers, as the driver built it anew
    builds.write_text("")
    again = metrics.load("ray_helpers:CountedBuilds", log=str(builds))
    with execution.use(ex):
        campaign(tmp_path / "stage3.jsonl", victim)
        campaign(tmp_path / "stage4.jsonl", again)
    assert len(builds.read_text().split()) == 1 + 2 + 2
