"""SIGTERM as a clean stop: a scheduler's time limit, ``kill`` or a container stop ends a
command the way Ctrl-C does (files closed, the output folder's claim released, the resume
hint printed) instead of killing the process mid-row. One home for the handler and for
keeping it in place while libraries that install their own (``ray.init``) start up."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Terminated(BaseException):
    """SIGTERM arrived. A BaseException, as KeyboardInterrupt is, so that no ``except
    Exception`` on the way swallows it."""


@contextlib.contextmanager
def keeping_sigterm_handler() -> Iterator[None]:
    """The process's SIGTERM handler as it was before the block, put back afterwards. Only the
    main thread can read or set signal handlers; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def stopping_on_sigterm() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` in the main thread while the block runs."""
    def handler(signum: int, frame: Any) -> None:
        raise Terminated()

    with keeping_sigterm_handler():
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, handler)
        yield


@contextlib.contextmanager
def default_sigterm() -> Iterator[None]:
    """SIGTERM's default disposition while the block runs, the previous handler afterwards. For
    code that installs its own handler and composes it with whatever it finds (Lightning's
    trainer stops at the end of the batch in hand): a handler left by someone else (Ray's
    ``sys.exit``) would otherwise run beside it and end the process mid-batch."""
    with keeping_sigterm_handler():
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        yield
