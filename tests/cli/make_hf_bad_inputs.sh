#!/usr/bin/env bash
# Damaged and foreign inputs for the import-hf / export-hf / forward
# bad-input tests (ctest fixture "hf_bad_inputs"), made from the golden
# fixture with the CLI itself.
#   make_hf_bad_inputs.sh DIR BURST CKPT_TOOL FIXTURE
set -euo pipefail
dir=$1; burst=$2; tool=$3; fixture=$4
rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"
"$burst" export-hf --weights "$fixture" --output good --dtype f32 >/dev/null
# A truncated file; a header length beyond the end of the file.
cp -r good truncated
size=$(stat -c %s good/model.safetensors)
head -c $((size - 100)) good/model.safetensors >truncated/model.safetensors
cp -r good badlen
{ printf '\377\377\377\000\000\000\000\000'; tail -c +9 good/model.safetensors; } >badlen/model.safetensors
# Shards whose index puts a tensor in a shard that does not hold it.
"$burst" export-hf --weights "$fixture" --output sharded --dtype bf16 --max-shard-mb 0.01 >/dev/null
sed -i 's/"model.norm.weight": "model-[0-9]*-of-/"model.norm.weight": "model-00001-of-/' sharded/model.safetensors.index.json
# Tokens beyond the golden model's vocabulary (64); weights of another model.
"$tool" write-ints big_token.h5 tokens 1 2 64 3
"$burst" train --set train.seq_len=32 --set train.batch=2 --set data.digits=2 --set train.steps=1 \
  --set train.eval_sequences=2 --set io.checkpoint=tiny.h5 --set io.run_log=run_log.h5 --set io.overwrite=true >/dev/null
printf 'not hdf5' >not_hdf5.h5
# A tokens dataset of a few bytes declaring 2^40 tokens (chunked, nothing written).
"$tool" declare huge_tokens.h5 tokens int32 1099511627776
# [1024, 1048576] tokens: a file a 7B model's logits for them would not fit in any machine's memory.
"$tool" declare many_tokens.h5 tokens int32 1024 1048576
