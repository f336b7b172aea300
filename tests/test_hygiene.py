"""Text hygiene at the boundaries (issue 11, observation 7): lone surrogates are InputErrors
naming sample and field, invisible-only text is empty text, never a crash or a silent 0."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pytest

from robusteval import Sample, detectors
from robusteval.errors import InputError
from robusteval.metrics.base import Metric, PairMetric
from robusteval.text import check_sample_text, check_text, invalid_unicode, is_blank

# Text in any script is valid input; ZWNJ inside a Persian word and ZWJ inside a Devanagari
# conjunct are legitimate, so neither text is blank.
SCRIPTS = {
    "english": "The committee approved the budget on Tuesday.",
    "chinese": "委员会周二批准了预算。",
    "arabic": "وافقت اللجنة على الميزانية يوم الثلاثاء.",
    "hindi": "समिति ने मंगलवार को बजट को मंज़ूरी दी।",
    "russian": "Комитет утвердил бюджет во вторник.",
    "french": "Le comité a approuvé le budget mardi.",
    "persian_zwnj": "می\u200cخواهم",
    "devanagari_zwj": "क्\u200dष",
}
BLANK = {
    "empty": "", "spaces": " \t\n ", "zero_width": "\u200b\u200c\u200d\u2060", "bom": "\ufeff",
    "controls": "\x00\x01\x07\x7f", "separators": "\u2028\u2029\u3000\u00a0",
    "bidi": "\u200e\u200f\u202e\u2066", "hangul_filler": "\u3164\u115f", "variation": "\ufe0f\u034f",
    "braille_blank": "\u2800", "tags": "\U000e0041\U000e007f", "soft_hyphen": "\u00ad",
}
FIELDS = {  # field name in the error -> a sample with a lone surrogate there
    "response": dict(response="fine \ud800 thanks"),
    "context[1]": dict(context=("hi", "how are \udfff you?")),
    "reference": dict(reference="\udbff"),
    "references[1]": dict(references=("ok", "x\ud834")),
    "fact": dict(fact="\ud800fact"),
    "answer": dict(answer="\udc00"),
}


def sample(sid: str = "s", **fields: object) -> Sample:
    base: dict[str, object] = dict(task="dialogue", response="i am fine thanks", context=("hi", "how are you?"),
                                   reference="i am well")
    base.update(fields)
    return Sample(id=sid, **base)  # type: ignore[arg-type]


class CountingMetric(Metric):
    """Length of the response, counting how many samples reached ``_score``."""

    name: ClassVar[str] = "counting"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.seen: list[str] = []

    def _score(self, samples: list[Sample]) -> np.ndarray:
        self.seen += [s.id for s in samples]
        return np.array([min(100.0, float(len(s.response))) for s in samples])


class CountingPair(CountingMetric, PairMetric):
    name: ClassVar[str] = "counting-pair"


# -- helpers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(BLANK))
def test_invisible_only_text_is_blank(name: str) -> None:
    assert is_blank(BLANK[name])


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_text_in_any_script_is_not_blank_and_is_valid(name: str) -> None:
    text = SCRIPTS[name]
    assert not is_blank(text) and invalid_unicode(text) is None
    assert not is_blank("\u200b" + text + "\u200d")  # invisible padding leaves the text visible


def test_lone_surrogate_is_named_with_position() -> None:
    assert invalid_unicode("ab\ud800") == ("invalid Unicode: lone surrogate U+D800 at character 2 "
                                           "(not a character; it cannot be encoded as UTF-8)")
    assert invalid_unicode("\U0001f600 a valid pair") is None
    with pytest.raises(InputError, match=r"sample 'x1', field 'fact': invalid Unicode: lone surrogate U\+DFFF"):
        check_text("\udfff", "x1", "fact")
    with pytest.raises(InputError, match="field 'answer': expected text, got int"):
        check_text(3, "x1", "answer")
    assert check_text(SCRIPTS["hindi"], "x1", "response") == SCRIPTS["hindi"]


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_check_sample_text_names_the_field(field: str) -> None:
    with pytest.raises(InputError) as err:
        check_sample_text(sample("bad", **FIELDS[field]))
    assert (err.value.sample_id, err.value.field) == ("bad", field)


# -- Metric.score: every metric inherits these checks -----------------------------------------
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_metric_rejects_lone_surrogate_in_any_field_before_scoring(field: str) -> None:
    m = CountingMetric(on_empty="floor")
    with pytest.raises(InputError) as err:
        m.score([sample("ok"), sample("bad", **FIELDS[field])])
    assert (err.value.sample_id, err.value.field) == ("bad", field)
    assert m.seen == []  # checked before any model work


@pytest.mark.parametrize("name", sorted(BLANK))
def test_invisible_only_response_is_empty_for_metrics(name: str) -> None:
    strict = CountingMetric()
    with pytest.raises(InputError, match="field 'response': empty or invisible-only response"):
        strict.score([sample("blank", response=BLANK[name])])
    floor = CountingMetric(on_empty="floor", empty_score=7.0)
    got = floor.score([sample("a"), sample("blank", response=BLANK[name])])
    assert got.tolist() == [16.0, 7.0] and floor.seen == ["a"]
    assert floor.report()["fallbacks"] == {"empty_response": 1}  # counted, never silent


def test_text_in_every_script_reaches_the_metric() -> None:
    m = CountingMetric()
    got = m.score([sample(k, response=v) for k, v in SCRIPTS.items()])
    assert m.seen == list(SCRIPTS) and (got > 0).all()


@pytest.mark.parametrize("ref", ["\u200b\u200b", "\x00\x01", "\ufeff ", ""])
def test_invisible_only_reference_is_missing(ref: str) -> None:
    m = CountingPair()
    with pytest.raises(InputError, match=r"field 'reference'.*non-empty reference"):
        m.score([sample("r", reference=ref)])
    assert m.seen == []


def test_invisible_only_context_is_missing_for_context_metrics() -> None:
    m = CountingPair(against="last_turn")
    with pytest.raises(InputError, match="field 'last_turn'"):
        m.score([sample("c", context=("hi", "\u200d\u2060"))])
    assert CountingPair(against="last_turn").score([sample("c", context=("hi", SCRIPTS["persian_zwnj"]))])[0] > 0


class EncodingBackend:
    """A stand-in LLM that, like a real tokenizer or HTTP client, encodes its prompt as UTF-8."""

    name = "encoding"

    def generate(self, prompts: Sequence[str], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 32, seed: int = 0) -> list[list[str]]:
        return [["Score: 4" for _ in range(n)] for p in prompts if p.encode("utf-8")]

    def next_token_probs(self, prompts: Sequence[str], options: Sequence[str]) -> np.ndarray:
        for p in prompts:
            p.encode("utf-8")
        return np.full((len(prompts), len(options)), 1.0 / len(options))


@pytest.mark.parametrize("field", ["response", "context[1]", "fact"])
def test_llm_judge_rejects_lone_surrogates_before_the_backend(field: str) -> None:
    from robusteval.metrics.llm_judge import LLMJudge

    judge = LLMJudge(backend=EncodingBackend(), template="adveval-dialogue")
    assert judge.score([sample("ok")]).shape == (1,)
    with pytest.raises(InputError) as err:
        judge.score([sample("bad", **FIELDS[field])])
    assert (err.value.sample_id, err.value.field) == ("bad", field)


# -- detectors and the guard ----------------------------------------------------------------
@pytest.mark.parametrize("name", ["context_copy", "generic", "judge_injection", "nonalnum", "speaker_tag",
                                  "gec", "parse_triple"])
def test_detectors_reject_lone_surrogates_and_treat_invisible_text_as_empty(name: str) -> None:
    det = detectors.load(name, **({"backend": "builtin"} if name == "gec" else {}))
    for field, fields in FIELDS.items():
        with pytest.raises(InputError) as err:
            det.detect([sample("ok"), sample("bad", **fields)])
        assert (err.value.sample_id, err.value.field) == ("bad", field)
    blank = [sample(k, response=v) for k, v in BLANK.items()]
    assert det.detect(blank).tolist() == [1.0] * len(BLANK)
    assert det.report()["fallbacks"]["empty_response"] == len(BLANK)


def test_perplexity_detector_rejects_lone_surrogates(tiny_lm) -> None:
    det = detectors.load("perplexity", model=str(tiny_lm))
    with pytest.raises(InputError, match="field 'response': invalid Unicode"):
        det.detect([sample("bad", response="the cat \ud800")])
    assert det.detect([sample("z", response="\u200b\u2060")]).tolist() == [1.0]


@pytest.mark.parametrize("policy", ["flag", "penalize", "floor", "reject", "sanitize"])
def test_every_guard_policy_gives_clear_errors_and_counted_fallbacks(policy: str) -> None:
    g = detectors.guard(CountingMetric(), ["nonalnum", "speaker_tag"], policy=policy)
    for field, fields in FIELDS.items():
        with pytest.raises(InputError) as err:
            g.score([sample("bad", **fields)])
        assert (err.value.sample_id, err.value.field) == ("bad", field)
    with pytest.raises(InputError, match="field 'response': empty or invisible-only"):
        g.score([sample("z", response="\u200b")])
    floor = detectors.guard(CountingMetric(on_empty="floor"), ["nonalnum"], policy=policy)
    assert floor.score([sample("z", response="\u200b\u200c")]).tolist() == [0.0]
    assert floor.report()["fallbacks"] == {"empty_response": 1}


# -- model metrics: text a tokenizer cannot read, inputs longer than a model -----------------
UNREADABLE = "\ue000\U000f0000\ufffd"  # private-use, plane-15 private-use, replacement character


def test_bertscore_text_its_tokenizer_drops_is_empty_text_not_a_silent_zero() -> None:
    from robusteval.metrics.bertscore import BERTScore

    strict = BERTScore()
    assert not is_blank(UNREADABLE) and not strict.readable(UNREADABLE) and strict.readable("\u0301a")
    with pytest.raises(InputError, match="field 'response': bertscore's tokenizer keeps no token"):
        strict.score([sample("u", response=UNREADABLE)])
    floor = BERTScore(on_empty="floor")
    assert floor.score([sample("u", response=UNREADABLE)]).tolist() == [0.0]
    assert floor.report()["fallbacks"] == {"empty_after_tokenization": 1}
    with pytest.raises(InputError, match="field 'reference'"):
        strict.score([sample("r", reference=UNREADABLE)])
    mixed = strict.score([sample("m", reference=UNREADABLE, references=("i am well",))])
    assert mixed.tolist() == strict.score([sample("m")]).tolist()  # the unreadable reference is left out


def test_dialogrpt_never_feeds_more_tokens_than_the_model_has_positions(tiny_gpt2) -> None:
    from robusteval.metrics.dialogrpt import DialogRPT

    m = DialogRPT(head="updown", checkpoints={"updown": str(tiny_gpt2)})
    assert m.max_length == 256  # the tiny GPT-2 has 256 positions; DialogRPT's own 1024
    long = sample("long", context=tuple("how are you today ?" for _ in range(400)))
    got = m.score([long, sample("short")])
    assert np.isfinite(got).all() and got.shape == (2,)


def test_unieval_invisible_only_source_is_missing(tiny_t5) -> None:
    from robusteval.metrics.unieval import UniEval

    m = UniEval(model=str(tiny_t5), dimension="consistency")
    doc = Sample(id="d", task="summarization", response="the cat sat on the mat .", context=("\u200b\u2060 \ufeff",))
    with pytest.raises(InputError, match="sample 'd', field 'context'"):
        m.score([doc])
    assert np.isfinite(m.score([Sample(id="ok", task="summarization", response="the cat sat on the mat .",
                                       context=("the dog ate my homework .",))])).all()
