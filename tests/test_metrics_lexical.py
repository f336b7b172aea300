from __future__ import annotations

import numpy as np
import pytest

from robusteval import Sample, metrics
from robusteval.errors import InputError

HYP = "the cat sat on the mat"
REF = "the cat is on the mat"


def sample(resp: str = HYP, ref: str | None = REF, refs: tuple[str, ...] = (), ctx=("hello there",),
           sid: str = "s1") -> Sample:
    return Sample(id=sid, task="dialogue", response=resp, context=ctx, reference=ref, references=refs)


@pytest.fixture(scope="module")
def lexical():
    return {n: metrics.load(n) for n in ("bleu", "chrf", "rouge1", "rouge2", "rougeL", "meteor")}


def test_metrics_list_has_the_suite() -> None:
    assert {"bleu", "chrf", "rouge1", "rouge2", "rougeL", "meteor", "bertscore", "unieval", "poe",
            "cross-encoder", "dialogrpt", "llm-judge"} <= set(metrics.names())


def test_rouge_exact_values(lexical) -> None:
    # LCS(the cat on the mat) = 5 of 6 tokens each side; bigram overlap 3 of 5
    assert lexical["rougeL"].score([sample()])[0] == pytest.approx(500 / 6)
    assert lexical["rouge1"].score([sample()])[0] == pytest.approx(500 / 6)
    assert lexical["rouge2"].score([sample()])[0] == pytest.approx(60.0)


def test_bleu_chrf_meteor_match_their_libraries(lexical) -> None:
    import sacrebleu
    from nltk.translate.meteor_score import meteor_score

    from robusteval.metrics.lexical import word_tokens

    bleu = sacrebleu.BLEU(effective_order=True).sentence_score(HYP, [REF]).score
    assert lexical["bleu"].score([sample()])[0] == pytest.approx(bleu)
    assert lexical["bleu"].score([sample()])[0] == pytest.approx(37.99178428257963)  # exp-smoothed: (5/6 * 3/5 * 1/4 * 1/6) ** 0.25
    assert lexical["chrf"].score([sample()])[0] == pytest.approx(
        sacrebleu.CHRF().sentence_score(HYP, [REF]).score)
    assert lexical["meteor"].score([sample()])[0] == pytest.approx(
        100 * meteor_score([word_tokens(REF)], word_tokens(HYP)))


def test_identical_text_scores_100_and_multi_reference_takes_the_best(lexical) -> None:
    for name, m in lexical.items():
        assert m.score([sample(resp=REF)])[0] == pytest.approx(100.0, abs=0.5 if name == "meteor" else 1e-6)  # METEOR keeps a fragmentation penalty
        single = m.score([sample(ref="a completely different line")])[0]
        multi = m.score([sample(ref="a completely different line", refs=(HYP,))])[0]
        assert multi > single and multi == pytest.approx(m.score([sample(ref=HYP)])[0])


def test_against_context_and_last_turn() -> None:
    m = metrics.load("rouge1", against="last_turn")
    s = sample(resp="hello there", ref=None, ctx=("first turn", "hello there"))
    assert m.score([s])[0] == pytest.approx(100.0)
    assert "against=last_turn" in m.reproducibility()


def test_missing_reference_is_a_clear_error(lexical) -> None:
    with pytest.raises(InputError, match=r"sample 'nr', field 'reference'.*needs a non-empty reference"):
        lexical["bleu"].score([sample(), sample(ref=None, sid="nr")])


@pytest.mark.parametrize("bad", ["", "   \n\t"])
def test_empty_candidate_errors_or_is_a_counted_floor(bad: str) -> None:
    with pytest.raises(InputError, match=r"sample 'e', field 'response': empty response"):
        metrics.load("rougeL").score([sample(resp=bad, sid="e")])
    m = metrics.load("rougeL", on_empty="floor")
    out = m.score([sample(), sample(resp=bad, sid="e")])
    assert out[1] == 0.0 and out[0] > 0
    assert m.report()["fallbacks"] == {"empty_response": 1}


def test_huge_input_gives_finite_scores(lexical) -> None:
    huge = ("word " * 20_000)[:100_000]
    for name in ("bleu", "chrf", "rouge1", "rougeL"):
        v = lexical[name].score([sample(resp=huge)])[0]
        assert np.isfinite(v) and 0 <= v <= 100, name


def test_scores_are_deterministic(lexical) -> None:
    batch = [sample(sid=str(i), resp=f"{HYP} {i}") for i in range(5)]
    for m in lexical.values():
        assert np.array_equal(m.score(batch), m.score(batch))


def test_reproducibility_before_any_scoring() -> None:
    # a run that reuses logged scores never calls the metric; the signature must not fail
    for name in ("bleu", "chrf"):
        assert "refs unknown before scoring" in metrics.load(name).reproducibility()
    m = metrics.load("bleu")
    m.score([sample()])
    assert "nrefs:1" in m.reproducibility()
