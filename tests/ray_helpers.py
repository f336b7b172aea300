"""Victims for the Ray backend tests. Ray workers import this module by name (the test
cluster puts tests/ on their PYTHONPATH), so the objects ship by reference."""

from __future__ import annotations

import os
from pathlib import Path

from toy import LengthMetric

from robusteval import Sample

ATTACKS = ("generic-hello", "reversed-words", "repeat-words", "previous-utterance-prefix", "judge-master-keys",
           "null-model")  # null-model is fitted on the driver: its fitted state must reach the workers


def make_samples(n: int) -> list[Sample]:
    """Dialogue samples in six scripts (the rows must survive the trip to a worker and back)."""
    texts = ["this is answer number {i} .", "这是第 {i} 个回答 。", "هذه هي الإجابة رقم {i} .",
             "यह उत्तर संख्या {i} है ।", "это ответ номер {i} .", "voici la réponse numéro {i} ."]
    return [Sample(id=f"s{i}", task="dialogue", response=texts[i % len(texts)].format(i=i),
                   context=("hello .", f"question {i} ?")) for i in range(n)]


class CrashOnce(LengthMetric):
    """LengthMetric whose *worker* process dies (``os._exit``) the first time it scores
    ``crash_id`` (every time with ``always``); ``marker`` records that it did. The driver that
    built it never crashes."""

    name = "crash-once"

    def __init__(self, marker: str, crash_id: str = "s5", delay: float = 0.0, always: bool = False) -> None:
        super().__init__(delay=delay)
        self.marker, self.crash_id, self.driver_pid, self.always = marker, crash_id, os.getpid(), always

    def _score(self, samples):
        if os.getpid() != self.driver_pid and any(s.id == self.crash_id for s in samples):
            marker = Path(self.marker)
            if self.always or not marker.exists():
                marker.write_text(str(os.getpid()))
                os._exit(1)
        return super()._score(samples)


class CountedBuilds(LengthMetric):
    """LengthMetric that appends the building process's id to ``log`` each time it is built."""

    name = "counted-builds"

    def __init__(self, log: str) -> None:
        super().__init__()
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
