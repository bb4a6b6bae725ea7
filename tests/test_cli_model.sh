#!/usr/bin/env bash
# labels: unit cpu
# kernelkit model-info: a one-layer model written here (safetensors by hand:
# 8-byte length, JSON header, zero bytes), printed; usage errors; a broken
# file and a broken config.json named in the message.
set -uo pipefail
cli=$1
. "$(dirname "$0")/cli_check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# hidden 2, one head of 2, intermediate 2, vocab 4, one layer, all f32.
model=$tmp/model
mkdir -p "$model"
cat >"$model/config.json" <<'EOF'
{"model_type": "llama", "hidden_size": 2, "intermediate_size": 2, "num_hidden_layers": 1,
 "num_attention_heads": 1, "vocab_size": 4, "rms_norm_eps": 1e-5, "torch_dtype": "float32",
 "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
EOF
hdr='{"__metadata__": {"format": "pt"}'
off=0
add() { # NAME SHAPE BYTES
  hdr+=", \"$1\": {\"dtype\": \"F32\", \"shape\": $2, \"data_offsets\": [$off, $((off + $3))]}"
  off=$((off + $3))
}
for w in self_attn.q_proj self_attn.k_proj self_attn.v_proj self_attn.o_proj mlp.gate_proj \
  mlp.up_proj mlp.down_proj; do
  add "model.layers.0.$w.weight" "[2, 2]" 16
done
add model.layers.0.input_layernorm.weight "[2]" 8
add model.layers.0.post_attention_layernorm.weight "[2]" 8
add model.embed_tokens.weight "[4, 2]" 32
add model.norm.weight "[2]" 8
write_st "$model/model.safetensors" "$hdr}" "$off"

check info         0 "^  num_key_value_heads +1$"            -- "$cli" model-info "$model"
check info-rope    0 "rope_scaling +llama3 \(factor 8"       -- "$cli" model-info "$model"
check info-tensor  0 "model.layers.0.mlp.down_proj.weight +f32 +\[2, 2\]" -- "$cli" model-info "$model"
check info-count   0 "^Tensors: 11 "                         -- "$cli" model-info "$model"
check listed       0 "model-info"                            -- "$cli" --help
check help         0 "Usage: kernelkit model-info DIR"       -- "$cli" model-info --help
check no-dir       2 "missing DIR"                           -- "$cli" model-info
check extra-arg    2 "unexpected argument 'more'"            -- "$cli" model-info "$model" more
check bad-opt      2 "unknown option '--bogus'"              -- "$cli" model-info --bogus "$model"
check missing      1 "nope/config.json: cannot open"         -- "$cli" model-info "$tmp/nope"

# The same model with its last tensor cut short, then with a bad config.
head -c -4 "$model/model.safetensors" >"$tmp/short" && mv "$tmp/short" "$model/model.safetensors"
check truncated    1 "model.safetensors: tensor 'model.norm.weight': data_offsets .* end past the data region" \
  -- "$cli" model-info "$model"
write_st "$model/model.safetensors" "$hdr}" "$off"
sed -i 's/"num_attention_heads": 1/"num_attention_heads": 1, "num_key_value_heads": 2/' "$model/config.json"
check bad-config   1 "config.json: num_key_value_heads = 2: expected an integer from 1 to 1" \
  -- "$cli" model-info "$model"

echo "$fails failed"
[ "$fails" -eq 0 ]
