"""Name -> factory registries: built-in entries filled by decorators, plugins from other
packages through entry points, and ``module:attr`` names (no eval, no import-time work).

A name is looked up in this order:

1. the entries registered in robusteval itself (``@register_metric(...)`` and friends);
2. entry points of the registry's group (``robusteval.metrics``, ``robusteval.attacks``,
   ``robusteval.detectors``, ``robusteval.datasets``) declared by installed packages, e.g. in
   their ``pyproject.toml``::

       [project.entry-points."robusteval.metrics"]
       mymetric = "mypkg.metric:score"

   Entry points are read with :mod:`importlib.metadata` the first time a name is missing
   or the registry is listed (never at import); one plugin is imported when it is first
   asked for. A plugin cannot shadow a built-in name (it is skipped with a warning);
3. ``module:attr`` (``mypkg.metric:score``, ``scorers:MyMetric``): the module is imported and
   the attribute returned. The current directory is tried last when the module is not found
   elsewhere, so a ``mymod.py`` next to the command works.

Each registry may *adapt* a loaded object into its factory (the metric registry turns a plain
scoring function into a Metric class); the adapter also returns the entry's info (family,
source...). Every entry's info carries ``origin``: ``built-in``, ``entry point NAME = VALUE
(DIST VERSION)`` or ``module:attr``.

A plugin that fails to import or has the wrong type raises :class:`RobustevalError` naming
the entry point and its distribution when it is asked for; a listing (:meth:`Registry.names`)
warns and skips it instead.
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import Any, Generic, TypeVar

from robusteval.errors import OptionError, RobustevalError, UnknownNameError, UnknownOptionError

T = TypeVar("T")

#: ``package.module:attr.sub``: what a Python object name looks like
MODULE_ATTR = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")

#: ``adapt(obj, name) -> (factory, info)``: how a registry turns a loaded object into its factory
Adapter = Callable[[Any, str], tuple[Callable[..., Any], dict[str, Any]]]


def _identity(obj: Any, name: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    if not callable(obj):
        raise TypeError(f"expected a class or a function, got {type(obj).__name__}")
    return obj, {}


def is_object_name(name: str) -> bool:
    """True for ``module:attr`` names (``pkg.mod:attr``)."""
    return bool(MODULE_ATTR.match(name))


def import_object(spec: str, kind: str = "object") -> Any:
    """The object ``module:attr`` names (``attr`` may be dotted: ``mod:Class.method``).

    A missing module or attribute is a :class:`RobustevalError` saying which; an error raised
    while importing the module is reported with its type and message (and chained)."""
    if not is_object_name(spec):
        raise RobustevalError(f"{kind} {spec!r}: expected module:attr (e.g. mypkg.metrics:score)")
    module_name, _, attr = spec.partition(":")
    module = _import_module(module_name, spec, kind)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            public = sorted(n for n in dir(obj) if not n.startswith("_"))
            close = difflib.get_close_matches(part, public, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise RobustevalError(f"{kind} {spec!r}: {getattr(obj, '__name__', module_name)!r} has no attribute "
                                  f"{part!r}{hint}") from None
    return obj


def _import_module(module_name: str, spec: str, kind: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.split(".")[0]
        cwd = os.getcwd()
        if exc.name == top and cwd not in sys.path and "" not in sys.path:
            sys.path.append(cwd)  # a module file next to the command (uvicorn and pytest do the same)
            return _import_module(module_name, spec, kind)
        if exc.name and module_name.startswith(exc.name):
            raise RobustevalError(f"{kind} {spec!r}: no module named {exc.name!r} (is it installed, or on "
                                  f"PYTHONPATH / in the current directory?)") from None
        raise RobustevalError(f"{kind} {spec!r}: importing {module_name!r} failed: {exc}") from exc
    except Exception as exc:  # the module itself is broken: say so, keep the traceback chained
        raise RobustevalError(f"{kind} {spec!r}: importing {module_name!r} failed: "
                              f"{type(exc).__name__}: {exc}") from exc


def accepted_options(factory: Callable[..., Any]) -> list[str] | None:
    """The keyword options ``factory`` takes, or None when that cannot be known. For a class,
    the ``__init__`` of each class in its MRO is read while the one before passes ``**kwargs``
    on (``BLEU(tokenize, **kwargs)`` -> ``Metric(on_empty, empty_score)``); a chain that stays
    open to the end, or a callable without a signature, accepts anything as far as this says."""
    import inspect

    if isinstance(factory, type):
        inits = [vars(c)["__init__"] for c in factory.__mro__ if "__init__" in vars(c) and c is not object]
    else:
        inits = [factory]
    names: list[str] = []
    for fn in inits:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):  # a builtin or C callable without a signature
            return None
        names += [n for i, (n, p) in enumerate(params.items())
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and not (i == 0 and n == "self")]
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return list(dict.fromkeys(names))
    return None


def build(factory: Callable[..., T], options: dict[str, Any], what: str) -> T:
    """``factory(**options)``, with the user's mistakes as errors naming ``what`` (e.g.
    "metric 'bleu'") that the CLI reports in one line: an option the factory does not take
    (Python's own "unexpected keyword argument", so a class that hands ``**kwargs`` to something
    other than its base is never second-guessed) is an :class:`UnknownOptionError` (a
    TypeError) with a close match and the options :func:`accepted_options` finds; a value its
    constructor rejects (a ValueError, a KeyError from a library's table of choices, a TypeError
    of a wrong type) is an :class:`OptionError` (a ValueError; a TypeError stays one) with the
    options given. The original error is chained, and its message kept whole."""
    try:
        return factory(**options)
    except RobustevalError:
        raise
    except TypeError as exc:
        found = _UNEXPECTED.search(str(exc))
        accepted = accepted_options(factory)
        # Python's complaint about an option the factory does take came from a call inside it
        if found is None or found.group(1) not in options or found.group(1) in (accepted or ()):
            raise _not_built(what, options, exc, _OptionTypeError) from exc
        name = found.group(1)
        close = difflib.get_close_matches(name, accepted or [], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        takes = f"; it takes {', '.join(accepted) or 'no options'}" if accepted is not None else ""
        raise UnknownOptionError(f"{what}: unknown option {name!r}{hint}{takes}") from exc
    except KeyError as exc:
        raise _not_built(what, options, exc, _OptionKeyError) from exc
    except ValueError as exc:
        raise _not_built(what, options, exc, OptionError) from exc


_UNEXPECTED = re.compile(r"unexpected keyword argument '([^']+)'")


class _OptionTypeError(OptionError, TypeError):
    """A value of the wrong type: an OptionError that is still the TypeError it was."""


class _OptionKeyError(OptionError, KeyError):
    """A lookup that failed inside the constructor: an OptionError that is still a KeyError."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _not_built(what: str, options: dict[str, Any], exc: Exception, cls: type[OptionError]) -> OptionError:
    given = ", ".join(f"{k}={v!r}" for k, v in options.items())
    if isinstance(exc, KeyError) and exc.args:
        key = exc.args[0]
        given_values = [v for v in options.values() if isinstance(v, str | int | float)]
        msg = f"no such choice {key!r}" if key in given_values else f"KeyError {key!r}"
    else:
        msg = str(exc)
    return cls(f"{what} with {given}: {msg}" if given else f"{what}: {msg}")


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    return sorted(metadata.entry_points(group=group),
                  key=lambda ep: (ep.name, ep.dist.name if ep.dist is not None else ""))


def _origin(ep: metadata.EntryPoint) -> str:
    dist = ep.dist
    where = f"{dist.name} {dist.version}" if dist is not None else "unknown distribution"
    return f"entry point {ep.name} = {ep.value} ({where})"


class Registry(Generic[T]):
    """Factories keyed by name, with per-entry info; plugins from the entry-point ``group``
    and ``module:attr`` names (see the module docstring)."""

    def __init__(self, kind: str, group: str | None = None, adapt: Adapter | None = None) -> None:
        self.kind = kind
        self.group = group
        self._adapt = adapt or _identity
        self._entries: dict[str, Callable[..., T]] = {}
        self._info: dict[str, dict[str, object]] = {}
        self._plugins: dict[str, Callable[..., T]] = {}  # loaded plugins and module:attr names
        self._plugin_info: dict[str, dict[str, object]] = {}
        self._pending: dict[str, metadata.EntryPoint] | None = None  # None: not discovered yet
        self._warned: set[str] = set()

    # -- registration (built-in entries) -----------------------------------------------
    def register(self, name: str, **info: object) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = factory
            self._info[name] = {"name": name, "origin": "built-in", **info}
            return factory

        return decorator

    # -- plugins ------------------------------------------------------------------------
    def _discover(self) -> dict[str, metadata.EntryPoint]:
        if self._pending is None:
            self._pending = {}
            if self.group is not None:
                for ep in _entry_points(self.group):
                    if ep.name in self._pending:
                        warnings.warn(f"{self.kind} plugin {_origin(ep)} ignored: {ep.name!r} is already "
                                      f"declared by {_origin(self._pending[ep.name])}", stacklevel=3)
                        continue
                    self._pending[ep.name] = ep
        return self._pending

    def _load_plugin(self, name: str) -> Callable[..., T]:
        if name in self._plugins:
            return self._plugins[name]
        ep = self._discover()[name]
        if name in self._entries:
            raise RobustevalError(f"{self.kind} plugin {_origin(ep)} is shadowed by the built-in {self.kind} "
                                  f"{name!r}; rename the entry point")
        try:
            obj = ep.load()
            factory, info = self._adapt(obj, name)
        except Exception as exc:
            raise RobustevalError(f"{self.kind} plugin {name!r} ({_origin(ep)}, group {self.group}) cannot be "
                                  f"loaded: {type(exc).__name__}: {exc}") from exc
        self._plugins[name] = factory
        self._plugin_info[name] = {"name": name, **info, "origin": _origin(ep),
                                   "distribution": ep.dist.name if ep.dist is not None else None}
        return factory

    def _load_object(self, spec: str) -> Callable[..., T]:
        if spec in self._plugins:
            return self._plugins[spec]
        obj = import_object(spec, self.kind)
        try:
            factory, info = self._adapt(obj, spec)
        except Exception as exc:
            raise RobustevalError(f"{self.kind} {spec!r}: {type(exc).__name__}: {exc}") from exc
        self._plugins[spec] = factory
        self._plugin_info[spec] = {"name": spec, **info, "origin": "module:attr"}
        return factory

    def refresh(self) -> None:
        """Forget discovered plugins (after installing a package in a running interpreter)."""
        self._pending = None
        self._warned.clear()
        self._plugins.clear()
        self._plugin_info.clear()

    # -- lookup -------------------------------------------------------------------------
    def get(self, name: str) -> Callable[..., T]:
        """The factory registered as ``name``, a plugin's, or the object ``module:attr`` names."""
        if name in self._entries:
            return self._entries[name]
        if name in self._discover():
            return self._load_plugin(name)
        if is_object_name(name):
            return self._load_object(name)
        known = self._known()
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownNameError(f"unknown {self.kind} {name!r}{hint} (known: {', '.join(known)}; "
                               f"or module:attr, or a plugin's entry point in group {self.group})"
                               if self.group else f"unknown {self.kind} {name!r}{hint} (known: {', '.join(known)})")

    def info(self, name: str) -> dict[str, object]:
        self.get(name)
        return dict(self._info[name] if name in self._entries else self._plugin_info[name])

    def is_plugin(self, name: str) -> bool:
        """True for an entry-point plugin or a ``module:attr`` name (not a built-in entry)."""
        return name not in self._entries and (name in self._discover() or is_object_name(name))

    def _known(self) -> list[str]:
        return sorted({*self._entries, *self._discover()})

    def names(self) -> list[str]:
        """Built-in names and every plugin that loads (a broken one is skipped with a warning)."""
        out = set(self._entries)
        for name in self._discover():
            try:
                self._load_plugin(name)
            except RobustevalError as exc:
                if name not in self._warned:
                    self._warned.add(name)
                    warnings.warn(f"skipped: {exc}", stacklevel=2)
                continue
            out.add(name)
        return sorted(out)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._entries or name in self._discover())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def subclass_adapter(base: Callable[[], type], info: Callable[[type], dict[str, object]],
                     what: str) -> Callable[[object, str], tuple[object, dict[str, object]]]:
    """The ``adapt`` of a registry of classes (attacks, detectors): a plugin's or ``module:Class``'s
    object must subclass ``base()`` (a callable, so the base may be imported late); ``what``
    names it in the error ("an Attack subclass (robusteval.attacks.Attack)")."""
    def adapt(obj: object, name: str) -> tuple[object, dict[str, object]]:
        if not (isinstance(obj, type) and issubclass(obj, base())):
            raise TypeError(f"expected {what}, got {obj!r}")
        return obj, info(obj)

    return adapt

