#!/usr/bin/env bash
# The CAPOV demo: a local etcd + kube-apiserver and the Cluster API core manager (built from Go modules on the first
# run: 10-20 minutes, with progress), the oVirt engine simulator over HTTPS and the operator bring three machines (a
# control-plane Machine and a MachineDeployment of two) to Ready while a table shows their progress. With --kubeconfig (or KUBECONFIG) the demo uses that cluster instead of starting its own.
#   ./tools/demo.sh [--headless] [--machines N] [--kubeconfig FILE]   (--help for all options)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${KUBECONFIG:-}" ] && ! printf '%s\n' "$@" | grep -q -- '--kubeconfig'; then
  echo "==> control-plane binaries (tools/build-go-tools.sh; the first run builds them from Go modules)"
  KUBEBUILDER_ASSETS=$(tools/build-go-tools.sh)
  export KUBEBUILDER_ASSETS
  echo "==> Cluster API core manager (tools/build-go-tools.sh --capi; the first run builds it from Go modules)"
  CAPOV_CAPI_DIR=$(tools/build-go-tools.sh --capi)
  export CAPOV_CAPI_DIR
fi
# CAPOV_DEMO_PROFILE=dev reuses the test build (CI); users get optimised binaries.
profile=${CAPOV_DEMO_PROFILE:-release}
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
echo "==> building the operator and the demo (cargo build --profile $profile)"
cargo build --profile "$profile" --locked -p capov --bin manager -p capov-demo --bin capov-demo
exec "target/$dir/capov-demo" --manager "target/$dir/manager" "$@"
