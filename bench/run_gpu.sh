#!/usr/bin/env bash
# Everything that needs the GPU, in one go: `pytest -m gpu`, then the GPU benchmark.
# Usage (repository root, on a CUDA machine): bash bench/run_gpu.sh [OUT_DIR]   (default bench/results)
set -o pipefail
out=${1:-bench/results}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
python -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, torch.cuda.get_device_name())" | tee "$out/env.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee -a "$out/env.txt"
python bench/gpu_bench.py --out "$out/gpu_bench.json" "${@:2}" 2>&1 | tee "$out/gpu_bench.log"
bench=$?
python -m pytest -m gpu -q -rP -p no:cacheprovider --continue-on-collection-errors \
  --junitxml="$out/gpu_tests.xml" 2>&1 | tee "$out/gpu_tests.log"
tests=$?
echo "pytest -m gpu exit $tests, bench exit $bench"
exit $((tests || bench))
