# Sourced by the device-run scripts of this folder (run_compiled_cuda.sh,
# run_cpu_tables.sh): a summary file and stages with a time limit.
# Needs SUMMARY (the summary file's path) set before the calls.

# note TEXT...: TEXT to stdout and to the summary.
note() { echo "$*" | tee -a "$SUMMARY"; }

# stage NAME LIMIT_S LOG CMD...: runs CMD with a time limit (seconds), its
# output appended to LOG, and notes its status and time.
stage() {
  local name=$1 limit=$2 log=$3; shift 3
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >> "$log" 2>&1
  local rc=$?
  note "$(printf '%-34s rc=%-3s %4ss%s' "$name" "$rc" "$((SECONDS - t0))" \
    "$([ "$rc" = 124 ] && echo '  (time limit)')")"
}
