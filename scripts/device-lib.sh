# Sourced by the scripts/device-*.sh scripts, which run from an export on a lent
# GPU machine (bash scripts/export-gpu-tree.sh; cd .gpu-tree): the set-up they
# share. That machine has CMake, nvcc and OpenBLAS but not cJSON and cmocka,
# which the export carries in .deps/.

# Sets deps (the carried libraries) and ob (OpenBLAS: the machine's own when its
# loader knows one, else the carried copy); puts .deps/lib on LD_LIBRARY_PATH.
kk_dev_setup() {
  deps=$PWD/.deps
  export LD_LIBRARY_PATH=$deps/lib:${LD_LIBRARY_PATH:-}
  ob=$(ldconfig -p | awk '/libopenblas[^ ]*\.so/ {print $NF; exit}')
  [ -n "$ob" ] || ob=$deps/lib/libopenblas.so.0
}

# kk_dev_build DIR LOG TARGET...: configures DIR once (Release, no examples,
# KK_CUDA_ARCHS or 90a, the export's commit, the carried libraries; extra CMake
# arguments from the array KK_DEV_CMAKE_ARGS) and builds TARGET... with every
# core, the output in LOG. On failure prints the errors and returns 1. An
# existing build in DIR is reused, so scripts run one after another (BUILD=dir)
# share it.
kk_dev_build() {
  local dir=$1 log=$2
  shift 2
  {
    [ -e "$dir/CMakeCache.txt" ] ||
      cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DKK_BUILD_EXAMPLES=OFF \
        -DKK_CUDA_ARCHS="${KK_CUDA_ARCHS:-90a}" -DKK_GIT_COMMIT_OVERRIDE="$(cat .commit 2>/dev/null)" \
        -DCJSON_INCLUDE_DIR="$deps/include" -DCJSON_LIBRARY="$deps/lib/libcjson.so" \
        -DCMOCKA_INCLUDE_DIR="$deps/include" -DCMOCKA_LIBRARY="$deps/lib/libcmocka.so" \
        -DOPENBLAS_INCLUDE_DIR="$deps/include/openblas" -DOPENBLAS_LIBRARY="$ob" \
        ${KK_DEV_CMAKE_ARGS[@]+"${KK_DEV_CMAKE_ARGS[@]}"}
  } > "$log" 2>&1 &&
    cmake --build "$dir" -j"$(nproc)" --target "$@" >> "$log" 2>&1 ||
    { grep -E "error" -A3 "$log" | head -30; return 1; }
}

# kk_dev_ab A.txt B.txt: `kernelkit bench` median lines of two runs of one
# suite (first field the benchmark's name), as a table of name, A's TFLOP/s,
# B's and B / A.
kk_dev_ab() {
  awk 'function tf(l) { return match(l, /[0-9.]+ TFLOP\/s/) ? substr(l, RSTART, RLENGTH - 8) : "-" }
       NR == FNR { a[$1] = tf($0); next }
       { b = tf($0); x = ($1 in a) ? a[$1] : "-"
         printf "%-44s %8s %8s %6s\n", $1, x, b, (x + 0 > 0 && b + 0 > 0) ? sprintf("%.3f", b / x) : "-" }' \
    "$1" "$2"
}
