#!/usr/bin/env bash
# Set up (idempotent) and run the quickstart: `robusteval quickstart` trains a small MiniLM
# evaluator on robusteval's own rated dialogues, attacks it (and BERTScore / ROUGE-L), guards
# it, hardens it and compares -- offline, no data folder needed, about 2 minutes on 2 cores.
# Prints the headline ASR table and the path of report.html. Rerunning reuses the finished run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
exec .venv/bin/robusteval quickstart --out-dir "${1:-runs/quickstart}" --resume
