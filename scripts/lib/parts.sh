# Sourced by .ci/run and scripts/test. `part NAME` prints `== NAME` and starts timing that part;
# at exit, a table of every part's wall time goes to stderr (FENCELOCK_PARTS_LOG, when set,
# also gets it, one `seconds<TAB>name` line a part), so that a run shows where its time went.
# `stop_at_exit PID` ends a background job's process group at exit (one that a failure left
# running).
_parts_names=()
_parts_secs=()
_parts_start=$SECONDS
_parts_current=""
_parts_jobs=()
stop_at_exit() {
  _parts_jobs+=("$1")
}
_parts_close() {
  if [ -n "$_parts_current" ]; then
    _parts_names+=("$_parts_current")
    _parts_secs+=($((SECONDS - _parts_start)))
  fi
  _parts_current=""
}
part() {
  _parts_close
  _parts_current=$1
  _parts_start=$SECONDS
  echo "== $1"
}
_parts_report() {
  local status=$? i
  for i in "${_parts_jobs[@]}"; do
    kill -- "-$i" 2>/dev/null || kill "$i" 2>/dev/null || true
  done
  _parts_close
  {
    echo "-- time by part (${0##*/}, exit $status)"
    for i in "${!_parts_names[@]}"; do
      printf '%5d s  %s\n' "${_parts_secs[$i]}" "${_parts_names[$i]}"
    done
  } >&2
  if [ -n "${FENCELOCK_PARTS_LOG:-}" ]; then
    for i in "${!_parts_names[@]}"; do
      printf '%d\t%s\n' "${_parts_secs[$i]}" "${_parts_names[$i]}"
    done >> "$FENCELOCK_PARTS_LOG"
  fi
  return "$status"
}
trap _parts_report EXIT
