#!/usr/bin/env bash
# The golden fixture through the Hugging Face tools, as a user runs them:
# export its weights to sharded .safetensors, import them back into HDF5
# weights, run `burst forward`, and match the logits that Hugging Face
# transformers computed (relative error 1e-4, float).
#   hf_roundtrip.sh FIXTURE WORKDIR   (BURST_BIN, BURST_LAUNCH, H5_COMPARE from ctest)
set -euo pipefail
fixture=$1; work=$2
rm -rf "$work"; mkdir -p "$work"
burst() { $BURST_LAUNCH "$BURST_BIN" "$@"; }
burst export-hf --weights "$fixture" --output "$work/hf" --dtype f32 --max-shard-mb 0.02
ls "$work/hf"
shards=$(ls "$work/hf" | grep -c '^model-.*-of-.*\.safetensors$' || true)
[ "$shards" -ge 2 ] || { echo "expected a sharded export, got $shards shard(s)"; exit 1; }
[ -f "$work/hf/model.safetensors.index.json" ] || { echo "no index"; exit 1; }
burst import-hf --model-dir "$work/hf" --output "$work/weights.h5"
burst forward --model "$work/hf/config.json" --weights "$work/weights.h5" --tokens "$fixture" --output "$work/out.h5" --hidden-states
"$H5_COMPARE" "$work/out.h5" logits "$fixture" logits 1e-4
# The same in one bf16 file: the logits move, but stay close.
burst export-hf --weights "$work/weights.h5" --output "$work/hf16" --dtype bf16
burst import-hf --model-dir "$work/hf16" --output "$work/weights16.h5"
burst forward --model "$work/hf16/config.json" --weights "$work/weights16.h5" --tokens "$fixture" --output "$work/out16.h5"
"$H5_COMPARE" "$work/out16.h5" logits "$fixture" logits 3e-2
echo "hf_roundtrip: ok"
