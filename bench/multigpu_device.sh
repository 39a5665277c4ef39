#!/usr/bin/env bash
# Issue 51 on a multi-GPU host, in one call (nvidia-h200-x2 for steps 1-3; step 4 needs ~140 GB of
# disk and ~150 GB of host memory: nvidia-h200-x4 or larger). Layout: this repository as the working
# directory, the wheels of .whl/ installed into SITE (accelerate, psutil, pydantic, ...), ROOT a
# folder holding tok/ (SmolLM2's tokenizer files) and heldout.json.
# Usage: ROOT=DIR bash bench/multigpu_device.sh OUT [STEPS, default 1,2,3]
set -o pipefail
out=${1:?OUT}; steps=${2:-1,2,3}
root=${ROOT:?ROOT}; site=${SITE:-/tmp/site}
export PYTHONPATH=$PWD:$site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false
mkdir -p "$out"
python -c "import torch, accelerate; print('torch', torch.__version__, 'accelerate', accelerate.__version__, 'gpus', torch.cuda.device_count())" | tee "$out/env.txt"
has() { [[ ",$steps," == *",$1,"* ]]; }
check() { python -m eagle3_check.cli check --prompts "$root/heldout.json" --no-progress --json "$@"; }
t8=/tmp/s8b
if has 1 || has 2 || has 3; then
  [ -f $t8/target/config.json ] || python -m eagle3_check.fixtures.scale_target $t8 "$root/tok" --device cuda:0 | tee "$out/build8b.json"
fi
# 1. the marker's tests: tiny fixture split bit-identical, 8B fp32 over two GPUs = one GPU
has 1 && python -m pytest -m multigpu tests/gpu/test_multigpu.py -q 2>&1 | tail -5 | tee "$out/pytest_multigpu.txt"
# 2. the 8B shape in bf16 over two GPUs (calibrated verdict) against one GPU, with peak memory per device
if has 2; then
  for mode in one two; do
    flags=(--device cuda:0); [ $mode = two ] && flags=(--devices cuda:0,cuda:1)
    s=$(date +%s)
    python bench/check_peak.py "$out/peak_8b_$mode.json" check --target $t8/target --draft $t8/draft \
      --prompts "$root/heldout.json" --dtype bfloat16 --max-new-tokens 128 "${flags[@]}" --no-progress --json \
      > "$out/check_8b_bf16_$mode.json" 2> "$out/check_8b_bf16_$mode.log"
    echo "8b bf16 $mode: rc $? $(( $(date +%s) - s )) s" | tee -a "$out/summary.txt"
  done
fi
# 3. requests over GPUs: --workers 1 and 2 on the 8B shape (16 prompts)
if has 3; then
  for w in 1 2; do
    s=$(date +%s)
    check --target $t8/target --draft $t8/draft --device cuda --dtype bfloat16 --max-new-tokens 128 --workers $w \
      > "$out/workers_$w.json" 2> "$out/workers_$w.log"
    echo "8b workers $w: rc $? $(( $(date +%s) - s )) s" | tee -a "$out/summary.txt"
  done
fi
# 4. a target no single H200 holds: the 70B shape in bf16, built on the host, judged over two GPUs
if has 4; then
  t70=/tmp/s70b
  [ -f $t70/target/config.json ] || python -m eagle3_check.fixtures.scale_target $t70 "$root/tok" --shape 70b --device cpu | tee "$out/build70b.json"
  s=$(date +%s)
  python bench/check_peak.py "$out/peak_70b.json" check --target $t70/target --draft $t70/draft \
    --prompts "$root/heldout.json" --dtype bfloat16 --max-new-tokens 32 --devices cuda:0,cuda:1 --no-progress --json \
    > "$out/check_70b.json" 2> "$out/check_70b.log"
  echo "70b bf16 two GPUs: rc $? $(( $(date +%s) - s )) s" | tee -a "$out/summary.txt"
fi
exit 0
