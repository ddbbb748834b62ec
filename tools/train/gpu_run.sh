#!/usr/bin/env bash
# One GPU run of the default model's training (tools/train/README.md):
#   tools/train/gpu_run.sh STAGE_DIR OUT_DIR [extra train.py arguments]
# STAGE_DIR from `/usr/bin/python3 tools/train/stage.py STAGE_DIR`; OUT_DIR gets model.tar, drafter.tar, noqat.tar,
# the loss logs, summary.json and train.log (this run's whole output). Ends by train.py's --deadline (default 380 s) on an H200.
set -uo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 STAGE_DIR OUT_DIR [train.py args]" >&2; exit 2; fi
STAGE=$1; OUT=$2; shift 2
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
{
  echo "== $(date -u) on $(hostname)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
  $PY -c 'import torch, numpy; print("torch", torch.__version__, "cuda", torch.version.cuda, "numpy", numpy.__version__)'
} 2>&1 | tee "$OUT/train.log"
$PY -u "$HERE/train.py" --stage "$STAGE" --out "$OUT" "$@" 2>&1 | tee -a "$OUT/train.log"
rc=${PIPESTATUS[0]}
echo "== train.py exit status $rc; files:" | tee -a "$OUT/train.log"
ls -la "$OUT" | tee -a "$OUT/train.log"
exit "$rc"
