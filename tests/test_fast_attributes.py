"""The fast attribute ruler gives exactly the stock spaCy pipeline's annotations."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

spacy = pytest.importorskip("spacy")

from robusteval import fast_attributes  # noqa: E402
from robusteval.nlp import SPACY_MODELS  # noqa: E402

# every multi-token rule of en_core_web_sm's ruler ("gon na", "got ta", "let 's", "c'm on",
# "y'all", "ai n't", "there is"), the dependency-conditioned ones (i / you / it as subject and
# object, do / have as main verbs, "but" as adverb, determiners as pronouns, "that" as a
# marker), whitespace tokens, and text in other scripts
TEXTS = [
    "I'm gon na go, y'all. Let's go! C'm on. I got ta leave. I ain't done.",
    "There is a cat. There are two. There's one. There were many, weren't there?",
    "I saw you and you saw it. It saw me. Give it to me, and I'll give you it.",
    "Do you? I do. I did my homework. Have you? I have a dog. But I did, but then.",
    "That which I said is that he left. Those are mine; this one is yours. All that matters.",
    "a  \n\n b   c \t d",
    "   ",
    "",
    "Je suis là, mais il n'est pas venu. Ça va ?",
    "我明天去北京。然后吃饭。",
    "ذهبت إلى السوق أمس.",
    "मैं कल बाज़ार गया था।",
    "Я вчера ходил в магазин.",
    "The U.S. economy grew 3.2% in Q3 2024, said Dr. Smith at 10:30 a.m. on Jan. 5th.",
    "Wanna gonna gotta lemme dunno? Y all, y'all and yall.",
]


def _annotations(doc: Any) -> list[tuple[Any, ...]]:
    return [(t.text, t.tag_, t.pos_, str(t.morph), t.lemma_, t.dep_, t.head.i) for t in doc]


@pytest.fixture(scope="module")
def pipelines() -> tuple[Any, Any]:
    import importlib.util

    name = next((m for m in SPACY_MODELS if importlib.util.find_spec(m) is not None), None)
    if name is None:
        pytest.skip("no spaCy English pipeline installed")
    stock, fast = spacy.load(name), spacy.load(name)
    assert fast_attributes.install(fast)
    assert "attribute_ruler" not in fast.pipe_names and "attribute_ruler" in stock.pipe_names
    return stock, fast


def test_same_annotations_as_stock_ruler(pipelines: tuple[Any, Any]) -> None:
    stock, fast = pipelines
    for text in TEXTS:
        assert _annotations(fast(text)) == _annotations(stock(text)), text
    fast.get_pipe("attribute_ruler_fast").clear_cache()  # worked out again from nothing: the same
    assert _annotations(fast(TEXTS[0])) == _annotations(stock(TEXTS[0]))


def test_multi_token_rules_fire(pipelines: tuple[Any, Any]) -> None:
    _, fast = pipelines
    lemmas = {t.lower_: t.lemma_ for t in fast("I'm gon na go. Let's eat. I got ta run.")}
    assert (lemmas["gon"], lemmas["na"], lemmas["'s"], lemmas["ta"]) == ("go", "to", "us", "to")


def test_same_annotations_on_real_text(pipelines: tuple[Any, Any], data_dir: Path) -> None:
    from robusteval import data

    stock, fast = pipelines
    texts = [s.response for s in data.load("summeval")[:150:3]]
    texts += [s.response for s in data.load("dailydialog-zhao")[:300:3]]
    for a, b in zip(stock.pipe(texts), fast.pipe(texts), strict=True):
        assert _annotations(b) == _annotations(a), a.text


def test_unsupported_rule_keeps_the_stock_ruler() -> None:
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add([[{"LOWER": "a", "OP": "+"}]], {"LEMMA": "x"})
    assert fast_attributes.install(nlp) is False
    assert nlp.pipe_names == ["attribute_ruler"]
    other = spacy.blank("en").add_pipe("attribute_ruler")
    other.add([[{"SHAPE": "xx"}]], {"LEMMA": "y"})
    with pytest.raises(fast_attributes.UnsupportedRules, match="SHAPE"):
        fast_attributes.FastAttributeRuler(other)


def test_rule_order_later_wins_per_attribute() -> None:
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add([[{"LOWER": "dogs"}]], {"LEMMA": "first", "NORM": "n1"})
    ruler.add([[{"LOWER": {"IN": ["dogs", "cats"]}}]], {"LEMMA": "second"})
    ruler.add([[{"LOWER": {"REGEX": "^c"}}, {"LOWER": "dogs"}]], {"NORM": "n3"}, index=-1)
    stock = [(t.lemma_, t.norm_) for t in nlp("dogs cats dogs")]
    assert fast_attributes.install(nlp)
    assert [(t.lemma_, t.norm_) for t in nlp("dogs cats dogs")] == stock == [
        ("second", "n1"), ("second", "cats"), ("second", "n3")]


def test_pipeline_saves_and_loads_like_the_stock_one(pipelines: tuple[Any, Any], tmp_path: Path) -> None:
    stock, fast = pipelines
    text = TEXTS[0] + " " + TEXTS[1]
    expected = _annotations(stock(text))
    fast.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert "attribute_ruler_fast" in loaded.pipe_names and _annotations(loaded(text)) == expected
    # in a fresh process that imports only spaCy: spaCy finds the factory by its entry point
    # (without it: "[E002] Can't find factory for 'robusteval_fast_attribute_ruler'")
    code = "import sys, spacy; print([t.pos_ for t in spacy.load(sys.argv[1])(sys.argv[2])])"
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "nlp"), text], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == str([t.pos_ for t in stock(text)])


def test_extension_attribute_rules_keep_the_stock_ruler() -> None:
    from spacy.tokens import Token

    Token.set_extension("robusteval_test_a", default=None, force=True)
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add([[{"LOWER": "dogs"}]], {"_": {"robusteval_test_a": 1}})
    assert fast_attributes.install(nlp) is False and nlp.pipe_names == ["attribute_ruler"]
