"""An on-disk cache of LLM answers: one JSON file per request, written atomically.

Only answers the backend (and its caller) accepted are written; an entry read back is
checked again, so a bad entry left by an older version is ignored and replaced.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any


def request_key(*parts: Any) -> str:
    """A stable hash of a request (same text, same key; escapes make it byte-identical
    across platforms whatever the script of the prompt)."""
    return hashlib.sha256(json.dumps(list(parts), sort_keys=True).encode("utf-8")).hexdigest()


class ResponseCache:
    """JSON answers under ``folder`` by request key; ``folder=None`` caches nothing."""

    def __init__(self, folder: str | os.PathLike[str] | None) -> None:
        self.folder = Path(folder) if folder is not None else None
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{key}.json"

    def get(self, key: str) -> Any | None:
        """The stored answer, or None (missing or unreadable)."""
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return None

    def put(self, key: str, data: Any) -> None:
        path = self._path(key)
        if path is None:
            return
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)

    def drop(self, key: str) -> None:
        path = self._path(key)
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
