#!/usr/bin/env bash
# Issue 19's cost model and device strided copies on a lent GPU, from an export
# (scripts/export-gpu-tree.sh [--worktree]; cd .gpu-tree first): build; the
# strided-copy kernel's GPU test (and compute-sanitizer memcheck on it); the
# decoder's GPU test (its layouts and cache writes now run that kernel); the
# cost model's CPU tests; kernelkit calibrate; then kernelkit model on a
# Llama-3-8B-shaped layer (bf16, zero weights written here: timing does not
# depend on the values) at balanced, with the conservative twin: prefill B=1
# S=4096 and a decode step at B=16 (KV length 2048), each with its results JSON
# and markdown report. Everything comes back in $OUT/model-cost.tgz.
set -uo pipefail
out=${OUT:-/tmp/kk-out}
LOGS=/tmp/kk-model-cost
mkdir -p "$out" "$LOGS"
trap 'tar czf "$out/model-cost.tgz" -C /tmp kk-model-cost' EXIT
. "$(dirname "$0")/device-lib.sh"
kk_dev_setup
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
b=${BUILD:-build-model-cost}

echo "== build ($(cat .commit 2>/dev/null))"
kk_dev_build $b "$LOGS/build.log" kernelkit_cli test_cuda_strided_copy test_strided_copy \
  test_cost_model test_decoder || exit 1
k=./$b/kernelkit

echo "== tests"
for t in test_cuda_strided_copy test_strided_copy test_cost_model; do
  timeout 300 ./$b/tests/$t > "$LOGS/$t.txt" 2>&1
  echo "$t: exit $? $(grep -E 'PASSED|FAILED|SKIP' "$LOGS/$t.txt" | tr '\n' ' ' | cut -c1-160)"
done
KK_TF32=0 KK_TEST_DEVICE=cuda:0 timeout 600 ./$b/tests/test_decoder > "$LOGS/test_cuda_decoder.txt" 2>&1
echo "test_decoder on cuda:0: exit $? $(grep -E 'PASSED|FAILED' "$LOGS/test_cuda_decoder.txt" | tr '\n' ' ')"
bash tests/test_cli_model_cost.sh "$k" > "$LOGS/test_cli_model_cost.txt" 2>&1
echo "test_cli_model_cost.sh (CPU): exit $? $(tail -1 "$LOGS/test_cli_model_cost.txt")"
if command -v compute-sanitizer >/dev/null; then
  timeout 600 compute-sanitizer --tool memcheck ./$b/tests/test_cuda_strided_copy > "$LOGS/memcheck.txt" 2>&1
  echo "memcheck test_cuda_strided_copy: exit $? $(grep -E 'ERROR SUMMARY' "$LOGS/memcheck.txt")"
fi

echo "== calibrate"
$k calibrate --device cuda:0 > "$LOGS/calibrate.txt" 2>&1
echo "calibrate: exit $?"; grep -E "_gbs|_tflops" "$LOGS/calibrate.txt"

echo "== a Llama-3-8B-shaped layer (hidden 4096, 32 heads, 8 KV heads, 128, 14336; bf16)"
m=/tmp/kk-llama8b-layer
if [ ! -e $m/model.safetensors ]; then
  mkdir -p $m
  printf '%s' '{"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
 "num_hidden_layers": 1, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
 "vocab_size": 1024, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16"}' \
    > $m/config.json
  hdr='{"__metadata__": {"format": "pt"}' off=0
  add() { hdr+=", \"$1\": {\"dtype\": \"BF16\", \"shape\": $2, \"data_offsets\": [$off, $((off + $3))]}"; off=$((off + $3)); }
  p=model.layers.0
  add $p.self_attn.q_proj.weight "[4096, 4096]" $((4096 * 4096 * 2))
  add $p.self_attn.k_proj.weight "[1024, 4096]" $((1024 * 4096 * 2))
  add $p.self_attn.v_proj.weight "[1024, 4096]" $((1024 * 4096 * 2))
  add $p.self_attn.o_proj.weight "[4096, 4096]" $((4096 * 4096 * 2))
  add $p.mlp.gate_proj.weight "[14336, 4096]" $((14336 * 4096 * 2))
  add $p.mlp.up_proj.weight "[14336, 4096]" $((14336 * 4096 * 2))
  add $p.mlp.down_proj.weight "[4096, 14336]" $((14336 * 4096 * 2))
  add $p.input_layernorm.weight "[4096]" 8192
  add $p.post_attention_layernorm.weight "[4096]" 8192
  . tests/cli_check.sh
  write_st $m/model.safetensors "$hdr}" $off
fi
run() { # NAME ARGS...: one kernelkit model run, its JSON and report
  local name=$1; shift
  timeout 600 $k model $m --device cuda:0 --level balanced "$@" --output "$LOGS/$name.json" \
    --report "$LOGS/$name.md" > "$LOGS/$name.txt" 2>&1
  echo "$name: exit $?"
  grep -E "profile, level|^ +total|speedup|launch floor|^prefill  |^decode   mean" "$LOGS/$name.txt"
}
run prefill-b1-s4096 --batch 1 --prefill 4096 --decode 1
run decode-b16-l2048 --batch 16 --prefill 2048 --decode 2
run decode-b1-l2048 --batch 1 --prefill 2048 --decode 2
