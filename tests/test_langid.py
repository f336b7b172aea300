"""robusteval.langid: the script majority and the Latin-script vote that let English-only
detectors abstain on other languages."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from robusteval.langid import language, main_script, normalize


@pytest.mark.parametrize(("text", "expected"), [
    ("i 'm not sure . do you have the address ?", "en"),
    ("ok .", "it"),  # the documented miss: "ok" is more frequent in Italian lists
    ("Je ne sais pas ce que tu veux dire.", "fr"),
    ("Ich habe heute leider keine Zeit.", "de"),
    ("No sé lo que quieres decir.", "es"),
    ("我不知道你在说什么。", "und-cjk"),
    ("لا أعرف ماذا تقصد.", "und-arabic"),
    ("मुझे नहीं पता कि तुम्हारा क्या मतलब है।", "und-devanagari"),
    ("Я не знаю, что ты имеешь в виду.", "und-cyrillic"),
    ("می\u200cخواهم به خانه بروم.", "und-arabic"),  # Persian in Arabic script
    ("12345 !!!", "en"),  # no letters: the default
    ("", "en"),
])
def test_language(text: str, expected: str) -> None:
    assert language(text) == expected


def test_main_script_is_the_majority_of_letters() -> None:
    assert main_script("OK 好的好的") == "CJK" and main_script("好 okay") == "LATIN" and main_script("42") is None


@pytest.mark.parametrize(("tag", "code"), [("en-US", "en"), ("EN_gb", "en"), ("english", "en"), ("Chinese", "zh"),
                                           ("fa", "fa"), ("und-cjk", "und-cjk"), ("klingon", "klingon")])
def test_normalize(tag: str, code: str) -> None:
    assert normalize(tag) == code


@settings(max_examples=200)
@given(st.text(alphabet=st.characters(max_codepoint=127)))
@example(text="")
@example(text="_ 1")
def test_main_script_ascii_fast_path_agrees_with_the_unicode_names(text: str) -> None:
    from collections import Counter

    from robusteval.langid import script

    counts = Counter(s for s in map(script, text) if s)
    assert main_script(text) == (counts.most_common(1)[0][0] if counts else None)


def test_detectors_asking_with_different_settings_share_one_identification() -> None:
    """A guard's detectors ask ``language(text)`` and ``language(text, margin=1.0)`` (and the
    threshold lookup ``sample_language``): the text's evidence is worked out once for all of
    them (the cache used to key the two call styles apart, so each response was identified
    twice), and the answers still follow each call's own settings."""
    from robusteval import Sample
    from robusteval.langid import _evidence, clear_cache, language, sample_language

    clear_cache()
    text = "Le comité a approuvé le budget lundi matin."
    assert language(text) == "fr"
    misses = _evidence.cache_info().misses
    s = Sample(id="x", task="dialogue", response=text, context=("Bonjour",))
    assert language(text, margin=1.0) == sample_language(s) == "fr"
    assert language(text, default="fr", margin=50.0) == "fr" and language(text, candidates=("en", "de")) in {"en", "de"}
    assert _evidence.cache_info().misses == misses + 1  # only the other candidate list is new evidence
