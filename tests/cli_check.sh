# Sourced by the CLI shell tests: check NAME EXPECTED_RC PATTERN -- command...
# runs the command, and counts a failure in $fails unless it exits EXPECTED_RC
# and its output (stdout+stderr) matches the extended regex PATTERN.
fails=0
check() {
  local name=$1 want=$2 pattern=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL $name: exit $rc, expected $want"; echo "$out" | tail -20; fails=$((fails+1)); return
  fi
  if ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output lacks /$pattern/"; echo "$out" | tail -20; fails=$((fails+1)); return
  fi
  echo "ok   $name"
}

# write_st FILE HEADER DATA_BYTES: a safetensors file by hand (the model tests):
# the 8-byte header length, the header padded to 8 bytes, then DATA_BYTES zeros.
write_st() {
  local hdr=$2 n=${#2}
  while ((n % 8)); do hdr+=" "; n=$((n + 1)); done
  printf "$(printf '\\%03o' $((n & 255)) $(((n >> 8) & 255)) 0 0 0 0 0 0)" >"$1"
  printf '%s' "$hdr" >>"$1"
  head -c "$3" /dev/zero >>"$1"
}

# write_tiny_llama DIR KV_HEADS: the model tests' one-layer Llama (hidden 32,
# two heads of 16, KV_HEADS KV heads, intermediate 32, f32, zero weights).
write_tiny_llama() {
  local dir=$1 kv=$2 hdr='{"__metadata__": {"format": "pt"}' off=0 w
  mkdir -p "$dir"
  printf '%s\n' "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 32,
 \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": $kv,
 \"vocab_size\": 4, \"rms_norm_eps\": 1e-5, \"torch_dtype\": \"float32\"}" >"$dir/config.json"
  add_t() { # NAME SHAPE BYTES
    hdr+=", \"$1\": {\"dtype\": \"F32\", \"shape\": $2, \"data_offsets\": [$off, $((off + $3))]}"
    off=$((off + $3))
  }
  add_t model.layers.0.self_attn.q_proj.weight "[32, 32]" 4096
  add_t model.layers.0.self_attn.k_proj.weight "[$((16 * kv)), 32]" $((2048 * kv))
  add_t model.layers.0.self_attn.v_proj.weight "[$((16 * kv)), 32]" $((2048 * kv))
  add_t model.layers.0.self_attn.o_proj.weight "[32, 32]" 4096
  for w in gate_proj up_proj down_proj; do add_t "model.layers.0.mlp.$w.weight" "[32, 32]" 4096; done
  add_t model.layers.0.input_layernorm.weight "[32]" 128
  add_t model.layers.0.post_attention_layernorm.weight "[32]" 128
  write_st "$dir/model.safetensors" "$hdr}" "$off"
}
