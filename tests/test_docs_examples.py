"""The Python examples in the docs run, and print what their comments say they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
RUNNABLE = ["judges.md"]  # docs whose ```python blocks are self-contained (no model downloads)
# single blocks of other docs (the rest of the page needs checkpoints): doc, a string in the block
RUNNABLE_BLOCKS = [("metrics.md", 'metrics.load("committee"')]


def blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def expected(code: str) -> list[str]:
    """What each ``print(...)  # <value>`` line says it prints (the comment up to a colon)."""
    return [m.group(1).strip() if m.group(1).lstrip().startswith(("[", "{")) else m.group(1).split(":")[0].strip()
            for m in re.finditer(r"^print\(.*\)\s+#\s*(.+)$", code, re.M)]


def run_block(code: str, name: str) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"docs/{name}", "exec"), {"__name__": "__doc_example__"})
    assert out.getvalue().split("\n")[:-1] == expected(code)


@pytest.mark.parametrize("name", RUNNABLE)
def test_doc_examples_print_what_they_say(name: str) -> None:
    found = blocks(DOCS / name)
    assert found, f"docs/{name} has no python example"
    for code in found:
        run_block(code, name)


@pytest.mark.parametrize(("name", "marker"), RUNNABLE_BLOCKS)
def test_single_doc_blocks_print_what_they_say(name: str, marker: str) -> None:
    found = [code for code in blocks(DOCS / name) if marker in code]
    assert len(found) == 1, f"docs/{name}: expected one python block with {marker!r}, found {len(found)}"
    assert expected(found[0]), f"docs/{name}: the block prints nothing it promises"
    run_block(found[0], name)
