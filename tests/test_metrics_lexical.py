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
    with pytest.raises(InputError, match=r"sample 'e', field 'response': empty (or invisible-only )?response"):
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


# -- every script (issue 11, observation 8) ----------------------------------------------------

# (identical text, a partly overlapping text, rouge1 of the pair by hand: P, R -> F1)
SCRIPTS = {
    "english": ("I am very sorry about the delay.", "I am sorry for the long delay.", 2 * 5 / (7 + 7) * 100),
    "french": ("Je suis vraiment désolé pour le retard.", "Je suis désolé pour ce long retard.", 2 * 5 / (7 + 7) * 100),
    "russian": ("Мне очень жаль.", "Мне очень жаль, что так вышло.", 2 * 3 / (3 + 6) * 100),
    "arabic": ("أنا آسف جدا على التأخير.", "أنا آسف على التأخير الطويل.", 2 * 4 / (5 + 5) * 100),
    "hindi": ("मुझे बहुत खेद है।", "मुझे देरी के लिए खेद है।", 2 * 3 / (4 + 6) * 100),
    # one token per character: 8 shared of 10 and 12
    "chinese": ("我对延误感到非常抱歉。", "我对长时间的延误感到抱歉。", 2 * 8 / (10 + 12) * 100),
    "japanese": ("遅れてしまって本当にすみません。", "遅れて本当に申し訳ありません。", None),
    "thai": ("ฉันขอโทษจริงๆ สำหรับความล่าช้า", "ฉันขอโทษสำหรับความล่าช้านาน", None),
}


def test_unicode_tokenizer_keeps_words_whole_in_every_script() -> None:
    from robusteval.metrics.tokenize import UnicodeTokenizer

    tok = UnicodeTokenizer(stem=True).tokenize
    # Devanagari vowel signs (Mn/Mc) and viramas stay inside their word; the danda separates
    assert tok("मुझे बहुत खेद है।") == ["मुझे", "बहुत", "खेद", "है"]
    assert tok("क्\u200dष") == ["क्\u200dष"]  # ZWJ inside a conjunct
    assert tok("می\u200cخواهم") == ["می\u200cخواهم"]  # Persian ZWNJ
    assert tok("Мне очень ЖАЛЬ.") == ["мне", "очень", "жаль"]
    assert tok("أنا آسفٌ") == ["أنا", "آسفٌ"]  # harakat kept
    assert tok("我很抱歉。") == ["我", "很", "抱", "歉"]
    assert tok("iPhone15を買った") == ["iphone15", "を", "買", "っ", "た"]
    assert tok("ที่นี่") == ["ที่", "นี่"]  # Thai: a character with its tone and vowel marks
    # precomposed and decomposed accents are the same word; stemming only for Latin script
    assert tok("café") == tok("cafe\u0301") == ["café"]
    assert tok("The cats were running") == ["the", "cat", "were", "run"]
    assert tok("бегущие кошки") == UnicodeTokenizer(stem=False).tokenize("бегущие кошки")


def test_unicode_tokenizer_equals_rouge_score_on_ascii() -> None:
    import random

    from rouge_score import tokenizers

    from robusteval.metrics.tokenize import UnicodeTokenizer, word_tokens

    texts = [HYP, REF, "Don't stop: it's 3.14 -- or 2,000_000 e-mails (x86_64)!", "The running dogs' owners RAN.",
             "connection connected connecting relational 1990s USA"]
    rng = random.Random(0)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-'.,;:!?()[]{}<>@#$%^&*/\\|\"~` \t\n\r\x0b\x0c"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(300)]
    for stem in (False, True):
        ours, theirs = UnicodeTokenizer(stem=stem), tokenizers.DefaultTokenizer(use_stemmer=stem)
        for t in texts:
            assert ours.tokenize(t) == theirs.tokenize(t), (stem, t)
    import re
    for t in texts:  # METEOR's tokens are the old ones on ASCII
        assert word_tokens(t) == re.findall(r"\w+|[^\w\s]", t.lower()), t


def test_english_rouge_unchanged_from_rouge_score_default() -> None:
    from rouge_score import rouge_scorer

    pairs = [(HYP, REF), ("The quick brown fox jumps over the lazy dog.", "A quick brown dog jumps over the fox!"),
             ("Officials said 12 people were injured in Monday's crash.", "Twelve people were hurt in the crash on Monday, officials said."),
             ("running runs ran", "the runner is running")]
    for name in ("rouge1", "rouge2", "rougeL"):
        ref_scorer = rouge_scorer.RougeScorer([name], use_stemmer=True)
        m = metrics.load(name)
        for hyp, ref in pairs:
            want = 100 * ref_scorer.score(ref, hyp)[name].fmeasure
            assert m.score([sample(resp=hyp, ref=ref)])[0] == pytest.approx(want, abs=1e-12), (name, hyp)


def test_rougeL_equals_rouge_score_lcs_with_the_same_tokenizer() -> None:
    from rouge_score import rouge_scorer

    from robusteval.metrics.tokenize import UnicodeTokenizer

    ref_scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=UnicodeTokenizer(stem=True))
    m = metrics.load("rougeL")
    for same, other, _ in SCRIPTS.values():
        refs = (other, same[::-1], "x")
        want = 100 * ref_scorer.score_multi(list(refs), same)["rougeL"].fmeasure
        got = m.score([sample(resp=same, ref=None, refs=refs)])[0]
        assert got == pytest.approx(want, abs=1e-12)


def test_lcs_length_equals_rouge_score_table() -> None:
    import random

    from rouge_score.rouge_scorer import _lcs_table

    from robusteval.metrics.lexical import lcs_length

    rng = random.Random(1)
    for _ in range(400):
        k = rng.randint(1, 6)
        a = [str(rng.randrange(k)) for _ in range(rng.randint(0, 40))]
        b = [str(rng.randrange(k)) for _ in range(rng.randint(0, 40))]
        want = _lcs_table(a, b)[-1][-1] if a and b else 0
        assert lcs_length(a, b) == lcs_length(b, a) == want, (a, b)


@pytest.mark.parametrize("lang", list(SCRIPTS))
def test_identical_text_scores_100_and_partial_overlap_is_between(lexical, lang: str) -> None:
    from robusteval.metrics.tokenize import word_tokens

    same, other, rouge1 = SCRIPTS[lang]
    for name, m in lexical.items():
        got = m.score([sample(resp=same, ref=same)])[0]
        if name == "meteor":  # exact match in one chunk: only the fragmentation penalty 0.5 * (1/n)^3
            n = len(word_tokens(same))
            assert got == pytest.approx(100 * (1 - 0.5 / n**3)), (name, lang)
        else:
            assert got == pytest.approx(100.0), (name, lang)
        part = m.score([sample(resp=same, ref=other)])[0]
        assert 0 < part < 100, (name, lang, part)
    if rouge1 is not None:
        assert lexical["rouge1"].score([sample(resp=same, ref=other)])[0] == pytest.approx(rouge1)


def test_emoji_marks_and_invisibles_do_not_crash_or_count(lexical) -> None:
    odd = "I love it 😀👨\u200d👩\u200d👧 ❤\ufe0f 1\ufe0f\u20e3 \u0301x \u200fok\u200b"
    for name, m in lexical.items():
        v = m.score([sample(resp=odd, ref="I love it 1 x ok")])[0]
        assert np.isfinite(v) and 0 < v <= 100, name
    # symbols, emoji, variation selectors and stray marks are not ROUGE tokens (as in rouge-score)
    assert lexical["rougeL"].score([sample(resp=odd, ref="i love it 1 x ok")])[0] == pytest.approx(100.0)
    only_emoji = sample(resp="😀😀", ref="😀😀")
    assert lexical["rouge1"].score([only_emoji])[0] == 0.0  # no word tokens at all


def test_rouge_score_tokenizer_option_reproduces_the_ascii_only_behaviour() -> None:
    legacy = metrics.load("rougeL", tokenizer="rouge-score")
    assert legacy.score([sample(resp="Мне очень жаль.", ref="Мне очень жаль.")])[0] == 0.0
    assert legacy.score([sample()])[0] == pytest.approx(500 / 6)
    assert "tok=rouge-score-default" in legacy.reproducibility()
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        metrics.load("rouge1", tokenizer="spacy")
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="max_tokens must be"):
            metrics.load("rougeL", max_tokens=bad)


def test_rougeL_truncation_is_counted_exactly() -> None:
    m = metrics.load("rougeL", max_tokens=5, on_empty="floor")
    w = [f"w{i}" for i in range(10)]
    batch = [
        sample(sid="a", resp=" ".join(w[:3]), ref=" ".join(w[:4])),             # 2 texts, none cut
        sample(sid="b", resp=" ".join(w[:8]), ref=" ".join(w[:4])),             # 2 texts, response cut
        sample(sid="c", resp=" ".join(w[:6]), ref=None,
               refs=(" ".join(w[:7]), " ".join(w[:2]))),                        # 3 texts, 2 cut
        sample(sid="d", resp="  ", ref=" ".join(w)),                            # floored: never tokenized
    ]
    out = m.score(batch)
    report = m.report()
    assert report["fallbacks"] == {"truncated_to_max_tokens": 3, "empty_response": 1}
    assert report["truncation"] == {"max_tokens": 5, "texts": 7}
    # b: the response is cut to w0..w4, so P = 4/5, R = 4/4; c: both cut to w0..w4 -> 100
    assert out[1] == pytest.approx(100 * 2 * 0.8 / 1.8) and out[2] == pytest.approx(100.0)
    uncapped = metrics.load("rougeL", max_tokens=None)
    assert uncapped.score([batch[1]])[0] == pytest.approx(100 * 2 * 0.5 / 1.5)
    assert "truncated_to_max_tokens" not in uncapped.report()["fallbacks"]
    assert "max_tokens=5" in m.reproducibility() and "tok=unicode-v1" in m.reproducibility()
    assert "max_tokens=None" in uncapped.reproducibility()


def test_rougeL_on_two_20k_token_texts_truncates_to_the_default_cap() -> None:
    import random

    from robusteval.metrics.lexical import ROUGE_L_MAX_TOKENS

    rng = random.Random(2)
    vocab = [f"w{i}" for i in range(300)]
    a = [rng.choice(vocab) for _ in range(20_000)]
    b = [rng.choice(vocab) for _ in range(20_000)]
    m = metrics.load("rougeL")
    got = m.score([sample(resp=" ".join(a), ref=" ".join(b))])[0]
    assert m.report()["fallbacks"] == {"truncated_to_max_tokens": 2}
    assert m.report()["truncation"] == {"max_tokens": ROUGE_L_MAX_TOKENS, "texts": 2}
    cut = metrics.load("rougeL", max_tokens=None).score(
        [sample(resp=" ".join(a[:ROUGE_L_MAX_TOKENS]), ref=" ".join(b[:ROUGE_L_MAX_TOKENS]))])[0]
    assert got == pytest.approx(cut) and 0 < got < 100


def test_bleu_picks_a_tokenizer_by_script_and_counts_it() -> None:
    import sacrebleu

    m = metrics.load("bleu")
    zh, th, en = SCRIPTS["chinese"], SCRIPTS["thai"], SCRIPTS["english"]
    out = m.score([sample(resp=zh[0], ref=zh[1]), sample(resp=th[0], ref=th[1]), sample(resp=en[0], ref=en[1])])
    for v, (resp, ref, _), tok in zip(out, (zh, th, en), ("zh", "char", "13a"), strict=True):
        assert v == pytest.approx(sacrebleu.BLEU(effective_order=True, tokenize=tok).sentence_score(resp, [ref]).score)
    assert m.report()["tokenize"] == {"zh": 1, "char": 1, "13a": 1}
    assert "tok:auto(13a/zh:Han/char:" in m.reproducibility() and "nrefs:1" in m.reproducibility()
    fixed = metrics.load("bleu", tokenize="13a")  # sacrebleu's default, whole Chinese clauses as tokens
    assert fixed.score([sample(resp=zh[0], ref=zh[1])])[0] == pytest.approx(0.0)
    assert "tok:13a" in fixed.reproducibility()


def test_signatures_name_the_tokenizers() -> None:
    for name in ("rouge1", "rouge2", "rougeL"):
        assert "tok=unicode-v1(" in metrics.load(name).reproducibility()
    assert "tok=unicode-v1-punct(" in metrics.load("meteor").reproducibility()
    assert "tokenize=auto" in metrics.load("bleu").reproducibility()


def test_bleu_ngram_orders_and_chrf_plus_plus_match_sacrebleu() -> None:
    """Liu et al. (003, Table 6) report BLEU-1 ... BLEU-4 and chrF++: ``max_ngram_order`` and
    ``word_order`` pass through to sacrebleu and enter the signature (sacrebleu's own BLEU
    signature leaves the order out, so two orders would otherwise look like one run)."""
    import sacrebleu

    for order in (1, 2, 3, 4):
        want = sacrebleu.BLEU(effective_order=True, max_ngram_order=order).sentence_score(HYP, [REF]).score
        m = metrics.load("bleu", max_ngram_order=order)
        assert m.score([sample()])[0] == pytest.approx(want)
        assert f"max_ngram_order={order}" in m.signature()
    assert metrics.load("bleu", max_ngram_order=1).score([sample()])[0] == pytest.approx(500 / 6)  # 5 of 6 unigrams
    plus = sacrebleu.CHRF(word_order=2).sentence_score(HYP, [REF]).score
    assert metrics.load("chrf", word_order=2).score([sample()])[0] == pytest.approx(plus)
    assert plus != pytest.approx(sacrebleu.CHRF().sentence_score(HYP, [REF]).score)
    with pytest.raises(ValueError, match="max_ngram_order"):
        metrics.load("bleu", max_ngram_order=5)
    with pytest.raises(ValueError, match="word_order"):
        metrics.load("chrf", word_order=3)
