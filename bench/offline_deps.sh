#!/usr/bin/env bash
# The pure-Python dependencies a machine without a package index lacks (pydantic and what it
# needs), as unpacked wheels for its Python, in a gitignored directory to put on PYTHONPATH.
# Run it here (with PyPI), copy or carry the directory there:
#   bash bench/offline_deps.sh 3.12 .gpudeps          # e.g. the H200 box: Python 3.12, no pydantic
#   PYTHONPATH=.:$PWD/.gpudeps python -m pytest -m gpu   # on that machine
# Extra requirements after the directory go in too, e.g. `... .gpudeps tabulate pytest-xdist`.
set -euo pipefail
pyver=${1:?python version of the target machine, e.g. 3.12}
out=${2:-.gpudeps}
extra=("${@:3}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python -m pip download -q --python-version "$pyver" --only-binary=:all: \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$tmp" "pydantic>=2" "${extra[@]}"
rm -rf "$out" && mkdir -p "$out"
for w in "$tmp"/*.whl; do python -m zipfile -e "$w" "$out/"; done
echo "unpacked into $out: $(ls "$tmp" | tr '\n' ' ')"
