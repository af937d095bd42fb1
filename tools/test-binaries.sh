#!/usr/bin/env bash
# Builds every test binary of the workspace once (`cargo test --workspace --all-targets --no-run`), then runs them
# CAPOV_TEST_JOBS at a time (default 3: most e2e binaries wait on their apiserver and simulator more than they
# compute), each from its package's directory as `cargo test` would, slowest first. Each binary's output is printed
# whole when it ends, under a `==> name` line with its time, and appended to the file named by the first argument
# (for the suite's closing "N passed, M failed" line). Exits non-zero when any binary failed, crashed or printed no
# result, after all have run (as --no-fail-fast). Extra arguments go to every binary (e.g. a test name filter).
# --help prints the comment above.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

results=${1:?usage: tools/test-binaries.sh RESULTS_FILE [TEST ARGS...]}
shift
jobs_max=${CAPOV_TEST_JOBS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The binaries that take longest (measured on the 2-core CI machine) start first, so that the tail of the run is
# short ones; the rest follow in cargo's order.
slow_first=(management clusterctl chaos tenants lifecycle ownership
  hostile_workload troubleshooting faults reliability volume_release leader apiserver_restart)

# Binaries whose tests spend their time waiting on clusters of their own run more of those tests at once than cargo's
# default (one per core): the Cluster API tests take 317 s on 2 threads and 196 s on 4.
declare -A test_threads=([management]=4)

cargo test --workspace --all-targets --locked --no-run --message-format=json-render-diagnostics >"$work/artifacts.json"
# One line per test binary: package directory, a readable name, the executable.
python3 - "$work/artifacts.json" >"$work/all.tsv" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") and message["profile"]["test"]:
        package_dir = message["manifest_path"].removesuffix("/Cargo.toml")
        print(package_dir, message["target"]["kind"][0] + ":" + message["target"]["name"], message["executable"], sep="\t")
PY
{
  for name in "${slow_first[@]}"; do awk -F'\t' -v n="test:$name" '$2 == n' "$work/all.tsv"; done
  awk -F'\t' 'NR == FNR { if ($0 != "") slow["test:" $0] = 1; next } !($2 in slow)' \
    <(printf '%s\n' "${slow_first[@]}") "$work/all.tsv"
} >"$work/ordered.tsv"
echo "tools/test-binaries.sh: $(wc -l <"$work/ordered.tsv") test binaries, $jobs_max at a time"

# Runs one binary; prints its output whole (one binary at a time on the terminal) and records its exit status.
run_one() {
  local index=$1 dir=$2 name=$3 exe=$4
  shift 4
  local log="$work/$index.log" started status threads=${test_threads[${name#test:}]:-}
  started=$(date +%s)
  status=0
  (
    cd "$dir"
    if [[ -n $threads ]]; then export RUST_TEST_THREADS=$threads; fi
    "$exe" "$@"
  ) >"$log" 2>&1 || status=$?
  echo "$status" >"$work/$index.status"
  {
    flock 9
    printf '\n==> %s (%s), exit %s after %ss\n' "$name" "${exe##*/}" "$status" "$(($(date +%s) - started))"
    cat "$log"
    cat "$log" >>"$results"
  } 9>"$work/print.lock"
}

index=0
while IFS=$'\t' read -r dir name exe; do
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
  index=$((index + 1))
  echo "$name" >"$work/$index.name"
  run_one "$index" "$dir" "$name" "$exe" "$@" &
done <"$work/ordered.tsv"
wait

failed=()
for status_file in "$work"/*.status; do
  index=$(basename "$status_file" .status)
  log="$work/$index.log"
  if [[ $(cat "$status_file") != 0 ]] || ! grep -q '^test result:' "$log"; then
    failed+=("$(cat "$work/$index.name")")
  fi
done
started_count=$(ls "$work"/*.name | wc -l)
finished_count=$(ls "$work"/*.status | wc -l)
if ((finished_count != started_count)); then
  echo "tools/test-binaries.sh: $((started_count - finished_count)) binaries recorded no exit status" >&2
  exit 1
fi
if ((${#failed[@]} > 0)); then
  echo "tools/test-binaries.sh: failed: ${failed[*]}" >&2
  exit 1
fi
