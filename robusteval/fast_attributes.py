"""A faster stand-in for spaCy's ``attribute_ruler``, with the same rules and the same output.

``en_core_web_sm``'s attribute ruler maps tags to coarse POS and morphology and fixes a few
lemmas (179 rules). spaCy runs it as a token Matcher over every Doc and applies each match in
Python; on 1,661 SummEval summaries and references that was 2.4 of the pipeline's 8.1 s on one
core, as much as the dependency parser (profiled for the guard-overhead benchmark,
BENCHMARKS §10). Almost every rule looks at one token only (its tag, lower-cased text,
dependency label, whether it is whitespace), so the rules that apply to a token are a function
of those four values: this component works them out once per distinct combination, merges
their attributes in the ruler's order (a later rule wins, as in spaCy, which sorts matches by
rule), and sets them with spaCy's own ``set_token_attrs``. The few rules spanning two tokens
("gon na", "let 's", "there is") are checked only where a token can start one.

It reads the rules from the loaded pipeline's ruler, so it follows the installed model, and
it refuses (``UnsupportedRules``; :func:`install` then keeps spaCy's ruler) any rule it cannot
evaluate exactly: a quantifier, a token attribute other than those four, or a rule that sets
extension attributes. Predicates are
evaluated on the Doc as the ruler receives it, before any rule applies, as spaCy's matcher
does. ``tests/test_fast_attributes.py`` checks identical tags, POS, morphology, lemmas and
dependencies against the stock pipeline.

We wrote this rather than use the library because the library's component does the right
thing slowly; the output is the library's (the same rules, the same attribute setter).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from spacy.language import Language
from spacy.tokens import Doc
from spacy.tokens._retokenize import set_token_attrs

FIELDS = ("TAG", "LOWER", "DEP", "IS_SPACE")  # the token attributes a rule may test
_FIELD_INDEX = {f: i for i, f in enumerate(FIELDS)}
Key = tuple[str, str, str, bool]  # (tag, lower, dep, is_space) of one token
Test = Callable[[Key], bool]
FACTORY = "robusteval_fast_attribute_ruler"


class UnsupportedRules(ValueError):
    """The ruler has a rule this component cannot evaluate exactly."""


class _Predicate:
    """One token attribute test of a rule (a class, not a closure: the pipeline stays picklable)."""

    def __init__(self, field: str, spec: Any) -> None:
        self.i = _FIELD_INDEX[field]
        self.op, self.arg = "==", spec
        if isinstance(spec, dict):
            if len(spec) != 1:
                raise UnsupportedRules(f"attribute rule {field}: {spec!r}")
            ((op, arg),) = spec.items()
            if op not in ("IN", "NOT_IN", "REGEX"):
                raise UnsupportedRules(f"attribute rule {field}: operator {op!r}")
            self.op = op
            self.arg = re.compile(arg) if op == "REGEX" else frozenset(arg)

    def __call__(self, key: Key) -> bool:
        value = key[self.i]
        if self.op == "==":
            return bool(value == self.arg)
        if self.op == "IN":
            return value in self.arg
        if self.op == "NOT_IN":
            return value not in self.arg
        return isinstance(value, str) and self.arg.search(value) is not None


class _TokenTest:
    """All the attribute tests of one pattern token."""

    def __init__(self, token_spec: dict[str, Any]) -> None:
        extra = set(token_spec) - set(FIELDS)
        if extra:
            raise UnsupportedRules(f"attribute rule tests {sorted(extra)} (only {FIELDS} are supported)")
        self.tests = [_Predicate(f, v) for f, v in token_spec.items()]

    def __call__(self, key: Key) -> bool:
        return all(t(key) for t in self.tests)


class FastAttributeRuler:
    """spaCy's ``attribute_ruler`` rules, applied per distinct token key (see the module)."""

    CACHE_SIZE = 500_000  # distinct token keys remembered; the table starts over beyond it

    def __init__(self, ruler: Any) -> None:
        self.ruler = ruler  # spaCy's own component: it keeps the rules and (de)serializes them
        self._build()

    def _build(self) -> None:
        ruler = self.ruler
        # ruler.attrs[k] / ruler.indices[k]: normalized attributes and target index of rule k,
        # in the order the rules were added (spaCy applies them in that order)
        self.attrs: list[dict[Any, Any]] = list(ruler.attrs)
        if any("_" in a for a in self.attrs):  # spaCy merges extension attributes one by one
            raise UnsupportedRules("attribute rules that set extension attributes ('_')")
        # one-token patterns, indexed by the exact tag or lower-cased text they require (most
        # rules name one), so a new token key is tested against a handful of rules, not all
        self.by_tag: dict[str, list[tuple[int, Test]]] = {}
        self.by_lower: dict[str, list[tuple[int, Test]]] = {}
        self.general: list[tuple[int, Test]] = []
        self.multi: list[tuple[int, list[Test], int]] = []  # (rule, per-token tests, target)
        for rule, entry in enumerate(ruler.patterns):
            index = int(entry.get("index", 0))
            for pattern in entry["patterns"]:
                if not isinstance(pattern, list) or any("OP" in tok for tok in pattern):
                    raise UnsupportedRules(f"attribute rule {rule}: {pattern!r}")
                tests: list[Test] = [_TokenTest(tok) for tok in pattern]
                target = index if index >= 0 else len(tests) + index
                if not 0 <= target < len(tests):
                    raise UnsupportedRules(f"attribute rule {rule}: index {index} outside its pattern")
                if len(tests) == 1:
                    self._index_single(rule, pattern[0], tests[0])
                else:
                    self.multi.append((rule, tests, target))
        if len(self.attrs) != len(ruler.patterns):
            raise UnsupportedRules("the ruler's rules and attributes do not line up")
        self._by_key: dict[Key, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self._merged: dict[tuple[int, ...], dict[Any, Any]] = {}

    def clear_cache(self) -> None:
        """Forget the rules worked out per token key (a cold benchmark starts from nothing)."""
        self._by_key.clear()
        self._merged.clear()

    def _index_single(self, rule: int, spec: dict[str, Any], test: Test) -> None:
        if isinstance(spec.get("TAG"), str):
            self.by_tag.setdefault(spec["TAG"], []).append((rule, test))
        elif isinstance(spec.get("LOWER"), str):
            self.by_lower.setdefault(spec["LOWER"], []).append((rule, test))
        else:
            self.general.append((rule, test))

    def _lookup(self, key: Key) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(rules whose one-token pattern matches, multi-token patterns this token can start)."""
        hit = self._by_key.get(key)
        if hit is None:
            candidates = self.by_tag.get(key[0], []) + self.by_lower.get(key[1], []) + self.general
            rules = tuple(sorted({r for r, test in candidates if test(key)}))
            starts = tuple(m for m, (_, tests, _) in enumerate(self.multi) if tests[0](key))
            if len(self._by_key) >= self.CACHE_SIZE:
                self._by_key.clear()
            hit = self._by_key[key] = (rules, starts)
        return hit

    def _merge(self, rules: tuple[int, ...]) -> dict[Any, Any]:
        merged = self._merged.get(rules)
        if merged is None:
            merged = {}
            for r in rules:  # later rules win, attribute by attribute, as applied in sequence
                merged.update(self.attrs[r])
            self._merged[rules] = merged
        return merged

    def __call__(self, doc: Doc) -> Doc:
        keys: list[Key] = [(t.tag_, t.lower_, t.dep_, t.is_space) for t in doc]
        found = [self._lookup(k) for k in keys]
        extra: dict[int, set[int]] = {}  # token -> rules matched through a multi-token pattern
        for s, (_, starts) in enumerate(found):
            for m in starts:
                rule, tests, target = self.multi[m]
                if s + len(tests) <= len(keys) and all(t(keys[s + j]) for j, t in enumerate(tests[1:], 1)):
                    extra.setdefault(s + target, set()).add(rule)
        for i, (rules, _) in enumerate(found):
            if i in extra:
                rules = tuple(sorted(set(rules) | extra[i]))
            if rules:
                set_token_attrs(doc[i], self._merge(rules))
        return doc

    def pipe(self, docs: Any, batch_size: int = 128) -> Any:
        for doc in docs:
            yield self(doc)

    # saved and loaded as spaCy's ruler is (nlp.to_disk / spacy.load keep working)
    def to_disk(self, path: Any, *, exclude: Any = ()) -> None:
        self.ruler.to_disk(path, exclude=exclude)

    def from_disk(self, path: Any, *, exclude: Any = ()) -> FastAttributeRuler:
        self.ruler.from_disk(path, exclude=exclude)
        self._build()
        return self

    def to_bytes(self, *, exclude: Any = ()) -> bytes:
        return bytes(self.ruler.to_bytes(exclude=exclude))

    def from_bytes(self, data: bytes, *, exclude: Any = ()) -> FastAttributeRuler:
        self.ruler.from_bytes(data, exclude=exclude)
        self._build()
        return self


@Language.factory(FACTORY)
def _make(nlp: Language, name: str) -> FastAttributeRuler:
    """From the pipeline's ruler when it has one (:func:`install`), else an empty ruler that a
    saved pipeline's rules are then loaded into (``spacy.load`` of an ``nlp.to_disk`` folder)."""
    from spacy.pipeline import AttributeRuler

    ruler = nlp.get_pipe("attribute_ruler") if "attribute_ruler" in nlp.pipe_names else AttributeRuler(
        nlp.vocab, name)
    return FastAttributeRuler(ruler)


def install(nlp: Language) -> bool:
    """Replace ``nlp``'s ``attribute_ruler`` by the fast one, in place; False (pipeline left
    as it was) when it has no ruler or a rule the fast one cannot evaluate exactly."""
    if "attribute_ruler" not in nlp.pipe_names:
        return False
    try:
        nlp.add_pipe(FACTORY, name="attribute_ruler_fast", after="attribute_ruler")
    except UnsupportedRules:
        return False
    nlp.remove_pipe("attribute_ruler")
    return True
