from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from robusteval import Sample, data
from robusteval.errors import InputError
from robusteval.metrics.unieval import PROMPTS, UniEval, build_inputs

DIALOG = Sample(id="d", task="dialogue", response="i am fine thanks . how are you today ?",
                context=("how are you today ?", "i am fine ."), fact="the cat sat on the mat .")
SUMM = Sample(id="s", task="summarization", response="the cat sat on the mat . the dog ate my homework .",
              context=("the dog ate my homework . the cat sat on the mat .",), reference="the cat sat .")
D2T = Sample(id="t", task="data_to_text", response="the cat sat on the mat .", context=("inform(cat)",),
             reference="the cat sat .")
FACT = Sample(id="f", task="fact", response="the cat sat . the dog ate my homework .",
              context=("the dog ate my homework .",))

# The 12 upstream Boolean-QA inputs, spelled out (UniEval utils.add_question)
EXPECTED = {
    ("summarization", "coherence"): ["question: Is this a coherent summary to the document? </s> summary: the cat sat on the mat . the dog ate my homework . </s> document: the dog ate my homework . the cat sat on the mat ."],
    ("summarization", "consistency"): ["question: Is this claim consistent with the document? </s> claim: the cat sat on the mat . </s> document: the dog ate my homework . the cat sat on the mat .",
                                       "question: Is this claim consistent with the document? </s> claim: the dog ate my homework . </s> document: the dog ate my homework . the cat sat on the mat ."],
    ("summarization", "fluency"): ["question: Is this a fluent paragraph? </s> paragraph: the cat sat on the mat .",
                                   "question: Is this a fluent paragraph? </s> paragraph: the dog ate my homework ."],
    ("summarization", "relevance"): ["question: Is this summary relevant to the reference? </s> summary: the cat sat on the mat . the dog ate my homework . </s> reference: the cat sat ."],
    ("dialogue", "naturalness"): ["question: Is this a natural response in the dialogue? </s> response: i am fine thanks . how are you today ?"],
    ("dialogue", "coherence"): ["question: Is this a coherent response given the dialogue history? </s> response: i am fine thanks . how are you today ? </s> dialogue history: how are you today ? \n i am fine . \n\n"],
    ("dialogue", "engagingness"): ["question: Is this an engaging and informative response according to the dialogue history and fact? </s> response: i am fine thanks . </s> dialogue history: how are you today ? \n i am fine . \n\n </s> fact: the cat sat on the mat .",
                                   "question: Is this an engaging and informative response according to the dialogue history and fact? </s> response: how are you today ? </s> dialogue history: how are you today ? \n i am fine . \n\n </s> fact: the cat sat on the mat ."],
    ("dialogue", "groundedness"): ["question: Is this response consistent with knowledge in the fact? </s> response: i am fine thanks . how are you today ? </s> fact: the cat sat on the mat ."],
    ("dialogue", "understandability"): ["question: Is this an understandable response in the dialogue? </s> response: i am fine thanks . how are you today ?"],
    ("data2text", "naturalness"): ["question: Is this a fluent utterance? </s> utterance: the cat sat on the mat ."],
    ("data2text", "informativeness"): ["question: Is this sentence informative according to the reference? </s> sentence: the cat sat on the mat . </s> reference: the cat sat ."],
    ("fact", "consistency"): ["question: Is this claim consistent with the document? </s> claim: the cat sat . </s> document: the dog ate my homework .",
                              "question: Is this claim consistent with the document? </s> claim: the dog ate my homework . </s> document: the dog ate my homework ."],
}
SAMPLE_FOR = {"summarization": SUMM, "dialogue": DIALOG, "data2text": D2T, "fact": FACT}


def test_all_twelve_prompts_are_upstream_strings() -> None:
    assert sum(len(v) for v in PROMPTS.values()) == 12
    for (task, dim), expected in EXPECTED.items():
        inputs, counts = build_inputs(task, dim, [SAMPLE_FOR[task]])
        assert inputs == expected, (task, dim)
        assert counts == [len(expected)]


def test_missing_fact_is_an_input_error() -> None:
    s = Sample(id="nofact", task="dialogue", response="hi", context=("hello",))
    with pytest.raises(InputError, match="'nofact', field 'fact'"):
        build_inputs("dialogue", "groundedness", [s])


def _manual_boolean(folder: Path, text: str) -> float:
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    yes, no = tok("Yes")["input_ids"][0], tok("No")["input_ids"][0]
    enc = tok([text], return_tensors="pt")
    labels = tok(["No"], return_tensors="pt")["input_ids"][:, :1]  # upstream's dummy target
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels)
        probs = torch.softmax(out.logits.view(-1, model.config.vocab_size), 1)
    return float(probs[0, yes] / (probs[0, yes] + probs[0, no]))


def test_score_is_p_yes_over_yes_plus_no_and_aggregates_like_upstream(tiny_t5) -> None:
    m = UniEval(model=str(tiny_t5), dimension="overall")
    dims = m.score_dimensions([DIALOG])
    # engagingness is the SUM of two sentence scores
    eng_inputs, _ = build_inputs("dialogue", "engagingness", [DIALOG])
    expect_eng = sum(_manual_boolean(tiny_t5, x) for x in eng_inputs)
    assert dims["engagingness"][0] == pytest.approx(expect_eng, abs=1e-5)
    nat_inputs, _ = build_inputs("dialogue", "naturalness", [DIALOG])
    assert dims["naturalness"][0] == pytest.approx(_manual_boolean(tiny_t5, nat_inputs[0]), abs=1e-5)
    five = ["naturalness", "coherence", "engagingness", "groundedness", "understandability"]
    assert dims["overall"][0] == pytest.approx(np.mean([dims[d][0] for d in five]))
    # summarization consistency is the MEAN over sentences
    s = UniEval(model=str(tiny_t5), dimension="consistency").score_dimensions([SUMM])["consistency"][0]
    cons_inputs, _ = build_inputs("summarization", "consistency", [SUMM])
    assert s == pytest.approx(np.mean([_manual_boolean(tiny_t5, x) for x in cons_inputs]), abs=1e-5)


def test_metric_scale_batching_and_determinism(tiny_t5) -> None:
    m = UniEval(model=str(tiny_t5), dimension="fluency", batch_size=1)
    batch = [SUMM, SUMM.with_response("the cat ."), SUMM.with_response("yes no yes")]
    a = m.score(batch)
    b = UniEval(model=str(tiny_t5), dimension="fluency", batch_size=8).score(batch)
    assert np.allclose(a, b, atol=1e-4) and np.all((a >= 0) & (a <= 100))
    assert np.array_equal(a, m.score(batch))
    with pytest.raises(ValueError, match="no dimension 'groundedness'"):
        UniEval(model=str(tiny_t5), dimension="groundedness", task="summarization")


GOLDEN = [("usr-topicalchat-unieval", "UNIEVAL_DIALOG_CHECKPOINT"),
          ("qags-xsum-unieval", "UNIEVAL_FACT_CHECKPOINT"),
          ("sfres-unieval", "UNIEVAL_SUM_CHECKPOINT")]


@pytest.mark.slow
@pytest.mark.parametrize(("dataset", "env"), GOLDEN)
def test_golden_against_official_predictions(data_dir, dataset: str, env: str) -> None:
    ckpt = os.environ.get(env)
    if not ckpt:
        pytest.skip(f"set {env} to a local copy of the official UniEval checkpoint to compare "
                    "with upstream's per-item predictions (no hub access here)")
    samples = data.load(dataset, data_dir, limit=40)
    dims = UniEval(model=ckpt).score_dimensions(samples)
    for i, s in enumerate(samples):
        for dim, want in s.meta["unieval_predict"].items():
            # sentence splitting differs from punkt on a few items; most agree to 1e-3
            assert dims[dim][i] == pytest.approx(want, abs=0.05), (s.id, dim, json.dumps(want))


NOFACT = Sample(id="nf", task="dialogue", response="i am fine thanks . how are you today ?",
                context=("how are you today ?", "i am fine ."))


def test_dialogue_overall_without_a_fact_does_not_raise(tiny_t5) -> None:
    """Vasselli & Watanabe §3.2.2: DailyDialog has no fact, so groundedness is left out and the
    content question is asked without the fact; the fallback is counted."""
    m = UniEval(model=str(tiny_t5), dimension="overall")
    dims = m.score_dimensions([NOFACT, DIALOG])
    assert np.isfinite(dims["overall"]).all()
    assert np.isnan(dims["groundedness"][0]) and np.isfinite(dims["groundedness"][1])
    assert np.isfinite(dims["engagingness-nofact"][0]) and np.isnan(dims["engagingness-nofact"][1])
    nofact_dims = ("naturalness", "coherence", "engagingness-nofact", "understandability")
    assert dims["overall"][0] == pytest.approx(np.mean([dims[d][0] for d in nofact_dims]))
    assert m.report()["fallbacks"]["overall_without_fact"] == 1
    inputs, _ = build_inputs("dialogue", "engagingness-nofact", [NOFACT])
    assert all("fact" not in x.split("</s>")[0] and "</s> fact:" not in x for x in inputs)


def test_unieval_altered_weights(tiny_t5) -> None:
    """Vasselli & Watanabe App. A: "content * 0.4 + grammar * 0.2 + relevance * 0.4" with
    content = the fact-free content prompt, grammar = naturalness, relevance = coherence."""
    from robusteval.metrics import load as load_metric

    alt = load_metric("unieval-altered", model=str(tiny_t5))
    dims = alt.score_dimensions([NOFACT])
    want = 0.4 * dims["engagingness-nofact"][0] + 0.2 * dims["naturalness"][0] + 0.4 * dims["coherence"][0]
    assert dims["overall"][0] == pytest.approx(want)
    assert "groundedness" not in dims and "understandability" not in dims
    assert "overall_without_fact" not in alt.report()["fallbacks"]  # by design, not a fallback
    assert alt.score([NOFACT])[0] == pytest.approx(min(100.0, 100 * want))
    grammar = load_metric("unieval-altered", model=str(tiny_t5), dimension="grammar")
    assert grammar.score_dimensions([NOFACT])["overall"][0] == pytest.approx(dims["naturalness"][0])
    assert grammar.aspect == "Fluency"
    with pytest.raises(ValueError, match="unieval-altered dimension"):
        load_metric("unieval-altered", model=str(tiny_t5), dimension="groundedness")
