#!/usr/bin/env bash
# make_bad_inputs.sh DIR BURST CKPT_TOOL: the broken files the bad-input
# tests feed to `burst train` (ctest fixture "bad_inputs").
set -eu
dir=$1 burst=$2 tool=$3
rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"
printf '[train]\nsteps = 5\nlearning_rate = 1e-3\n' > unknown_key.toml
printf '[trian]\nsteps = 5\n' > unknown_section.toml
printf '[train]\nsteps = "ten"\n' > wrong_type.toml
printf '[train\nsteps = 5\n' > syntax.toml
printf '{"vocab_size": 64, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 3, "intermediate_size": 128}' > heads_kv.json
printf '{"vocab_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 128}' > missing_hidden.json
printf '{"vocab_size": 64, "hidden_size": "64", "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 128}' > string_hidden.json
printf '[64, 64]' > array.json
printf '{"vocab_size": 64,' > truncated.json
printf '{"vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 48}' > vocab300.json
# 90 layers of the 7B shape: some 470 GiB of weights, gradients and AdamW state.
printf '{"vocab_size": 64, "hidden_size": 4096, "num_hidden_layers": 90, "num_attention_heads": 32, "intermediate_size": 11008, "max_position_embeddings": 2048}' > huge_model.json
rm -f fifo && mkfifo fifo  # a data path nobody writes to
printf '{"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 48}' > other.json
printf '{"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 48, "max_position_embeddings": 2}' > short_positions.json
# Checkpoints, each alone in its directory (--resume also looks for step files).
small=(--set train.seq_len=32 --set train.batch=2 --set data.digits=2 --set train.steps=1 --set train.eval_sequences=2
       --set io.overwrite=true)  # a rerun of the setup replaces its own files
mkdir -p good other corrupt old text notckpt shape
"$burst" train "${small[@]}" --set io.checkpoint=good/ck.h5 --set io.run_log=notckpt/ck.h5 > /dev/null
"$burst" train "${small[@]}" --set io.checkpoint=other/ck.h5 --set model.config=other.json > /dev/null
rm -f good/ck.step* other/ck.step*
cp good/ck.h5 corrupt/ck.h5 && "$tool" flip corrupt/ck.h5 params/model.layers.1.self_attn.o_proj.weight
cp good/ck.h5 old/ck.h5 && "$tool" set-int old/ck.h5 format_version 1
echo "not a checkpoint" > text/ck.h5
# Whole and of this model, but a tensor of the wrong shape: every rank refuses it.
cp good/ck.h5 shape/ck.h5 && "$tool" reshape shape/ck.h5 params/model.norm.weight 3
# The newest checkpoint damaged, the previous one whole: --resume falls back
# (one directory per rank count, as the resumed runs write into them).
for np in 1 4; do
  mkdir -p fallback$np
  cp good/ck.h5 fallback$np/ck.step00000001.h5
  cp good/ck.h5 fallback$np/ck.step00000002.h5
  "$tool" set-int fallback$np/ck.step00000002.h5 step 2
  "$tool" flip fallback$np/ck.step00000002.h5 optim/m/model.embed_tokens.weight
  ln fallback$np/ck.step00000002.h5 fallback$np/ck.h5
done
# The newest step file damaged in its root group's object header (which the
# 1.8 file format checksums; with the 1.0 format's headers such a file crashed
# HDF5 in H5Aexists), or holding another step than its name says: --resume
# falls back to the previous one.
mkdir -p header stepname
cp good/ck.h5 header/ck.step00000001.h5
cp good/ck.h5 header/ck.step00000002.h5 && "$tool" set-int header/ck.step00000002.h5 step 2
python3 -c "
import struct, sys
f = sys.argv[1]; b = bytearray(open(f, 'rb').read())
assert b[:8] == b'\\x89HDF\\r\\n\\x1a\\n' and b[8] in (2, 3), 'not a version-2 superblock'
root = struct.unpack_from('<Q', b, 36)[0]  # the root group's object header address (superblock v2)
assert b[root:root + 4] == b'OHDR', 'no version-2 object header at the root address'
b[root + 6] ^= 0xFF  # a byte inside the header, under its checksum
open(f, 'wb').write(b)
" header/ck.step00000002.h5
ln header/ck.step00000002.h5 header/ck.h5
mkdir -p changed && cp good/ck.h5 changed/ck.h5  # resumed with another learning rate
cp good/ck.h5 stepname/ck.step00000001.h5
cp good/ck.h5 stepname/ck.step00000003.h5 && "$tool" set-int stepname/ck.step00000003.h5 step 7
# Token files (data.task = bin, uint16): a size that is not a multiple of the
# dtype, an id beyond the tiny model's vocabulary (64), too short for a sequence.
printf 'abc' > odd.bin
python3 -c "
import struct
open('big_id.bin', 'wb').write(struct.pack('<400H', *([5] * 300 + [100] + [6] * 99)))
open('short.bin', 'wb').write(struct.pack('<10H', *range(10)))
"
# HDF5 files of a few bytes declaring datasets of 2^40 tokens, or a q of
# [2^34, 4, 16] (chunked, nothing written): named, never allocated.
"$tool" declare huge_tokens.h5 tokens int32 1099511627776
"$tool" declare huge_q.h5 q float64 17179869184 4 16
for t in k v do; do "$tool" declare huge_q.h5 $t float64 32 4 16; done
# Run logs to continue (--resume): a damaged (truncated) one, and a copy of a
# checkpoint given as the run log.
cp notckpt/ck.h5 damaged_log.h5 && truncate -s $(($(stat -c %s damaged_log.h5) / 2)) damaged_log.h5
cp good/ck.h5 checkpoint_as_log.h5
