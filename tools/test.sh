#!/usr/bin/env bash
# CAPOV's test suite: builds (once, cached by go.sum) the real Kubernetes control plane, helm and the Cluster API
# core manager + clusterctl, Ignition's validator and promtool from Go modules, unpacks Debian's cloud-init (apt,
# cached), installs the official oVirt Python SDK (PyPI, into target/), then runs formatting and lint checks, builds
# the user book (mdBook from crates.io, cached) and checks its links, and runs every Rust test, unit and integration,
# against that control plane and the oVirt engine simulator. Needs: Go >= 1.26 and Rust (rustup) on PATH, access to
# the Go module proxy, crates.io and PyPI, apt (Debian) with its package sources, root and rustup's musl target for
# the operator image (tests/image.rs: tools/image/build.sh installs docker.io and starts dockerd) and the in-cluster
# e2e on a real node (tests/in_cluster.rs: containerd, kubelet, kube-proxy, iptables, mounts). Without root those two
# steps are skipped with a note, and
# CAPOV_IMAGE_TESTS=0 / CAPOV_NODE_TESTS=0 skip them on purpose (the node step needs the image).
# --help prints the comment above, before anything is built or changed.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }
started=$(date +%s)

# Incremental data would more than double target/ and is never reused by a one-shot run.
export CARGO_INCREMENTAL=0
# Cargo's build directory is cached like the Go tools, by what decides the dependencies' builds (Cargo.lock and the
# compiler), unless CARGO_TARGET_DIR names one: a fresh clone then rebuilds only CAPOV's own crates. Directories of
# other keys are removed, so the cache holds one build, of one clone.
if [[ -z ${CARGO_TARGET_DIR:-} ]]; then
  cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/capov-target
  key=$( (cat Cargo.lock; rustc -vV) | sha256sum | cut -c1-16)
  mkdir -p "$cache_root"
  find "$cache_root" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
  # Cargo names a workspace crate's build by its path relative to the workspace, and does not rebuild a crate when
  # only its absolute path changed: a clone at another path would reuse test binaries whose env!("CARGO_MANIFEST_DIR")
  # names the old clone. So the directory belongs to one clone; another clone starts it over.
  owner_file=$cache_root/$key/.capov-clone
  if [[ -d $cache_root/$key && "$(cat "$owner_file" 2>/dev/null)" != "$PWD" ]]; then
    echo "cargo's cached build directory was built by another clone ($(cat "$owner_file" 2>/dev/null || echo unknown)): starting it over"
    rm -rf "${cache_root:?}/$key"
  fi
  if [[ -d $cache_root/$key ]] && (( $(du -sm "$cache_root/$key" | cut -f1) > 40 * 1024 )); then
    echo "cargo's cached build directory is over 40 GiB: starting it over"
    rm -rf "${cache_root:?}/$key"
  fi
  mkdir -p "$cache_root/$key"
  echo "$PWD" >"$owner_file"
  export CARGO_TARGET_DIR=$cache_root/$key
  echo "cargo's build directory: $CARGO_TARGET_DIR (cached by Cargo.lock and rustc; CARGO_TARGET_DIR=target to keep it here)"
fi
target_dir=$CARGO_TARGET_DIR
mkdir -p "$target_dir"
free_mib() { df -Pm "$target_dir" | awk 'NR == 2 { print $4 }'; }
disk_report() { echo "disk: $(du -sm "$target_dir" | cut -f1) MiB in $target_dir, $(free_mib) MiB free"; }

step "control-plane binaries (tools/build-go-tools.sh)"
KUBEBUILDER_ASSETS=$(tools/build-go-tools.sh)
export KUBEBUILDER_ASSETS
echo "using $KUBEBUILDER_ASSETS"
CAPOV_HELM_DIR=$(tools/build-go-tools.sh --helm)
export CAPOV_HELM_DIR
echo "using $CAPOV_HELM_DIR/helm"
CAPOV_CAPI_DIR=$(tools/build-go-tools.sh --capi)
export CAPOV_CAPI_DIR
echo "using $CAPOV_CAPI_DIR (capi-manager, clusterctl)"
CAPOV_IGNITION_DIR=$(tools/build-go-tools.sh --ignition)
export CAPOV_IGNITION_DIR
echo "using $CAPOV_IGNITION_DIR/ignition-validate"
CAPOV_PROMTOOL_DIR=$(tools/build-go-tools.sh --promtool)
export CAPOV_PROMTOOL_DIR
echo "using $CAPOV_PROMTOOL_DIR/promtool"

step "Debian's cloud-init, unpacked (tools/cloud-init/fetch.sh)"
CAPOV_CLOUD_INIT_DIR=$(tools/cloud-init/fetch.sh)
export CAPOV_CLOUD_INIT_DIR
echo "using $CAPOV_CLOUD_INIT_DIR (cloud-init $(cat "$CAPOV_CLOUD_INIT_DIR/VERSION"))"

step "oVirt's Python SDK in a virtualenv (tools/ovirt-sdk/install.sh, for ovirt-sim/tests/sdk.rs)"
CAPOV_OVIRT_SDK_PYTHON=$(tools/ovirt-sdk/install.sh)
export CAPOV_OVIRT_SDK_PYTHON
echo "using $CAPOV_OVIRT_SDK_PYTHON"

# What a cold build writes to target/ (clippy and every test binary: 2.8 GiB measured, docs/decisions.md "Disk"):
# fail here with the figure rather than mid-link.
needed_mib=${CAPOV_TEST_DISK_MIB:-3000}
if [[ ! -d "$target_dir/debug/deps" ]] && (( $(free_mib) < needed_mib )); then
  echo "tools/test.sh: $(free_mib) MiB free next to $target_dir; a cold build needs about $needed_mib MiB" >&2
  exit 1
fi
disk_report

step "cargo fmt --check"
cargo fmt --all -- --check

step "one rustls crypto provider (ring): aws-lc-rs must not be in the dependency graph"
if cargo tree --workspace --locked -e normal,build -i aws-lc-rs >/dev/null 2>&1; then
  cargo tree --workspace --locked -e normal,build -i aws-lc-rs
  exit 1
fi

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings


step "user book: mdBook build and link check (tools/book/build.sh)"
tools/book/build.sh

# Every test binary built once, then run CAPOV_TEST_JOBS (default 3) at a time, each binary's output printed whole
# when it ends (tools/test-binaries.sh); a failure fails the suite once all have run, as --no-fail-fast.
step "cargo test (test binaries in parallel: tools/test-binaries.sh)"
results=$(mktemp)
trap 'rm -f "$results"' EXIT
tests_started=$(date +%s)
tools/test-binaries.sh "$results"
echo "test binaries done in $(( $(date +%s) - tests_started ))s"
disk_report

# The image and the in-cluster e2e need root (apt installs, the Docker engine, containerd, iptables, mounts).
image_tests=${CAPOV_IMAGE_TESTS:-1}
node_tests=${CAPOV_NODE_TESTS:-1}
if [[ $(id -u) != 0 ]]; then
  [[ $image_tests == 1 || $node_tests == 1 ]] && echo "tools/test.sh: not root: the image and in-cluster steps are skipped"
  image_tests=0 node_tests=0
fi
[[ $image_tests == 1 ]] || node_tests=0

if [[ $image_tests == 1 ]]; then
  step "operator image, built offline (tools/image/build.sh: installs and starts the Docker engine if needed)"
  image_started=$(date +%s)
  tools/image/build.sh
  echo "image built in $(( $(date +%s) - image_started ))s"
  cargo test --locked --test image -- --ignored 2>&1 | tee -a "$results"
fi

# The in-cluster e2e (tests/in_cluster.rs) starts a real node on this machine: apt (runc, CNI plugins, iptables),
# the image, containerd and kubelet from Go modules (cached by go.sum hash; cold about 4 + 2 CPU-minutes,
# docs/node.md). It prints the image size and the pod's start time.
if [[ $node_tests == 1 ]]; then
  step "in-cluster e2e on a real node (tools/node/up.sh: containerd, kubelet, kube-proxy; chart + image)"
  node_started=$(date +%s)
  CAPOV_NODE_DIR=$(tools/build-go-tools.sh --node)
  export CAPOV_NODE_DIR
  echo "using $CAPOV_NODE_DIR (kubelet, kube-proxy, kube-scheduler), $(tools/build-go-tools.sh --containerd)"
  echo "node binaries ready in $(( $(date +%s) - node_started ))s"
  cargo test --locked --test in_cluster -- --ignored --nocapture 2>&1 | tee -a "$results"
  echo "in-cluster e2e done in $(( $(date +%s) - node_started ))s"
fi

# The demo runs the operator as a pod on a node whenever the node step ran, as a process otherwise.
demo_mode=$([[ $node_tests == 1 ]] && echo pod || echo process)
step "demo, $demo_mode mode (headless: exits 0 once three machines are Ready)"
CAPOV_DEMO_PROFILE=dev ./tools/demo.sh --headless --timeout 600 --mode "$demo_mode"

# The benchmark, small (the test build: 20 machines, fast engine timings, no steady window): its progress lines and
# the plot it writes next to its report (SVG: machines Ready, engine requests/s, operator RSS over time).
step "benchmark, small: 20 machines (tools/bench; writes the plot)"
bench_started=$(date +%s)
cargo build --locked -p capov --bin manager -p capov-bench --bin capov-bench
plot=$target_dir/bench/capov-bench.svg
rm -f "$plot"
"$target_dir/debug/capov-bench" --manager "$target_dir/debug/manager" --machines 20 --timings fast \
  --steady-seconds 0 --timeout 300 --plot "$plot"
if ! grep -q '</svg>' "$plot" || [[ $(grep -c '<polyline' "$plot") != 3 ]]; then
  echo "tools/test.sh: the benchmark wrote no plot with its three lines at $plot" >&2
  exit 1
fi
echo "benchmark done in $(( $(date +%s) - bench_started ))s; plot: $plot"

echo
echo "tools/test.sh: all checks passed in $(( $(date +%s) - started ))s"
# One closing line for the whole suite, summed over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$results"
