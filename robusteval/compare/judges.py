"""The judge section of a comparison (issue 16): invariance of pairwise judges and the transfer
of universal phrases between the suite's victims.

* **Flip rates** -- for a pairwise judge victim (``llm-pairwise``): how often its verdict on
  the suite's test samples changes when the two answers swap positions (Zheng et al. 2023's
  position consistency) and when the rubric is reworded (RobustJudge 2025's template
  sensitivity; template ``suite.judges.rubric_template``), each a flip-rate record
  (:func:`robusteval.stats.flip_rate`: flips / n with a Wilson interval).
* **Transfer** -- Raina et al. 2024 find a universal phrase searched on a surrogate judge
  transfers to other judges. When the suite runs ``judge-universal-phrase``, the phrase fitted
  against each victim (its plain variant) is appended unchanged for every other victim
  (``judge-universal-phrase-transfer``) and its ASR reported as surrogate -> target.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from robusteval.types import Sample

PHRASE = "judge-universal-phrase"


def flip_checks(metric: Any, samples: list[Sample], options: dict[str, Any]) -> dict[str, Any] | None:
    """Position and rubric flip rates of a pairwise judge (None for any other metric)."""
    from robusteval.metrics.pairwise import PairwiseJudge, position_flips, rubric_flips

    if not isinstance(metric, PairwiseJudge):
        return None
    margin = float(options.get("margin", 0.0))
    clusters = [s.conversation_key() for s in samples]
    out = {"position": position_flips(metric, samples, margin=margin, clusters=clusters)}
    alt = options.get("rubric_template", "pairwise-reworded")
    if alt:
        out["rubric"] = {**rubric_flips(metric, samples, alt_template=alt, margin=margin, clusters=clusters),
                         "template": alt}
    return out


def fitted_phrase(victim_dir: Path) -> tuple[str, list[str]] | None:
    """The universal phrase the victim's plain variant was attacked with, and the ids of the
    samples it was fitted on (None if that attack did not run)."""
    path = victim_dir / "plain" / "attacks" / "fitted.json"
    if not path.is_file():
        return None
    state = json.loads(path.read_text(encoding="utf-8")).get(PHRASE)
    return None if state is None else (str(state["phrase"]), list(state.get("fitted_on", [])))


def phrase_transfer(samples: list[Sample], plain: dict[str, Any], dirs: dict[str, Path], out: Path,
                    resume: bool, budget: int, dataset: str, criteria: Any, seed: int) -> dict[str, Any]:
    """ASR of each victim's phrase on every other victim: ``{surrogate: {target: record}}``,
    where a record is the primary-criterion ASR (:func:`robusteval.asr.asr_table`) and the phrase."""
    from robusteval.asr import asr_table
    from robusteval.attacks.judge import TransferredPhrase
    from robusteval.attacks.runner import run_attacks
    from robusteval.results import slug

    result: dict[str, Any] = {}
    for source, folder in dirs.items():
        found = fitted_phrase(folder)
        if found is None:
            continue
        phrase, fitted_on = found
        # the surrogate's fitting samples stay out of the ASR on the target too
        fit_on = [s for s in samples if s.id in set(fitted_on)]
        for target, metric in plain.items():
            if target == source:
                continue
            rows = list(run_attacks(samples, [TransferredPhrase(phrase=phrase, seed=seed)], metric,
                                    out / f"{slug(source)}__to__{slug(target)}" / "results.jsonl", resume=resume,
                                    budget=budget, dataset=dataset, criteria=criteria, fit_on=fit_on))
            table = asr_table(rows, key=lambda r: r.attack)
            record = table.get(TransferredPhrase.name, {}).get("primary")
            result.setdefault(source, {})[target] = {"phrase": phrase, "asr": record}
    return result
