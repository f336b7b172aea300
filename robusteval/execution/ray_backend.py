"""The Ray backend: a run's units on Ray actors, one worker object per actor.

The executor starts its actors on first use and keeps them for every later map (every stage
of a comparison) until :meth:`RayExecutor.release` -- which ``execution.use`` calls when its
block ends. Each map ships its worker's arguments once (the objects, or the recipes
:func:`robusteval.execution.shippable` gives); an actor builds the map's worker when the first
of its units arrives, and keeps the objects it built from recipes, so a victim is loaded once
per worker, not once per stage or unit. The driver keeps at most one unit in flight per actor
(so the number of actors is the run's concurrency: ``max_in_flight`` caps it, which is how an
LLM endpoint's rate limit is kept across the cluster), takes results as they finish and alone
writes the log. A worker that dies is restarted by Ray and its unit retried (``retries``
times); a unit that still fails raises :class:`robusteval.errors.RobustevalError` naming it,
after every finished unit was already yielded (and logged by the caller), so ``--resume``
continues from there. An exception raised by the worker's own code (a bad sample, a missing
resource) is re-raised in the driver as the same exception type.

Connects to ``address`` (or ``RAY_ADDRESS``) when given, else starts a local Ray instance
with enough CPUs for the workers.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import pickle
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from robusteval.errors import MissingResourceError, RobustevalError
from robusteval.execution.base import shippable, unship

_HOST: Any = None


class WorkerHost:
    """The actor body. An actor lives for the executor's whole life and serves every map:
    each unit names its map (``token``) and carries a reference to the map's worker arguments,
    so the actor builds the map's worker when the token changes -- also after Ray restarted it.
    Objects that travel as recipes are built once per process (:func:`robusteval.execution.base.build`),
    so a victim is loaded once per worker for all the stages of a comparison, as one local
    process loads it once."""

    def __init__(self) -> None:
        self._token: str | None = None
        self._run: Callable[[Any], Any] | None = None

    def run(self, token: str, setup: list[Any], index: int, unit: Any) -> tuple[int, Any]:
        if token != self._token or self._run is None:
            import ray

            worker_cls, args, method = ray.get(setup[0])
            self._run = getattr(worker_cls(*[unship(a) for a in args]), method)
            self._token = token
        return index, self._run(unit)


def unshippable(objects: Sequence[Any], exc: BaseException) -> str:
    """Names the first of ``objects`` that does not pickle, and why (``exc``: Ray's own error,
    when each pickles alone)."""
    from ray import cloudpickle

    for obj in objects:
        try:
            cloudpickle.dumps(obj)
        except Exception as why:  # any failure to pickle names this object (or the item of a list)
            if isinstance(obj, list | tuple):
                return unshippable(obj, why)
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
    in_process = False

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
        self._actors: list[Any] = []

    def ensure_started(self) -> None:
        """Connect to the cluster, or start a local one, unless Ray already runs here."""
        ray = self.ray
        if ray.is_initialized():
            return
        options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING,
                                   "runtime_env": self.runtime_env}
        from robusteval.signals import keeping_sigterm_handler

        # ray.init installs its own SIGTERM handler (sys.exit(15)): the CLI's clean stop would be lost
        with keeping_sigterm_handler():
            self._init(ray, options)

    def _init(self, ray: Any, options: dict[str, Any]) -> None:
        if self.address:
            try:
                ray.init(address=self.address, **options)
            except (ConnectionError, RuntimeError, TimeoutError) as exc:
                raise MissingResourceError(f"cannot join the Ray cluster at {self.address} ({exc}); is `ray start "
                                           "--head` running there, and is the address right?") from exc
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
        from ray.exceptions import RayActorError, RayError, RayTaskError

        shipped = [shippable(a) for a in args]
        try:
            setup = [ray.put((worker_cls, shipped, method))]  # in a list: each actor fetches it when it needs it
        except (TypeError, AttributeError, pickle.PicklingError) as exc:
            raise RobustevalError(f"{desc or method}: cannot send {unshippable(shipped, exc)} to Ray workers; load "
                                  "it by name (metrics.load, detectors.load) so each worker builds its own, or make "
                                  "it picklable") from exc
        token = uuid.uuid4().hex
        idle, pending = list(self._pool())[: len(units)], {}
        queue = iter(enumerate(units))
        failed = True
        try:
            while True:
                while idle:
                    nxt = next(queue, None)
                    if nxt is None:
                        break
                    actor = idle.pop()
                    pending[actor.run.remote(token, setup, *nxt)] = (actor, nxt[0])
                if not pending:
                    failed = False
                    return
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                actor, index = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except RayTaskError as exc:  # the worker's own code raised: the same exception, as it was raised
                    cause = exc.cause
                    if isinstance(cause, Exception) and not isinstance(cause, RayError):
                        raise cause from None
                    raise self._failed(desc or method, label, units[index], index, exc) from exc
                except RayActorError as exc:
                    raise self._failed(desc or method, label, units[index], index, exc, died=True) from exc
                except RayError as exc:  # e.g. an error that could not be sent back
                    raise self._failed(desc or method, label, units[index], index, exc) from exc
                idle.append(actor)
                yield result
        finally:
            if failed or pending:  # an error, or the caller stopped early: the next map starts afresh
                self.release()

    def _failed(self, what: str, label: Callable[[Any], str] | None, unit: Any, index: int, exc: BaseException,
                died: bool = False) -> RobustevalError:
        name = label(unit) if label else f"unit {index}"
        how = f"on a Ray worker that died {self.retries + 1} times" if died else "on a Ray worker"
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        return RobustevalError(f"{what}: {name} failed {how} ({type(exc).__name__}: {first}); the finished units "
                               "are logged, --resume continues from them")

    def _pool(self) -> list[Any]:
        """The executor's actors, started on first use and kept for every later map. A dead
        actor is restarted as often as needed; a unit it was running is retried ``retries``
        times."""
        if not self._actors:
            self._check_resources()
            host = _host_class(self.ray).options(num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
                                                 max_restarts=-1, max_task_retries=self.retries)
            self._actors = [host.remote() for _ in range(self.workers)]
        return self._actors

    def _check_resources(self) -> None:
        """Refuses, instead of waiting forever, workers the cluster cannot place."""
        total = self.ray.cluster_resources()
        for what, each in (("CPU", self.cpus_per_worker), ("GPU", self.gpus_per_worker)):
            need, have = self.workers * each, float(total.get(what, 0.0))
            if need > have + 1e-9:
                raise RobustevalError(f"{self.workers} Ray workers x {each:g} {what} need {need:g} {what}s; the "
                                      f"cluster has {have:g}: lower --workers or --{what.lower()}s-per-worker, or "
                                      "add nodes")

    def release(self) -> None:
        """Stop this executor's actors (and what they built); the next map starts new ones.
        Never raises: it runs while another error may be on its way out."""
        actors, self._actors = self._actors, []
        for actor in actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor, no_restart=True)

    def describe(self) -> dict[str, Any]:
        return {"backend": "ray", "workers": self.workers, "address": self.address or "local",
                "cpus_per_worker": self.cpus_per_worker, "gpus_per_worker": self.gpus_per_worker,
                "max_in_flight": self.max_in_flight}

    def shutdown(self) -> None:
        """Stop this executor's actors, and the local Ray instance it started (a cluster it
        joined keeps running)."""
        if self._actors and self.ray.is_initialized():
            self.release()
        if self.started_here and self.ray.is_initialized():
            with contextlib.suppress(Exception):  # never masks the error a run is stopping with
                self.ray.shutdown()
            self.started_here = False
