"""Transfer attacks: replay adversarial texts found against one metric on another.

A :class:`ReplayAttack` returns, for each sample, the adversarial text a recorded attack run
produced (against the plain or the trained metric). Run through the attack runner with a
guarded metric as the victim, it measures *transfer*: the attacker did not know about the
guard. The adaptive counterpart reruns the search attacks with the guard inside the loop.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

from robusteval.attacks.base import COUNTED_OUTCOMES, Attack, AttackResult
from robusteval.types import Sample

# meta written by the runner for the victim it ran against; not carried over (a replayed row
# marked llm_failed by the run it came from would otherwise be retried by every resume)
RUN_META = ("guard", "reference_score", "reference_guarded", "victim_counters", "llm_failed", "input_version")


class ReplayAttack(Attack):
    """Replays one recorded attack's adversarial texts (see the module docstring)."""

    needs_victim = False

    def __init__(self, rows: Sequence[dict[str, Any]], seed: int = 0) -> None:
        super().__init__(seed)
        if not rows:
            raise ValueError("ReplayAttack needs at least one recorded row")
        first = rows[0]
        self.name = first["attack"]  # type: ignore[misc]
        self.family = first["family"]  # type: ignore[misc]
        self.direction = first["direction"]  # type: ignore[misc]
        self.source = f"transfer of recorded {first['attack']} results"  # type: ignore[misc]
        self.rows = {r["sample_id"]: r for r in rows}

    @property
    def init_options(self) -> dict[str, Any]:
        """The recorded attack replayed, not its rows: each row enters its replay's row as
        :meth:`row_version`, so a resume redoes exactly the rows whose recording changed (a base
        sample attacked again after a failed LLM request) instead of refusing the whole run."""
        return {"args": [], "kwargs": {"seed": self.seed, "replays": [self.name, self.family, self.direction]}}

    def row_version(self, sample: Sample) -> str | None:
        row = self.rows.get(sample.id)
        recorded = [row.get("outcome"), row.get("adversarial")] if row else None
        text = json.dumps(recorded, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def run(self, sample: Sample, victim: Any = None, budget: int | None = None) -> AttackResult:
        start = time.perf_counter()
        row = self.rows.get(sample.id)
        applicable = bool(row and row.get("outcome") in COUNTED_OUTCOMES and row.get("adversarial") is not None)
        meta = {k: v for k, v in (row.get("meta") or {}).items() if k not in RUN_META} if row else {}
        result = self.row(sample, adversarial=row["adversarial"] if applicable and row else None,
                          outcome="attacked" if applicable else "skipped",
                          note="" if applicable else "no recorded adversarial text for this sample", meta=meta)
        result.wall_time = time.perf_counter() - start
        return result


def replays(rows: Sequence[dict[str, Any]], only: set[str] | None = None) -> list[ReplayAttack]:
    """One :class:`ReplayAttack` per recorded attack (in first-seen order), optionally ``only`` some."""
    by_attack: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if only is None or r["attack"] in only:
            by_attack.setdefault(r["attack"], []).append(r)
    return [ReplayAttack(group) for group in by_attack.values()]
