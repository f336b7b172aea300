"""Shared fixtures: the real data folder (skips without it) and tiny models built from configs
(:mod:`robusteval.tiny_models`).

Hypothesis runs under the ``ci`` profile (always when ``CI`` is set; otherwise unless
``HYPOTHESIS_PROFILE`` names another): examples
are derived from each test's name (``derandomize``), no example database is read or written,
and a failure prints its reproduction blob, so every run, on every clone, tries the same
inputs. ``HYPOTHESIS_PROFILE=explore`` searches with fresh random inputs (more examples) when
hunting for new failures; pin what it finds with ``@example``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from robusteval.tiny_models import build_tiny_bert, build_tiny_gpt2, build_tiny_lm, build_tiny_t5

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True, database=None)
settings.register_profile("explore", deadline=None, print_blob=True, max_examples=1000)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    value = os.environ.get("ROBUSTEVAL_DATA")
    if not value or not Path(value).is_dir():
        pytest.skip("ROBUSTEVAL_DATA is not set to the human-judgment data folder "
                    "(CI sets it to ../shared/data)")
    # absolute: tests that start the CLI in tmp_path (the DDP test) write this path into a config,
    # and a relative one (ROBUSTEVAL_DATA=../shared/data) would be read from the wrong folder there
    return Path(value).resolve()


@pytest.fixture(scope="session")
def tiny_t5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_t5(tmp_path_factory.mktemp("tiny_t5"))


@pytest.fixture(scope="session")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_gpt2(tmp_path_factory.mktemp("tiny_gpt2"))


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_lm(tmp_path_factory.mktemp("tiny_lm"))
