#!/usr/bin/env bash
# Set up (idempotent) and run the quickstart job. Until the comparison quickstart lands this
# is a real meta-evaluation of BLEU / ROUGE-L / METEOR / BERTScore on USR Topical-Chat and
# SummEval, read from $ROBUSTEVAL_DATA (default: ../shared/data beside the repository).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
export ROBUSTEVAL_DATA="${ROBUSTEVAL_DATA:-$root/../shared/data}"
exec .venv/bin/robusteval metaeval --config configs/metaeval/quickstart.yaml \
  --out-dir "${1:-runs/quickstart}" --resume
