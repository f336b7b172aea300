"""docs/plugins.md: its Python blocks run in order in an empty folder (one namespace, as a
reader pasting them would) and print exactly what their ``print(...)  # value`` comments say."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


def test_plugins_doc_examples_run_and_print_what_they_say(tmp_path, monkeypatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the doc's mymod.py is found in the current folder
    namespace: dict[str, object] = {"__name__": "__doc_example__"}
    try:
        for i, code in enumerate(blocks):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"docs/plugins.md block {i + 1}", "exec"), namespace)
            want = [m.group(1).strip() for m in re.finditer(r"^print\(.*\)\s+#\s*(.+)$", code, re.M)]
            assert out.getvalue().split("\n")[:-1] == want, f"block {i + 1}"
    finally:
        for name in ("mymod", "mydetectors"):
            sys.modules.pop(name, None)
