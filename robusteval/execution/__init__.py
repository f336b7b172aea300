"""Where the units of a run execute: in this process (``local``, the default) or on Ray
workers (``ray``, the optional extra ``robusteval[ray]``).

The three loops every command goes through -- :func:`robusteval.attacks.runner.run_attacks`
(one unit per sample: every pending attack on it), :func:`robusteval.results.score_with_log`
and :func:`robusteval.detectors.calibrate.detect_logged` (one unit per chunk of samples) --
hand their units to :func:`current`, the executor a command set with :func:`use`. A worker
object (a victim, its attacks, a detector) is built once per worker and reused for every unit
sent to it; the driver (this process) receives each unit's rows and alone writes the
append-only log, so results, resume and fingerprints are the same on either backend.

    from robusteval import execution
    with execution.use(execution.load("ray", workers=2)):
        run_attacks(...)          # or score_with_log(...), compare's pipeline, ...
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from robusteval.execution.base import (
    Executor,
    LocalExecutor,
    Rebuild,
    chunks,
    recipe_of,
    remember_factory,
    shippable,
    span,
    unship,
)

__all__ = ["BACKENDS", "Executor", "LocalExecutor", "Rebuild", "chunks", "current", "load", "recipe_of",
           "remember_factory", "shippable", "span", "unship", "use"]

BACKENDS = ("local", "ray")
_CURRENT: contextvars.ContextVar[Executor | None] = contextvars.ContextVar("robusteval_executor", default=None)


def load(backend: str = "local", **options: Any) -> Executor:
    """An executor by name: ``local`` (no options) or ``ray`` (see
    :class:`robusteval.execution.ray_backend.RayExecutor` for its options)."""
    if backend == "local":
        if options:
            raise TypeError(f"the local backend takes no options (got {sorted(options)})")
        return LocalExecutor()
    if backend == "ray":
        from robusteval.execution.ray_backend import RayExecutor

        return RayExecutor(**options)
    raise ValueError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")


def current() -> Executor:
    """The executor set by the innermost :func:`use`, else a :class:`LocalExecutor`."""
    return _CURRENT.get() or LocalExecutor()


@contextlib.contextmanager
def use(executor: Executor) -> Iterator[Executor]:
    """Run the block's attack, scoring and detection loops on ``executor``; when the block
    ends its workers are released (a Ray executor's actors stop and free their CPUs)."""
    token = _CURRENT.set(executor)
    try:
        yield executor
    finally:
        _CURRENT.reset(token)
        executor.release()
