"""The Ray backend: a run's units on Ray actors, one worker object per actor.

Each actor builds the worker (a victim with its attacks, a metric, a detector) once, from
the recipe or the pickled objects :func:`robusteval.execution.shippable` gives, then serves
units until the map ends. The driver keeps at most one unit in flight per actor (so the
number of actors is the run's concurrency: ``max_in_flight`` caps it, which is how an LLM
endpoint's rate limit is kept across the cluster), takes results as they finish and alone
writes the log. A worker that dies is restarted by Ray and its unit retried (``retries``
times); a unit that still fails raises :class:`robusteval.errors.RobustevalError` naming it,
after every finished unit was already yielded (and logged by the caller), so ``--resume``
continues from there. An exception raised by the worker's own code (a bad sample, a missing
resource) is re-raised in the driver as the same exception type.

Connects to ``address`` (or ``RAY_ADDRESS``) when given, else starts a local Ray instance
with enough CPUs for the workers.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from robusteval.errors import MissingResourceError, RobustevalError
from robusteval.execution.base import shippable, unship

_HOST: Any = None


class WorkerHost:
    """The actor body: one worker, built on first use from the shipped arguments."""

    def __init__(self, worker_cls: Callable[..., Any], args: Sequence[Any], method: str) -> None:
        self._build = (worker_cls, args, method)
        self._run: Callable[[Any], Any] | None = None

    def run(self, index: int, unit: Any) -> tuple[int, Any]:
        if self._run is None:
            worker_cls, args, method = self._build
            self._run = getattr(worker_cls(*[unship(a) for a in args]), method)
        return index, self._run(unit)

    def pid(self) -> int:
        return os.getpid()


def unshippable(objects: Sequence[Any], exc: BaseException) -> str:
    """Names the first of ``objects`` that does not pickle, and why (``exc``: Ray's own error,
    when each pickles alone)."""
    from ray import cloudpickle

    for obj in objects:
        try:
            cloudpickle.dumps(obj)
        except Exception as why:  # any failure to pickle names this object
            return f"{type(obj).__name__} {getattr(obj, 'name', '')!s}".strip() + f" ({why})"
    return f"the worker's arguments ({str(exc).splitlines()[0]})"


def _host_class(ray: Any) -> Any:
    global _HOST
    if _HOST is None:
        _HOST = ray.remote(WorkerHost)
    return _HOST


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingResourceError("the ray backend needs Ray: pip install 'robusteval[ray]' "
                                   "(or pip install 'ray>=2.40')") from exc
    return ray


class RayExecutor:
    """Units on Ray actors.

    Args:
        workers: actors per map (each builds the worker once)
        address: a running cluster's address (``ray://HOST:10001`` or ``HOST:6379``; default
            ``RAY_ADDRESS``, else a local Ray instance is started)
        cpus_per_worker: CPUs Ray reserves per actor (Ray also caps its threads to this)
        gpus_per_worker: GPUs per actor (a fraction shares one GPU); the worker then builds
            its victim on that GPU when the victim ships as a recipe
        max_in_flight: the most units running at once across the cluster (default: workers)
        retries: restarts of a dead actor, and retries of the unit it was running
        runtime_env: Ray's runtime_env for the workers (e.g. env_vars, pip)
    """

    name = "ray"

    def __init__(self, workers: int = 2, address: str | None = None, cpus_per_worker: float = 1.0,
                 gpus_per_worker: float = 0.0, max_in_flight: int | None = None, retries: int = 3,
                 runtime_env: dict[str, Any] | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        if cpus_per_worker < 0 or gpus_per_worker < 0 or retries < 0:
            raise ValueError("cpus_per_worker, gpus_per_worker and retries cannot be negative")
        self.ray = _ray()
        self.workers = min(workers, max_in_flight or workers)
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.cpus_per_worker, self.gpus_per_worker = cpus_per_worker, gpus_per_worker
        self.max_in_flight, self.retries, self.runtime_env = max_in_flight, retries, runtime_env
        self.started_here = False

    def ensure_started(self) -> None:
        """Connect to the cluster, or start a local one, unless Ray already runs here."""
        ray = self.ray
        if ray.is_initialized():
            return
        options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                                   "runtime_env": self.runtime_env}
        if self.address:
            ray.init(address=self.address, **options)
        else:
            need = math.ceil(self.workers * self.cpus_per_worker)
            ray.init(num_cpus=max(os.cpu_count() or 1, need), **options)
            self.started_here = True

    def map(self, worker_cls: Callable[..., Any], args: Sequence[Any], method: str, units: Sequence[Any],
            desc: str = "", label: Callable[[Any], str] | None = None) -> Iterator[tuple[int, Any]]:
        if not units:
            return
        ray = self.ray
        self.ensure_started()
        from ray.exceptions import RayActorError, RayTaskError

        shipped = [shippable(a) for a in args]
        host = _host_class(ray).options(num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
                                        max_restarts=self.retries, max_task_retries=self.retries)
        try:
            actors = [host.remote(worker_cls, shipped, method) for _ in range(min(self.workers, len(units)))]
        except (TypeError, AttributeError, pickle.PicklingError) as exc:
            raise RobustevalError(f"{desc or method}: cannot send {unshippable(shipped, exc)} to Ray workers; load "
                                  "it by name (metrics.load, detectors.load) so each worker builds its own, or make "
                                  "it picklable") from exc
        idle, pending = list(actors), {}
        queue = iter(enumerate(units))
        try:
            while True:
                while idle:
                    nxt = next(queue, None)
                    if nxt is None:
                        break
                    actor = idle.pop()
                    pending[actor.run.remote(*nxt)] = (actor, nxt[0])
                if not pending:
                    return
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                actor, index = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except RayTaskError as exc:  # the worker's own code raised: the same exception here
                    raise exc.as_instanceof_cause() from None
                except RayActorError as exc:
                    what = label(units[index]) if label else f"unit {index}"
                    raise RobustevalError(f"{desc or method}: {what} failed on a Ray worker that died "
                                          f"{self.retries + 1} times ({type(exc).__name__}: {exc}); the finished "
                                          "units are logged, --resume continues from them") from exc
                idle.append(actor)
                yield result
        finally:
            for actor in actors:
                ray.kill(actor, no_restart=True)

    def describe(self) -> dict[str, Any]:
        return {"backend": "ray", "workers": self.workers, "address": self.address or "local",
                "cpus_per_worker": self.cpus_per_worker, "gpus_per_worker": self.gpus_per_worker,
                "max_in_flight": self.max_in_flight}

    def shutdown(self) -> None:
        """Stop the local Ray instance this executor started (a cluster it joined keeps running)."""
        if self.started_here and self.ray.is_initialized():
            self.ray.shutdown()
            self.started_here = False
