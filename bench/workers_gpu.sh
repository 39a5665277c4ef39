#!/usr/bin/env bash
# `check --workers`: the same prompt set on 1 GPU and on 2 (worker i on cuda:i); prints whether the
# reports are identical and the speedup, writes the numbers as JSON.
# Usage (repository root, a machine with >= 2 CUDA GPUs; no executorch needed):
#   PYTHONPATH=. bash bench/workers_gpu.sh [OUT_DIR] [extra bench/workers_bench.py flags, e.g. --limit 200]
set -o pipefail
out=${1:-bench/results}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
python -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])" | tee "$out/workers-gpu-env.txt"
python bench/workers_bench.py --device cuda --workers 2 --out "$out/workers-gpu.json" "${@:2}" 2>&1 | tee "$out/workers-gpu.log"
