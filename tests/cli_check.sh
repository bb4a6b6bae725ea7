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
