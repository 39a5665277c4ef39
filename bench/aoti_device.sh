#!/usr/bin/env bash
# Issue 48 on one H200, one stage a call (each under the device's 10-minute limit): the AOTI GPU tests,
# then bench/aoti_cuda.py per model, fp32 and bf16 (docs/cuda.md "AOTI programs").
# Needs, carried with the tree: pydantic's wheels in .whl/ (installed into /tmp/pyd, as for `pytest -m gpu`);
# for smollm2-135m its converted target under $EAGLE3_CHECK_CACHE (the fixture cache a CPU machine fills
# with `eagle3-check check --fixture smollm2-135m`); for the 8B shape a tokenizer directory TOK (SmolLM2's
# tokenizer files, as bench/scale_device.sh takes them), built into S8B once.
# Usage: bash bench/aoti_device.sh OUT tests [PYTEST -k EXPRESSION]
#        bash bench/aoti_device.sh OUT tiny-llama|smollm2-135m|scale-8b [more bench/aoti_cuda.py flags]
# (the GPU tests compile 8 packages: split them with -k, e.g. "float32 or kv_window or device", "bfloat16", "cli";
# TAG=NAME names a bench stage's files, e.g. TAG=bf16 with --dtypes bfloat16)
set -o pipefail
out=${1:?OUT}; stage=${2:?STAGE}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false
# the GPU machine's Python loads another libstdc++ first, on which AOTInductor's generated code crashes as a
# package loads (docs/cuda.md, AOTI programs): preload the compiler's
export LD_PRELOAD=${LD_PRELOAD:-$(c++ -print-file-name=libstdc++.so.6 2>/dev/null)}
[ -d /tmp/pyd/pydantic ] || python -m pip install -q --no-deps --no-index --target /tmp/pyd \
  .whl/pydantic*.whl .whl/annotated*.whl .whl/typing_insp*.whl .whl/typing_ext*.whl
export PYTHONPATH=$PWD:/tmp/pyd
python -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, torch.cuda.get_device_name())" | tee "$out/env.txt"
case $stage in
  tests) python -m pytest -m gpu -q -rP -p no:cacheprovider --durations=20 tests/gpu/test_aoti_cuda.py \
           ${3:+-k "$3"} 2>&1 | tee -a "$out/aoti-gpu-tests.log" ;;
  scale-8b) s8b=${S8B:-/tmp/s8b}
    [ -f "$s8b/target/config.json" ] || python -m eagle3_check.fixtures.scale_target "$s8b" "${TOK:?TOK}" --device cuda 2>&1 | tail -3
    python bench/aoti_cuda.py --models scale-8b --scale-dir "$s8b" --out "$out/aoti-scale-8b${TAG:+-$TAG}.json" "${@:3}" 2>&1 \
      | tee "$out/aoti-scale-8b${TAG:+-$TAG}.log" ;;
  *) python bench/aoti_cuda.py --models "$stage" --out "$out/aoti-$stage${TAG:+-$TAG}.json" "${@:3}" 2>&1 | tee "$out/aoti-$stage${TAG:+-$TAG}.log" ;;
esac
