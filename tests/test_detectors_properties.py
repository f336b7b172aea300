"""Property-based tests: no detector crashes on arbitrary Unicode, empty or huge input, and
every suspicion is a finite number in [0, 1]."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robusteval import Sample, detectors

CHEAP = ["context_copy", "generic", "judge_injection", "nonalnum", "speaker_tag"]
SPACY = ["gec", "parse_triple"]

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)
contexts = st.lists(st.text(max_size=80), min_size=0, max_size=3)


def sample(response: str, context: list[str], task: str = "dialogue") -> Sample:
    ctx = tuple(context) or ("a context turn",)
    return Sample(id="h", task=task, response=response, context=ctx, reference=ctx[-1] or "a reference")


def check(det, samples: list[Sample]) -> None:
    s = det.detect(samples)
    assert s.shape == (len(samples),) and np.isfinite(s).all() and ((s >= 0) & (s <= 1)).all()


@pytest.fixture(scope="module")
def loaded(tiny_lm):
    out = {n: detectors.load(n) for n in CHEAP + SPACY}
    out["gec"] = detectors.load("gec", backend="builtin")
    out["perplexity"] = detectors.load("perplexity", model=str(tiny_lm))
    return out


@pytest.mark.parametrize("name", CHEAP)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts, context=contexts, task=st.sampled_from(["dialogue", "summarization"]))
def test_cheap_detectors_any_unicode(loaded, name: str, text: str, context: list[str], task: str) -> None:
    check(loaded[name], [sample(text, context, task)])


@pytest.mark.parametrize("name", [*SPACY, "perplexity"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts, context=contexts)
def test_model_detectors_any_unicode(loaded, name: str, text: str, context: list[str]) -> None:
    check(loaded[name], [sample(text, context, "summarization")])


@pytest.mark.parametrize("name", [*CHEAP, *SPACY, "perplexity"])
def test_empty_and_huge_inputs(loaded, name: str) -> None:
    huge = ("The committee met on Tuesday. " * 7000) + "~&;$}%(" * 1000  # ~220k characters
    samples = [sample("", ["x"]), sample(" \n\t ", ["x"]), sample(huge, ["x"]), sample("ok", [huge])]
    check(loaded[name], samples)
    assert loaded[name].detect(samples[:2]).tolist() == [1.0, 1.0]
