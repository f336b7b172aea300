"""Vasselli & Watanabe's protocol pieces: detokenize + truecase (§3.1), the ground-truth
selection (§3), DialogRPT's composite as the default (§3.2.1), the combined prompt (§3.2.3)."""

from __future__ import annotations

import numpy as np
import pytest

from robusteval import Sample
from robusteval.data.preprocess import detokenize_truecase, preprocess
from robusteval.data.select import select
from robusteval.metrics.llm_judge import LLMJudge


@pytest.mark.parametrize(("raw", "clean"), [
    ("i 'm fine . how are you ?", "I'm fine. How are you?"),
    ("do n't worry , it 's ok !", "Don't worry, it's ok!"),
    ("don 't you think i can ?", "Don't you think I can?"),
    ("Already fine.", "Already fine."),
    ("我很好 。", "我很好。"),
    ("привет , как дела ?", "Привет, как дела?"),
    ("مرحبا ، كيف حالك ؟", "مرحبا، كيف حالك؟"),
    ("मैं ठीक हूँ ।", "मैं ठीक हूँ।"),
    ("ça va ? oui .", "Ça va? Oui."),
])
def test_detokenize_and_truecase(raw: str, clean: str) -> None:
    """§3.1: "The dataset was provided pretokenized and lowercased ... so the dataset was
    detokenized and truecased using regular expressions as a preprocessing step"."""
    assert detokenize_truecase(raw) == clean


def test_preprocess_applies_to_response_context_and_references() -> None:
    s = Sample(id="a", task="dialogue", response="i 'm here .", context=("where are you ?",), reference="i 'm home .")
    (out,) = preprocess([s], "detokenize")
    assert (out.response, out.context, out.reference) == ("I'm here.", ("Where are you?",), "I'm home.")
    assert preprocess([s], None) == [s]
    with pytest.raises(ValueError, match="preprocess"):
        preprocess([s], "lowercase")


def test_ground_truth_selection() -> None:
    """§3: the attacks perturb the ground-truth response and compare against it."""
    ctx = ("hi",)
    gt = Sample(id="g", task="dialogue", response="hello", context=ctx, meta={"system_id": "Original GT"})
    other = Sample(id="o", task="dialogue", response="hey", context=ctx, meta={"system_id": "Nucleus"},
                   human={"overall": 5})
    assert select([other, gt], "ground-truth") == [gt]
    # the original USR PersonaChat file names it in full
    usr_gt = Sample(id="p", task="dialogue", response="hi there", context=("yo",),
                    meta={"system_id": "Original Ground Truth"})
    assert select([usr_gt], "ground-truth") == [usr_gt]
    unmarked = Sample(id="u", task="dialogue", response="yo", context=ctx, meta={"dataset": "dailydialog-zhao"})
    with pytest.raises(ValueError, match="dailydialog-zhao marks none"):
        select([unmarked], "ground-truth")


def test_dialogrpt_default_is_the_composite() -> None:
    """§3.2.1: "The composite DialogRPT score is used as the overall score"."""
    import inspect

    from robusteval.metrics.dialogrpt import DialogRPT

    assert inspect.signature(DialogRPT.__init__).parameters["head"].default == "ensemble"


class Scripted:
    name = "scripted"
    calls = 0
    cache_hits = 0

    def generate(self, prompts, n=1, temperature=0.0, max_new_tokens=32, seed=0):
        self.prompts = prompts
        return [["Content: 4\nGrammar: 5\nRelevance: 3\nOverall: 2"] for _ in prompts]


def test_combined_prompt_averages_the_overall_with_the_three() -> None:
    """§3.2.3: "The prompt additionally asks for an overall score, which is not used directly,
    but averaged along with the sub-metrics, to generate the composite score"."""
    be = Scripted()
    judge = LLMJudge(backend=be, template="vasselli-combined", max_new_tokens=40)
    got = judge.score([Sample(id="d", task="dialogue", response="Sure.", context=("Can you help?",))])[0]
    assert got == pytest.approx(100 * (np.mean([4, 5, 3, 2]) - 1) / 4)
    assert "Overall: <1-5>" in be.prompts[0]
