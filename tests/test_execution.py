"""The executor layer without a Ray cluster (issue 18): the backend settings are checked and
kept out of run fingerprints, the missing optional extra is named, the local executor runs in
process, and recipes rebuild per driver object."""

from __future__ import annotations

import sys

import pytest

from robusteval import execution
from robusteval.cli.main import main
from robusteval.errors import MissingResourceError


def test_backend_settings_are_checked_and_left_out_of_the_fingerprint(tmp_path, capsys) -> None:
    from robusteval.cli.main import parse

    _, cfg = parse(["score", "--metric", "bleu", "--dataset", "x.jsonl", "--out-dir", str(tmp_path),
                    "--backend", "ray", "--workers", "3", "--max-in-flight", "2"])
    assert (cfg.backend, cfg.workers, cfg.max_in_flight) == ("ray", 3, 2)
    assert main(["score", "--metric", "bleu", "--dataset", "x.jsonl", "--out-dir", str(tmp_path),
                 "--workers", "0"]) == 2
    assert "workers must be at least 1, got 0" in capsys.readouterr().err
    assert main(["score", "--metric", "bleu", "--dataset", "x.jsonl", "--out-dir", str(tmp_path),
                 "--ray-address", "127.0.0.1:6379"]) == 2
    assert "--ray-address goes with --backend ray" in capsys.readouterr().err
    from robusteval.config.parsing import OUTPUT_KEYS

    assert {"backend", "ray_address", "workers", "max_in_flight"} <= set(OUTPUT_KEYS)


def test_max_in_flight_caps_the_workers() -> None:
    pytest.importorskip("ray", reason="the Ray backend is the optional extra: pip install 'robusteval[ray]'")
    ex = execution.load("ray", workers=4, max_in_flight=2)
    assert ex.workers == 2
    with pytest.raises(ValueError, match="workers must be at least 1"):
        execution.load("ray", workers=0)
    with pytest.raises(ValueError, match="unknown backend"):
        execution.load("dask")




def test_without_ray_the_backend_names_the_extra(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(MissingResourceError, match=r"pip install 'robusteval\[ray\]'"):
        execution.load("ray", workers=2)
    assert main(["score", "--metric", "rougeL", "--dataset", "quickstart-dialogue", "--out-dir", str(tmp_path),
                 "--backend", "ray"]) == 2
    assert "pip install 'robusteval[ray]'" in capsys.readouterr().err


def test_the_local_executor_runs_the_callers_own_objects_in_order() -> None:
    class Worker:
        def __init__(self, box: list) -> None:
            self.box = box

        def run(self, unit: int) -> int:
            self.box.append(unit)
            return unit * 2

    box: list = []
    ex = execution.load("local")
    assert list(ex.map(Worker, [box], "run", [3, 1, 2])) == [(0, 6), (1, 2), (2, 4)]
    assert box == [3, 1, 2] and ex.in_process and execution.current().name == "local"


def test_a_recipe_rebuilds_once_per_driver_object() -> None:
    from robusteval import metrics
    from robusteval.execution import recipe_of, shippable, unship

    a, b = metrics.load("rougeL"), metrics.load("rougeL")
    ra, rb = recipe_of(a), recipe_of(b)
    assert ra is not None and rb is not None and ra.token != rb.token  # same recipe, two driver objects
    built = unship(shippable(a))
    assert built is not a and type(built) is type(a) and unship(shippable(a)) is built  # once per token
    assert unship(shippable(b)) is not built
