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
