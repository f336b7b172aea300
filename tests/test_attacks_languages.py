"""Attacks in every script: rules built on English resources (an English spaCy parser, WordNet,
English word lists) skip other languages with a reason instead of garbling them, and the
language-independent rules (sentence exchange and deletion, word exchange, spelling mistakes)
handle unspaced scripts and combining marks."""

from __future__ import annotations

import random
import string
import unicodedata

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from toy import LengthMetric

from robusteval import Sample, attacks
from robusteval.asr import as_row, summarize
from robusteval.attacks.aspect import graphemes, is_word, misspell
from robusteval.attacks.evasion import Evasive
from robusteval.attacks.registry import ATTACKS
from robusteval.attacks.runner import run_attacks
from robusteval.attacks.victim import CachedVictim
from robusteval.nlp import join_sentences, split_sentences

TEXTS = {
    "zh": "我明天要去北京见王先生。然后我们一起吃饭吧。",
    "ar": "سأذهب إلى القاهرة غدا مع أحمد. ثم سنتناول العشاء معا.",
    "hi": "मैं कल दिल्ली जाऊँगा। फिर हम साथ में खाना खाएँगे।",
    "ru": "Я поеду в Москву пятого мая с Иваном. Потом мы вместе поужинаем.",
    "fr": "Je vais à Paris le cinq mai avec Marie. Ensuite nous ne mangerons pas ensemble.",
}
EN = "I will go to Paris on Monday with Mary. Then we will have a nice dinner together."
ENGLISH_ONLY = sorted(n for n in ATTACKS.names() if ATTACKS.get(n).languages == ("en",))


def sample(lang: str, text: str) -> Sample:
    # the context in the same language: some attacks rewrite the last turn
    return Sample(id=lang, task="dialogue", response=text, context=(text,))


def test_the_english_only_attacks_are_the_ones_built_on_english_resources() -> None:
    assert {"aspect-negation-rule", "aspect-hypernym-rule", "aspect-different-entity-rule",
            "aspect-improper-connective-rule", "aspect-incorrect-verb-form-rule", "aspect-repetition-rule",
            "only-nouns", "only-nouns-verbs", "no-stopwords", "adveval-change-name", "adveval-synonym",
            "fact-swap-entity", "fact-swap-place", "fact-swap-date", "fact-swap-number", "dstc7-negation",
            "textfooler-neg", "textfooler-pos", "bert-attack-neg"} <= set(ENGLISH_ONLY)
    for name in ("aspect-sentence-exchange", "aspect-sentence-deletion", "aspect-word-exchange",
                 "aspect-spelling-mistake", "jumbled-words", "speaker-tag-teacher", "dot-trigger",
                 "previous-utterance-prefix"):
        assert ATTACKS.get(name).languages == (), name
    assert attacks.load("only-nouns").describe()["languages"] == ["en"]


@pytest.mark.parametrize("lang", sorted(TEXTS))
@pytest.mark.parametrize("name", [n for n in ENGLISH_ONLY if not ATTACKS.get(n).needs_victim
                                  and not ATTACKS.get(n).needs_llm])
def test_english_only_rules_skip_other_languages_with_the_reason(name: str, lang: str) -> None:
    row = attacks.load(name).run(sample(lang, TEXTS[lang]))
    assert row.outcome == "skipped" and row.adversarial is None
    assert "en text only" in row.note and "this text is " in row.note


@pytest.mark.parametrize("reply", ["ok .", "no .", "Oh , no .", "Fine .", "In Paris .", "hmm .", "ha ha i'm so shy",
                                   "Hotel del sol has internet .", "Chez maman is a nice restaurant ."])
def test_short_or_name_heavy_english_without_a_declared_language_is_not_skipped(reply: str) -> None:
    # each scores a little higher in another Latin-script language's word list (langid's plain
    # choice: it, es, de, fr); the attacks' margin keeps them English
    s = Sample(id="u", task="dialogue", response=reply, context=("Do you like it ?",))
    assert attacks.load("aspect-negation-rule").unsupported(s) is None
    assert attacks.load("only-nouns").unsupported(s) is None


@pytest.mark.parametrize(("reply", "lang"), [("Oui.", "fr"), ("Merci beaucoup !", "fr"), ("¿Dónde está el baño?", "es"),
                                             ("Ich weiß es nicht.", "de"), ("Sí, claro.", "es")])
def test_clearly_foreign_latin_replies_are_still_skipped(reply: str, lang: str) -> None:
    s = Sample(id="f", task="dialogue", response=reply, context=("hi",))
    assert f"this text is {lang}" in attacks.load("aspect-negation-rule").unsupported(s)


def test_an_attack_on_the_context_is_gated_on_the_context_language() -> None:
    english_turn = Sample(id="c", task="dialogue", response="Je ne sais pas.", context=("Do you like it ?",))
    assert attacks.load("adveval-negate-previous").unsupported(english_turn) is None
    french_turn = Sample(id="c", task="dialogue", response="I do not know.", context=("Tu aimes ça ?",))
    assert "this text is fr" in attacks.load("adveval-negate-previous").unsupported(french_turn)
    assert "this text is fr" in attacks.load("kdconv-adv").unsupported(french_turn)


def test_an_english_only_rule_still_runs_on_english_and_on_a_sample_declared_english() -> None:
    assert attacks.load("aspect-negation-rule").run(sample("en", EN)).outcome == "attacked"
    # a sample's meta["language"] (xDial's "english") is trusted over detection
    declared = Sample(id="d", task="dialogue", response="ok .", context=("hi",), meta={"language": "english"})
    assert attacks.load("aspect-negation-rule").unsupported(declared) is None
    french = Sample(id="f", task="dialogue", response=EN, context=("hi",), meta={"language": "fr"})
    assert "this text is fr" in attacks.load("aspect-negation-rule").unsupported(french)


def test_word_searches_and_their_guard_aware_versions_skip_other_languages() -> None:
    victim = CachedVictim(LengthMetric())
    s = sample("fr", TEXTS["fr"])
    search = attacks.load("textfooler-pos")
    row = search.run(s, victim, 10)
    assert row.outcome == "skipped" and "this text is fr" in row.note and victim.model_calls == 0
    assert Evasive(attacks.load("textfooler-neg")).languages == ("en",)
    evasive = Evasive(attacks.load("aspect-negation-rule"))
    row = evasive.run(s, victim)
    assert row.outcome == "skipped" and "this text is fr" in row.note and victim.model_calls == 0
    # the guard-aware version judges the text its base rewrites (here the English last turn)
    mixed = Sample(id="m", task="dialogue", response=TEXTS["fr"], context=("Do you like it ?",))
    assert Evasive(attacks.load("adveval-negate-previous")).unsupported(mixed) is None
    # an R- search starts from another response: only from one in a language it supports
    neg = attacks.load("textfooler-neg")
    neg.prepare([sample(lang, t) for lang, t in TEXTS.items()] + [sample("en", EN), sample("en2", "Sounds good to me .")])
    assert sorted(neg.pool) == sorted([EN, "Sounds good to me ."])


def test_the_runner_records_language_skips_and_keeps_them_out_of_the_denominator(tmp_path) -> None:
    samples = [sample(lang, t) for lang, t in TEXTS.items()] + [sample("en", EN)]
    chosen = [attacks.load("aspect-negation-rule"), attacks.load("aspect-sentence-exchange")]
    rows = [as_row(r) for r in run_attacks(samples, chosen, LengthMetric(), tmp_path / "r.jsonl", progress=False)]
    neg = [r for r in rows if r.attack == "aspect-negation-rule"]
    assert [r.sample_id for r in neg if r.outcome == "attacked"] == ["en"]
    assert all("en text only" in r.note for r in neg if r.sample_id != "en")
    assert all(r.meta.get("perturbation") == "negation" for r in neg)  # the attack's own row, skipped or not
    exchange = [r for r in rows if r.attack == "aspect-sentence-exchange"]
    assert all(r.outcome == "attacked" for r in exchange)  # two sentences in every language, Chinese included
    table = summarize(rows)["aspect-negation-rule"]
    assert (table["attacked"], table["skipped"]) == (1, 5)  # the 5 language skips leave the ASR's n


@pytest.mark.parametrize(("text", "expected"), [
    ("我明天要去北京。然后我们一起吃饭吧。", ["我明天要去北京。", "然后我们一起吃饭吧。"]),
    ("東京に行きます！明日ね？", ["東京に行きます！", "明日ね？"]),
    ("他说：“好。”然后走了。", ["他说：“好。”然后走了。"]),  # no split before a closing quote
    ('他说"好。"然后走了。', ['他说"好。"然后走了。']),
    ("书名《好。》然后", ["书名《好。》然后"]),
    ("Really？ Yes.", ["Really？", "Yes."]),  # a full-width end before a spaced script keeps its space
    ("मैं कल दिल्ली जाऊँगा। फिर हम खाएँगे।", ["मैं कल दिल्ली जाऊँगा।", "फिर हम खाएँगे।"]),
    ("سأذهب غدا. ثم سنتناول العشاء؟ نعم", ["سأذهب غدا.", "ثم سنتناول العشاء؟", "نعم"]),
    ("Я поеду. Потом поужинаем!", ["Я поеду.", "Потом поужинаем!"]),
    ("Hello there. How are you?", ["Hello there.", "How are you?"]),
])
def test_sentences_split_and_join_back_in_every_script(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected
    assert join_sentences(expected) == text


def test_sentence_exchange_on_chinese_adds_no_space() -> None:
    row = attacks.load("aspect-sentence-exchange").run(sample("zh", TEXTS["zh"]))
    assert row.adversarial == "然后我们一起吃饭吧。我明天要去北京见王先生。"
    assert attacks.load("aspect-sentence-deletion").run(sample("zh", TEXTS["zh"])).outcome == "attacked"


def test_spelling_mistakes_in_devanagari_keep_vowel_signs_on_their_letters() -> None:
    row = attacks.load("aspect-spelling-mistake").run(sample("hi", TEXTS["hi"]))
    assert row.outcome == "attacked" and row.adversarial != TEXTS["hi"]
    for token in row.adversarial.split():
        assert unicodedata.category(token[0])[0] != "M", token  # no word starts with a stranded mark
    word = "दिल्ली"
    for seed in range(30):
        typo = misspell(word, random.Random(seed))
        assert typo != word and all(g in graphemes(word) for g in graphemes(typo))


def test_spelling_mistakes_leave_unspaced_scripts_alone() -> None:
    for text in ("好的谢谢", "我很好 谢谢你。你呢 朋友。", "東京に行きます"):
        assert attacks.load("aspect-spelling-mistake").run(sample("zh", text)).outcome == "skipped"


def test_word_rules_accept_letters_with_marks_and_keep_english_as_before() -> None:
    assert is_word("जाऊँगा") and is_word("سأذهب") and is_word("Москву") and is_word("déjà")
    assert not is_word("don't") and not is_word("5") and not is_word("table.")
    hi = attacks.load("aspect-word-exchange").run(sample("hi", TEXTS["hi"]))
    assert hi.outcome == "attacked" and sorted(hi.adversarial.split()) == sorted(TEXTS["hi"].split())


@given(word=st.text(alphabet=string.ascii_letters, min_size=2, max_size=14), seed=st.integers(0, 2**32))
@example(word="expensive", seed=0)
@example(word="aa", seed=1)
def test_english_typos_are_those_of_the_code_point_rule(word: str, seed: int) -> None:
    # graphemes are characters in ASCII text: the benchmarks' English rows do not change
    assert misspell(word, random.Random(seed)) == misspell_codepoints(word, random.Random(seed))


def misspell_codepoints(word: str, rng: random.Random) -> str:
    """The rule before grapheme clusters, on code points (words of two or more letters)."""
    j = rng.randrange(len(word) - 1)
    kind = rng.choice(("double", "drop", "swap"))
    if kind == "swap" and word[j] != word[j + 1]:
        return word[:j] + word[j + 1] + word[j] + word[j + 2:]
    if kind in ("drop", "swap"):
        return word[:j + 1] + word[j + 2:] if len(word) > 3 else word[:j] + word[j] * 2 + word[j + 1:]
    return word[:j] + word[j] * 2 + word[j + 1:]


def test_word_order_rules_move_characters_in_unspaced_text_and_keep_punctuation() -> None:
    zh = sample("zh", TEXTS["zh"])  # 20 Han characters in two clauses, no spaces
    chars = [c for c in TEXTS["zh"] if c not in "。"]
    reversed_ = attacks.load("reversed-words").run(zh).adversarial
    assert reversed_ == "吧饭吃起一们我后然生先。王见京北去要天明我。"  # full stops stay where they were
    jumbled = attacks.load("jumbled-words", seed=1).run(zh).adversarial
    assert sorted(c for c in jumbled if c != "。") == sorted(chars) and jumbled != TEXTS["zh"]
    assert [i for i, c in enumerate(jumbled) if c == "。"] == [i for i, c in enumerate(TEXTS["zh"]) if c == "。"]
    repeated = attacks.load("repeat-words", seed=2).run(zh).adversarial
    assert len(repeated) == len(TEXTS["zh"]) + 4  # ceil(0.2 * 20) characters doubled, not the whole reply
    assert repeated.replace("。", "") != TEXTS["zh"].replace("。", "") * 2


@pytest.mark.parametrize("lang", ["ar", "hi", "ru", "fr"])
def test_word_order_rules_cut_spaced_scripts_at_spaces(lang: str) -> None:
    text = TEXTS[lang]
    assert attacks.load("reversed-words").run(sample(lang, text)).adversarial == " ".join(text.split()[::-1])
    repeated = attacks.load("repeat-words").run(sample(lang, text)).adversarial.split()
    assert len(repeated) == len(text.split()) + -(-len(text.split()) // 5)


def test_segmented_chinese_keeps_its_words() -> None:
    seg = Sample(id="seg", task="dialogue", response="电影 很 好看 。", context=("电影 怎么样 ？",))
    assert attacks.load("reversed-words").run(seg).adversarial == "。 好看 很 电影"


@pytest.mark.parametrize("text", ["ไปไหนมา ไปตลาดมา", "我今天很开心 你呢", "今日は雨です\u3000でも楽しい",
                                  "第一行内容\n第二行内容"])
def test_spaces_between_clauses_do_not_make_text_segmented(text: str) -> None:
    """A space between clauses (Thai, a Chinese space as a comma, a full-width space, a line
    break) keeps the characters as the units: the clauses are not swapped whole."""
    s = Sample(id="c", task="dialogue", response=text, context=("你好",))
    out = attacks.load("reversed-words").run(s).adversarial
    first, second = text.split()
    assert out.split() != [second, first]
    assert [c for c in out if c.isspace()] == [c for c in text if c.isspace()]  # the separators stay


def test_latin_words_inside_chinese_are_units_and_doubled_with_a_space() -> None:
    text = "我昨天用ChatGPT写了一个Python脚本"
    s = Sample(id="m", task="dialogue", response=text, context=("你好",))
    assert attacks.load("reversed-words").run(s).adversarial == "本脚Python个一了写ChatGPT用天昨我"
    repeated = attacks.load("repeat-words", seed=1).run(s).adversarial
    assert "ChatGPTChatGPT" not in repeated and "PythonPython" not in repeated
    assert repeated.replace(" ", "") != text and len(repeated.replace(" ", "")) > len(text)


def test_english_word_order_output_is_pinned() -> None:
    """The outputs of the code before unspaced scripts were handled (seed 1): English is cut at
    spaces exactly as the paper's generator cuts it."""
    s = Sample(id="x", task="dialogue", context=("hi",),
               response="Well , I think so . My sister's dog ran away yesterday and I cried all night long !")
    assert attacks.load("jumbled-words", seed=1).run(s).adversarial == (
        "I My ran and I yesterday ! away night sister's , . Well think all so dog long cried")
    assert attacks.load("repeat-words", seed=1).run(s).adversarial == (
        "Well , I think think so . My sister's sister's dog ran away yesterday yesterday and I I cried all night long !")
