#!/usr/bin/env bash
# The CPU backend's measurements of issue 5, side by side in one run:
#   kernelkit calibrate --device cpu (the CPU's memcpy and read bandwidth, one thread,
#   stored where kernelkit bench finds them, so every results file carries them as
#   ceilings); then per round, suite by suite: kernelkit bench of bench/suites/<suite>.json,
#   PyTorch CPU on the same cases with the same thread count (bench/cpu/torch_cpu.py writes
#   raw samples) and `kernelkit bench --import` of those samples, so the anchors get
#   KernelKit's own statistics, environment and FLOP/byte counts. Suites: cpu-linear (f32
#   Linear + GELU against the plain f32 gemm, i.e. OpenBLAS sgemm alone), cpu-attention,
#   and cpu-nvfp4 (GPU MODE's nvfp4_gemv test shapes, KernelKit alone: GB/s and share of
#   the measured read bandwidth). Then a `kernelkit report` of them all and ratios.py.
# PyTorch is a measuring tool only: it lives in its own virtual environment
# (bench/cpu/.venv, git-ignored), never in the library or its tests.
#
#   bench/cpu/run.sh                  # build/, all cores, 3 rounds of 3 s per benchmark
#   BUILD=build-bench THREADS=2 BUDGET=3 ROUNDS=3 bench/cpu/run.sh
#   ISAS="avx2" bench/cpu/run.sh      # also each KernelKit suite but nvfp4 with the CPU
#                                     # kernels capped at AVX2 (KK_CPU_ISA), per round
#   BEFORE=old/kernelkit ISAS=avx2 bench/cpu/run.sh
#                                     # and an older build's kernelkit on the same suites in
#                                     # each round (before-<suite>-r<r>.json), then `kernelkit
#                                     # compare` of it against this build capped at the first
#                                     # of ISAS (compare-<suite>-<isa>-r<r>.md)
#
# Writes, under bench/results/cpu/<cpu model>/ (OUT_DIR overrides):
# kernelkit-<suite>-r<round>.json for the suites cpu-linear, cpu-linear-bf16,
# cpu-attention, cpu-attention-bf16, cpu-rowops and cpu-nvfp4, kernelkit-<suite>-<isa>-r<round>.json,
# torch-<suite>-r<round>.json for the four anchored ones (imported; the raw samples are not kept),
# report.md (kernelkit report of them all) and ratios.md (bench/cpu/ratios.py: the ratios
# docs/backends/cpu.md quotes, each taken within one round).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
THREADS=${THREADS:-$(nproc)}
BUDGET=${BUDGET:-3}
ROUNDS=${ROUNDS:-3}
ISAS=${ISAS:-}
# one folder per CPU model: "AMD EPYC 9654", family 25, model 17 -> amd-epyc-9654-f25m17
# (a VM may show only "AMD EPYC": the family and model tell Zen 3 from Zen 4)
model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1 | tr 'A-Z' 'a-z' |
  sed 's/([^)]*)//g; s/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')
fm=$(awk -F': ' '/^cpu family/ && !f {f=$2} /^model[[:space:]]*:/ && !m {m=$2} END {print "f" f "m" m}' /proc/cpuinfo)
model=$model-$fm
OUT=${OUT_DIR:-bench/results/cpu/${model:-unknown}}
VENV=bench/cpu/.venv
KK=$BUILD/kernelkit
[ -x "$KK" ] || { echo "run.sh: $KK not found: build first (cmake -S . -B $BUILD && cmake --build $BUILD)" >&2; exit 2; }
mkdir -p "$OUT"

# ---- PyTorch in its own virtualenv ----
# PyPI's Linux torch wheel is a CUDA build that pulls GBs of NVIDIA packages. The
# CPU path needs none of them to run, only to load: install torch without its
# dependencies plus its few pure-Python ones, and fall back to the full install
# only when `import torch` cannot load its libraries.
torch_ok() { "$VENV/bin/python" - <<'EOF' >/dev/null 2>&1
import torch, torch.nn.functional as F
x, w = torch.randn(4, 8), torch.randn(3, 8)
assert torch.allclose(F.linear(x, w), x @ w.T, atol=1e-5)
EOF
}
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
if ! torch_ok; then
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q --no-deps torch
  "$VENV/bin/pip" install -q filelock typing-extensions sympy networkx jinja2 fsspec numpy
  if ! torch_ok; then
    echo "run.sh: torch does not load without its CUDA packages here; installing them" >&2
    "$VENV/bin/pip" install -q torch
  fi
  torch_ok || { echo "run.sh: PyTorch does not work in $VENV" >&2; exit 1; }
fi
echo "torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)'), $THREADS threads, ${BUDGET}s per benchmark"

# ---- the CPU's ceilings (kernelkit bench and --import attach them); the
# arithmetic peaks are taken on the kernels' thread count ----
export KK_NUM_THREADS=$THREADS
"$KK" calibrate --device cpu

# ---- rounds: KernelKit, then PyTorch, suite by suite ----
# Other work on a shared machine changes the speed over minutes, so each suite is
# measured ROUNDS times with a short budget, KernelKit and PyTorch back to back,
# and ratios are only taken within a round (bench/cpu/ratios.py).
# SUITES="cpu-rowops cpu-nvfp4" runs only those (the report and ratios still read every file)
read -r -a suites <<< "${SUITES:-cpu-linear cpu-linear-bf16 cpu-attention cpu-attention-bf16 cpu-rowops cpu-fused-rows cpu-nvfp4}"
anchored=" cpu-linear cpu-linear-bf16 cpu-attention cpu-attention-bf16 "  # with a PyTorch anchor
raw=$(mktemp "${TMPDIR:-/tmp}/torch-cpu-raw.XXXXXX.json")
trap 'rm -f "$raw"' EXIT
results=()
for r in $(seq 1 "$ROUNDS"); do
  for suite in "${suites[@]}"; do
    echo "== round $r: $suite (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
    "$KK" bench --device cpu --suite "bench/suites/$suite.json" --time-budget "$BUDGET" \
      -o "$OUT/kernelkit-$suite-r$r.json"
    results+=("$OUT/kernelkit-$suite-r$r.json")
    for isa in $ISAS; do
      [ "$suite" = cpu-nvfp4 ] && continue
      KK_CPU_ISA=$isa "$KK" bench --device cpu --suite "bench/suites/$suite.json" \
        --time-budget "$BUDGET" -o "$OUT/kernelkit-$suite-$isa-r$r.json"
    done
    if [ -n "${BEFORE:-}" ] && [ -n "$ISAS" ] && [ "$suite" != cpu-nvfp4 ]; then
      first=${ISAS%% *}
      # an older build refuses a suite with ops it does not have: then no comparison
      if "$BEFORE" bench --device cpu --suite "bench/suites/$suite.json" --time-budget "$BUDGET" \
        -o "$OUT/before-$suite-r$r.json"; then
        "$KK" compare "$OUT/before-$suite-r$r.json" "$OUT/kernelkit-$suite-$first-r$r.json" \
          --markdown "$OUT/compare-$suite-$first-r$r.md" > /dev/null || true
      fi
    fi
    if [[ $anchored == *" $suite "* ]]; then
      "$VENV/bin/python" bench/cpu/torch_cpu.py "bench/suites/$suite.json" \
        --threads "$THREADS" --time-budget "$BUDGET" --output "$raw"
      "$KK" bench --device cpu --import "$raw" -o "$OUT/torch-$suite-r$r.json"
      results+=("$OUT/torch-$suite-r$r.json")
    fi
  done
done
# the report: every round of every suite at the CPU's own level, and the anchors
own=()
for f in "$OUT"/kernelkit-*-r[0-9]*.json "$OUT"/torch-*-r[0-9]*.json; do
  case "$f" in *-generic-r*|*-avx2-r*|*-avx512-r*|*-avx512_bf16-r*) ;; *) [ -e "$f" ] && own+=("$f") ;; esac
done
"$KK" report "${own[@]}" --title "KernelKit CPU backend against PyTorch CPU" \
  --output "$OUT/report.md"
"$VENV/bin/python" bench/cpu/ratios.py "$OUT" > "$OUT/ratios.md"
cat "$OUT/ratios.md"
echo "wrote ${results[*]} $OUT/report.md $OUT/ratios.md"
