#!/usr/bin/env bash
# Issue 44 on one H200, in one call: build the 8B shape from a seed, judge it in bf16 with the tree
# before the fix (before/) and after it (after/), then the numerics table (bench/scale_numerics.py).
# Layout (a folder carried to the device): before/ and after/ (each an eagle3_check tree with bench/),
# tok/ (SmolLM2's tokenizer files), heldout.json. Usage: ROOT=DIR bash bench/scale_device.sh OUT [NEW]
set -o pipefail
out=${1:?OUT}; new=${2:-64}
root=${ROOT:-$PWD}  # the folder holding before/, after/, tok/ and heldout.json
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false
site=${SITE:-/tmp/site}
py() { (cd "$root/$1" && shift && PYTHONPATH=$PWD:$site python "$@"); }
python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())"
t=/tmp/s8b
[ -f $t/target/config.json ] || { s=$(date +%s);
  py after -m eagle3_check.fixtures.scale_target $t "$root/tok" --device cuda 2>&1 | grep -v Writing | tee -a "$out/build.log";
  echo "build_s $(( $(date +%s) - s ))" | tee -a "$out/build.log"; }
args=(check --target $t/target --draft $t/draft --prompts "$root/heldout.json" --device cuda --dtype "${DTYPE:-bfloat16}"
      --max-new-tokens "$new" --no-progress --json)
for tree in $(echo "${TREES:-before,after}" | tr , " "); do  # TREES: comma-separated
  py "$tree" "$root/after/bench/check_peak.py" "$out/peak_$tree.json" "${args[@]}" > "$out/check_$tree.json" 2> "/tmp/check_$tree.log"
  grep -v "Loading weights" "/tmp/check_$tree.log" | tail -3
done
[ -z "$NO_NUMERICS" ] && py after bench/scale_numerics.py --target $t/target --prompts "$root/heldout.json" \
  --greedy "${GREEDY:-$new}" --out "$out/scale_numerics.json" 2>&1 | tail -40
exit 0
