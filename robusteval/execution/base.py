"""The executor contract and the in-process executor.

An executor maps one method of a *worker* over units of work: ``map(worker_cls, args,
method, units)`` builds ``worker_cls(*args)`` once per worker and yields ``(index,
result)`` for every unit, in the order they finish (the callers' logs are keyed, so order
does not matter to them). :class:`LocalExecutor` builds the worker once, in this process,
with the very objects given (no copy: a victim's counters and caches are the caller's).

Objects shipped to other processes go as themselves (pickled by the executor's transport)
unless they remember how they were built (:func:`remember_factory`, which
:func:`robusteval.metrics.load` and the CLI's metric loader do): then only that recipe
travels and each worker rebuilds the object itself -- on its own GPU, without the driver's
weights crossing the network.
"""

from __future__ import annotations

import contextlib
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

FACTORY_ATTR = "_robusteval_factory"


class Executor(Protocol):
    name: str
    workers: int
    in_process: bool  # the worker is the caller's own objects (no copy)

    def map(self, worker_cls: Callable[..., Any], args: Sequence[Any], method: str, units: Sequence[Any],
            desc: str = "", label: Callable[[Any], str] | None = None) -> Iterator[tuple[int, Any]]:
        """``getattr(worker, method)(unit)`` for every unit, with one ``worker_cls(*args)``
        per worker; yields ``(index of the unit, result)`` as units finish. ``desc`` and
        ``label`` (a unit's name) go into the error when a unit cannot be run."""
        ...

    def describe(self) -> dict[str, Any]:
        """What a run's provenance records about where it ran (never part of a fingerprint:
        the same run gives the same rows on any backend)."""
        ...

    def release(self) -> None:
        """Stop the workers (the next map starts new ones)."""
        ...

    def shutdown(self) -> None:
        """Stop the workers and whatever the executor started for them."""
        ...


class LocalExecutor:
    """Every unit in this process, in order, with one worker built from the caller's objects."""

    name = "local"
    workers = 1
    in_process = True

    def map(self, worker_cls: Callable[..., Any], args: Sequence[Any], method: str, units: Sequence[Any],
            desc: str = "", label: Callable[[Any], str] | None = None) -> Iterator[tuple[int, Any]]:
        if not units:
            return
        worker = worker_cls(*args)
        run = getattr(worker, method)
        for i, unit in enumerate(units):
            yield i, run(unit)

    def describe(self) -> dict[str, Any]:
        return {"backend": "local"}

    def release(self) -> None:
        """Nothing to stop: the worker was the caller's own objects."""

    def shutdown(self) -> None:
        """Nothing to stop."""


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` cut into consecutive units of at most ``size``."""
    return [items[start:start + size] for start in range(0, len(items), size)]


def span(samples: Sequence[Any]) -> str:
    """How an error names a chunk of samples: its first and last ids."""
    return f"samples {samples[0].id!r}..{samples[-1].id!r}"


@dataclass(frozen=True)
class Rebuild:
    """An object shipped as the recipe that builds it: ``factory()`` on the worker. ``token``
    names the driver's object: a worker builds one object per token and reuses it for every
    stage, as the driver reuses its one object; another driver object -- even from the same
    recipe, say a checkpoint folder rewritten by the next training round -- is built anew.

    ``state`` is what the driver's object fitted and a rebuilt one would fit again at the same
    cost (a committee's calibration scales): taken when the recipe is sent (pickled) from the
    driver's object through ``source`` (a weak reference, never sent), when that object has a
    ``fitted_state()`` method, and given to the rebuilt object's ``load_fitted_state(state)``,
    so N workers do not redo the driver's fitting N times."""

    factory: Callable[[], Any]
    token: str
    state: Any = None
    source: Any = field(default=None, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        state = self.state
        obj = self.source() if self.source is not None else None
        if state is None and obj is not None and callable(getattr(type(obj), "fitted_state", None)):
            state = obj.fitted_state()
        return (Rebuild, (self.factory, self.token, state))


def remember_factory(obj: Any, factory: Callable[[], Any]) -> Any:
    """Records on ``obj`` a picklable zero-argument ``factory`` that builds an equal object,
    so executors ship the recipe instead of the object. Returns ``obj``; an object that takes
    no attributes is returned as it is (it then ships as itself)."""
    try:
        source: Any = weakref.ref(obj)
    except TypeError:  # no weak references to this type: its fitted state is not sent
        source = None
    with contextlib.suppress(AttributeError, TypeError):
        setattr(obj, FACTORY_ATTR, Rebuild(factory, uuid.uuid4().hex, source=source))
    return obj


def recipe_of(obj: Any) -> Rebuild | None:
    """The recipe :func:`remember_factory` recorded on ``obj`` itself -- never one a wrapper
    forwards from the object it wraps (a guard that proxies attribute reads to its metric
    would otherwise ship as the bare metric)."""
    found = vars(obj).get(FACTORY_ATTR) if hasattr(obj, "__dict__") and not isinstance(obj, type) else None
    return found if isinstance(found, Rebuild) else None


def shippable(obj: Any) -> Any:
    """What to send to a worker for ``obj``: its own recipe when it remembers one, else itself."""
    recipe = recipe_of(obj)
    return recipe if recipe is not None else obj


_BUILT: OrderedDict[str, Any] = OrderedDict()
KEEP_BUILT = 8


def build(recipe: Rebuild) -> Any:
    """The object ``recipe`` builds, once per process per driver object (its ``token``; the
    last :data:`KEEP_BUILT` kept): a worker that serves every stage of a comparison loads a
    victim once, and a guard or a smoother built from recipes wraps that same victim, as the
    driver's guard wraps its one victim."""
    if recipe.token not in _BUILT:
        obj = recipe.factory()
        if recipe.state is not None:
            obj.load_fitted_state(recipe.state)
        _BUILT[recipe.token] = obj
        while len(_BUILT) > KEEP_BUILT:
            _BUILT.popitem(last=False)
    _BUILT.move_to_end(recipe.token)
    return _BUILT[recipe.token]


def unship(obj: Any) -> Any:
    """The object a worker uses for what :func:`shippable` sent."""
    return build(obj) if isinstance(obj, Rebuild) else obj
