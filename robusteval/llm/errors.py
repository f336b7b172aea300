"""The error an LLM backend raises when a request gets no usable answer."""

from __future__ import annotations

from collections.abc import Sequence

from robusteval.errors import RobustevalError


class LLMRequestError(RobustevalError):
    """An LLM request failed; the message names the sample (or the prompt's position).

    Reads like ``sample 'x': LLM request failed: openai:m@https://host/v1: HTTP 400 after
    1 try (not retryable): ...``. ``sample_id`` is None when the caller passed no ids.
    """

    def __init__(self, where: str, backend: str, detail: str, *, sample_id: str | None = None,
                 tries: int = 0, status: int | None = None) -> None:
        super().__init__(f"{where}: LLM request failed: {backend}: {detail}")
        self.sample_id = sample_id
        self.tries = tries
        self.status = status
        self.detail = detail


def where(index: int, total: int, ids: Sequence[str] | None) -> tuple[str, str | None]:
    """How an error names prompt ``index``: ``sample 'id'`` when ids are known, else its position."""
    if ids is not None:
        sid = str(ids[index])
        return f"sample {sid!r}", sid
    return f"prompt {index + 1} of {total}", None
