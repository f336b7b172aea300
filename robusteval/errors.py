"""Exceptions with enough detail to find the offending input."""

from __future__ import annotations


class RobustevalError(Exception):
    """Base class of every error robusteval raises on purpose.

    Pickles as its message and attributes, whatever its subclass's constructor takes, so an
    error raised on a Ray worker reaches the driver as the same error."""

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild_error, (type(self), self.args, dict(self.__dict__))


def _rebuild_error(cls: type[RobustevalError], args: tuple[object, ...],
                   state: dict[str, object]) -> RobustevalError:
    err = Exception.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class DataFormatError(RobustevalError):
    """A data file is not in the expected format; names file, line and field."""

    def __init__(self, path: object, message: str, line: int | None = None,
                 field: str | None = None) -> None:
        where = str(path)
        if line is not None:
            where += f", line {line}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line
        self.field = field


class EmptyDataError(DataFormatError):
    """A data source has no rows (a folder of shards skips an empty one)."""


class InputError(RobustevalError):
    """A sample cannot be scored as given; names the sample id and field."""

    def __init__(self, sample_id: str, field: str, message: str) -> None:
        super().__init__(f"sample {sample_id!r}, field {field!r}: {message}")
        self.sample_id = sample_id
        self.field = field


class MissingResourceError(RobustevalError):
    """A model, corpus or data folder is not available; the message says how to get it."""


class UnknownNameError(RobustevalError, KeyError):
    """A registry lookup failed."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class RunMismatchError(RobustevalError):
    """``--resume`` was asked to continue an output folder written by a different run."""


class FolderBusyError(RobustevalError):
    """Another process is writing the output folder a command was pointed at."""


class OptionError(RobustevalError, ValueError):
    """A metric, attack, detector or perturbation was given an option value it rejects
    (:func:`robusteval.registry.build`); still a ValueError, as the constructor raised."""


class UnknownOptionError(RobustevalError, TypeError):
    """A factory was given an option it does not take; still the TypeError Python raised."""
