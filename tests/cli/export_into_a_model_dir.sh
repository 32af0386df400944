#!/usr/bin/env bash
# export-hf into a directory that already holds a model: a failing export
# (a damaged checkpoint) leaves every file there as it was; a good one
# replaces the earlier model files, keeps the others (a tokenizer) and says so.
#   export_into_a_model_dir.sh BURST CKPT_TOOL WORKDIR
set -u
burst=$1 tool=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work/model" || fail "cannot make $work"
ck=$work/ck.h5  # a checkpoint with checksums (format 2)
"$burst" train --set train.seq_len=32 --set train.batch=2 --set data.digits=2 --set train.steps=1 \
  --set train.eval_sequences=2 --set io.checkpoint="$ck" > "$work/out0" 2>&1 || { cat "$work/out0"; fail "cannot make the checkpoint"; }
"$burst" export-hf --weights "$ck" --output "$work/model" --max-shard-mb 0 > "$work/out1" 2>&1 || { cat "$work/out1"; fail "the first export failed"; }
echo '{"tokenizer": "kept"}' > "$work/model/tokenizer.json"
before=$(cd "$work/model" && md5sum model.safetensors config.json tokenizer.json)
cp "$ck" "$work/bad.h5" && "$tool" flip "$work/bad.h5" params/model.layers.1.mlp.down_proj.weight || fail "cannot damage the copy"
"$burst" export-hf --weights "$work/bad.h5" --output "$work/model" > "$work/out2" 2>&1 && fail "the damaged checkpoint was exported"
grep -q "fails its checksum" "$work/out2" || { cat "$work/out2"; fail "no checksum error"; }
after=$(cd "$work/model" && md5sum model.safetensors config.json tokenizer.json 2>&1)
[ "$before" = "$after" ] || fail "a failed export changed the directory: before [$before] after [$after]"
[ ! -e "$work/model/.burst-export.tmp" ] || fail "the staging directory was left behind"
"$burst" export-hf --weights "$ck" --output "$work/model" --max-shard-mb 1 > "$work/out3" 2>&1 || { cat "$work/out3"; fail "the re-export failed"; }
grep -q "replaced 1 model file(s) of an earlier export" "$work/out3" || { cat "$work/out3"; fail "the replacement was not reported"; }
[ -e "$work/model/tokenizer.json" ] || fail "the tokenizer was removed"
[ ! -e "$work/model/model.safetensors" ] || [ -e "$work/model/model.safetensors.index.json" ] || true
# A directory named like a new file (config.json): refused before anything is removed or moved.
mv "$work/model/config.json" "$work/config.json.kept" && mkdir -p "$work/model/config.json/x" || fail "cannot make the obstacle"
before=$(cd "$work/model" && ls -A | sort | tr '\n' ' '; md5sum model-*.safetensors model.safetensors.index.json 2>&1)
"$burst" export-hf --weights "$ck" --output "$work/model" > "$work/out4" 2>&1 && fail "exported over a directory named config.json"
grep -q "config.json' is a directory: the new 'config.json' cannot replace it (nothing was moved or removed" "$work/out4" ||
  { cat "$work/out4"; fail "no message naming the obstacle"; }
after=$(cd "$work/model" && ls -A | sort | tr '\n' ' '; md5sum model-*.safetensors model.safetensors.index.json 2>&1)
[ "$before" = "$after" ] || fail "the refused export changed the directory: before [$before] after [$after]"
echo "ok: a failed export left the directory as it was; a good one replaced the model files and kept the tokenizer"
