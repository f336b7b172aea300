"""Reading ``/chat/completions`` answers; anything not usable is a :class:`BadAnswer`.

A 200 is only an answer when its body is a JSON object without an ``error``, with at least
one choice whose ``message.content`` is text (or, for probability scoring, with
``top_logprobs``). Anything else is refused here, so it is never cached or scored.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np


class BadAnswer(Exception):
    """A 200 whose body is not a usable answer. ``retryable``: the server reported an error
    in it (often transient: overload, upstream failure), so another try may succeed."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def excerpt(value: Any, limit: int = 200) -> str:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    return text if len(text) <= limit else text[:limit] + "..."


def check_object(data: Any) -> dict[str, Any]:
    """``data`` if it is a JSON object that is not an error report."""
    if not isinstance(data, dict):
        kind = {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(
            type(data), "null" if data is None else type(data).__name__)
        raise BadAnswer(f"the answer is a JSON {kind}, not an object: {excerpt(data)}")
    err = data.get("error")
    if err or data.get("object") == "error":
        msg = err.get("message", err) if isinstance(err, dict) else (err or data.get("message", data))
        raise BadAnswer(f"the server answered 200 with an error: {excerpt(msg)}", retryable=True)
    return data


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object in a 200 body."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadAnswer(f"the answer is not JSON: {excerpt(body)!r}") from None
    return check_object(data)


def chat_texts(data: dict[str, Any], n: int) -> list[str]:
    """The text of the first ``n`` choices (a server that ignores ``n`` gives fewer)."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise BadAnswer(f"the answer has no choices: {excerpt(data)}")
    texts = []
    for i, choice in enumerate(choices[:n]):
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            reason = choice.get("finish_reason") if isinstance(choice, dict) else None
            raise BadAnswer(f"choice {i} has no text (content={content!r}, finish_reason={reason!r})")
        texts.append(content.strip())
    return texts


def option_probs(data: dict[str, Any], options: Sequence[str]) -> np.ndarray:
    """P(option) from the first token's ``top_logprobs``, renormalized over ``options``
    (tokens equal up to surrounding spaces add up)."""
    try:
        top = data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        mass: dict[str, float] = {}
        for t in top:
            tok = str(t["token"]).strip()
            mass[tok] = mass.get(tok, 0.0) + float(np.exp(float(t["logprob"])))
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise BadAnswer("the answer has no top_logprobs (the server may not support them; "
                        "use mode='parse')") from None
    probs = np.array([mass.get(o, 0.0) for o in options])
    if not probs.sum() > 0:
        raise BadAnswer(f"none of {list(options)} is among the top tokens {sorted(mass)[:20]}")
    return probs / probs.sum()
