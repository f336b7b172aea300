#!/usr/bin/env bash
# Set up (idempotent), lint, and run the tests: the fast suite first, then the `slow`
# real-model / real-data tests. ROBUSTEVAL_DATA defaults to ../shared/data when it exists;
# tests that need it skip with the reason otherwise. ROBUSTEVAL_SKIP_SLOW=1 skips the slow part.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
if [ -z "${ROBUSTEVAL_DATA:-}" ] && [ -d "$root/../shared/data" ]; then
  export ROBUSTEVAL_DATA="$root/../shared/data"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
.venv/bin/ruff check .
run_pytest() {
  local rc=0
  .venv/bin/python -m pytest "$@" || rc=$?
  # 5 = no test selected (e.g. no slow tests yet): not a failure of the suite
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi
}
run_pytest -m "not slow" -q
if [ "${ROBUSTEVAL_SKIP_SLOW:-0}" != "1" ]; then
  run_pytest -m slow -q
fi
