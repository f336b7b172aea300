"""[gec] Grammar-error rate per token and per sentence.

Mu & Lim 2022 (§6.2, Table 3) use grammatical error correction to expose their
broken-sentence ROUGE attack: the attack strings are fragments of the source glued together,
and a grammar checker finds far more errors in them than in system summaries.

Two backends:

* ``languagetool`` — LanguageTool through language-tool-python, either a running server
  (``remote_server="http://host:8081"`` or ``$ROBUSTEVAL_LANGUAGETOOL_URL``) or a local
  install (``$LTP_JAR_DIR_PATH``). Never downloaded on first use: that would fetch ~250 MB.
* ``builtin`` — robusteval's offline rules (:mod:`robusteval.detectors.grammar_rules`). They are
  English rules: a response in another language (``meta["language"]``, else
  :func:`robusteval.langid.language`) is not checked; the detector abstains (suspicion 0,
  counted as ``abstained_language:<code>`` in its report) instead of flagging French spelled
  against English resources. LanguageTool checks in ``language`` (default ``en-US``; a response
  in another language abstains the same way) or, with ``language="auto"``, in the language the
  server detects. ``languages=[...]`` changes the list for either backend.

``backend="auto"`` (the default) uses LanguageTool when a server answers or a local install is
configured, else builtin; :meth:`GEC.describe` and every output say which backend ran and why.
Suspicion is ``1 - exp(-per_token / scale)`` (scale 0.1: one error per 10 words -> 0.63).
"""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any, ClassVar

from robusteval.detectors import grammar_rules, parsing
from robusteval.detectors.base import Detector, register_detector, squash

from robusteval.errors import MissingResourceError
from robusteval.types import Sample

BACKENDS = ("auto", "languagetool", "builtin")
URL_ENV = "ROBUSTEVAL_LANGUAGETOOL_URL"
JAR_ENV = "LTP_JAR_DIR_PATH"


def languagetool_reachable(url: str, timeout: float = 3.0) -> bool:
    """True when ``url`` answers LanguageTool's ``/v2/languages``."""
    probe = urllib.parse.urljoin(url.rstrip("/") + "/", "v2/languages")
    try:
        with urllib.request.urlopen(probe, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


def resolve_backend(backend: str, remote_server: str | None) -> tuple[str, str | None, str]:
    """(backend, server URL or None, why) for the requested ``backend``."""
    if backend not in BACKENDS:
        raise ValueError(f"gec backend must be one of {BACKENDS}, got {backend!r}")
    url = remote_server or os.environ.get(URL_ENV)
    jar = os.environ.get(JAR_ENV)
    if backend == "builtin":
        return "builtin", None, "requested"
    if url and languagetool_reachable(url):
        return "languagetool", url, f"server {url} answered"
    if jar and os.path.isdir(jar):
        return "languagetool", None, f"local install {jar}"
    if backend == "languagetool":
        raise MissingResourceError(
            "LanguageTool is not available: "
            + (f"server {url} did not answer" if url else f"no remote_server / ${URL_ENV}")
            + f" and no local install (${JAR_ENV}); use backend='builtin'")
    why = f"server {url} did not answer" if url else f"no LanguageTool server (${URL_ENV}) or install (${JAR_ENV})"
    return "builtin", None, why


@register_detector
class GEC(Detector):
    """Grammar-error rate (LanguageTool or robusteval's offline rules), Mu & Lim 2022 §6.2."""

    name: ClassVar[str] = "gec"
    family: ClassVar[str] = "grammar"
    source: ClassVar[str] = "Mu & Lim 2022, Universal Evasion Attacks on Summarization Scoring, §6.2, Table 3"
    default_threshold: ClassVar[float] = 0.5
    reads: ClassVar[tuple[str, ...]] = ("response",)

    def __init__(self, backend: str = "auto", remote_server: str | None = None, language: str = "en-US",
                 scale: float = 0.1, languages: tuple[str, ...] | list[str] | None = None,
                 threshold: float | None = None) -> None:
        super().__init__(threshold)
        self.requested = backend
        self.backend, self.server, self.why = resolve_backend(backend, remote_server)
        self.language = language
        self.scale = scale
        # the builtin rules are English rules, and LanguageTool checks in ``language``: a response
        # in another language abstains (language="auto" lets the server detect each text's)
        from robusteval.langid import normalize

        if self.backend == "builtin":
            default: tuple[str, ...] | None = ("en",)
        else:
            default = None if language == "auto" else (normalize(language),)
        self.languages = tuple(languages) if languages is not None else default
        self._tool: Any = None

    def signature(self) -> str:
        """Backend, scale and languages; with LanguageTool also the variant it checks in
        (``en-US`` and ``en-GB`` flag different spellings). The builtin rules ignore
        ``language``, so their signature leaves it out (and the shipped thresholds still match)."""
        langs = ",".join(self.languages) if self.languages else "any"
        variant = f",language={self.language}" if self.backend == "languagetool" else ""
        return f"backend={self.backend},scale={self.scale},languages={langs}{variant}"


    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "backend": self.backend, "backend_reason": self.why}

    def _languagetool(self) -> Any:
        if self._tool is None:
            import language_tool_python

            self._tool = language_tool_python.LanguageTool(self.language, remote_server=self.server)
        return self._tool

    def _checked(self, samples: Sequence[Sample]) -> tuple[list[str | None], list[int]]:
        """(each sample's language, or None when every language is checked; the samples checked)."""
        from robusteval.langid import sample_language

        langs = [sample_language(s) for s in samples] if self.languages else [None] * len(samples)
        return langs, [i for i, lang in enumerate(langs) if not self.languages or lang in self.languages]

    def parse_requests(self, samples: Sequence[Sample]) -> list[tuple[str, bool]]:
        return [(samples[i].response, False) for i in self._checked(samples)[1]]

    def _analyze(self, samples: list[Sample]) -> list[dict[str, Any]]:
        langs, checked = self._checked(samples)
        texts = [samples[i].response for i in checked]
        docs = dict(zip(checked, parsing.parse(texts), strict=True))
        rows: list[dict[str, Any]] = []
        for i, lang in enumerate(langs):
            if i not in docs:  # a language these rules do not cover: abstain, counted, never flag
                rows.append({"backend": self.backend, "language": lang, "abstained": True, "suspicion": 0.0,
                             "fallback": f"abstained_language:{lang}"})
                continue
            text, doc = samples[i].response, docs[i]
            if self.backend == "builtin":
                errors = grammar_rules.check_doc(doc)
            else:
                errors = [(m.category.lower(), _token_at(doc, m.offset), m.message)
                          for m in self._languagetool().check(text)]
            stats = grammar_rules.summarize(doc, errors)
            stats["backend"] = self.backend
            stats["language"], stats["abstained"] = lang, False
            stats["suspicion"] = squash(stats["per_token"], self.scale)
            rows.append(stats)
        return rows


def _token_at(doc: Any, offset: int) -> int:
    for tok in doc:
        if tok.idx <= offset < tok.idx + len(tok.text) + 1:
            return int(tok.i)
    return max(0, len(doc) - 1)
