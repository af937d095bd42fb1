#!/usr/bin/env bash
# The CAPOV demo: a local etcd + kube-apiserver and the Cluster API core manager (built from Go modules on the first
# run: 10-20 minutes, with progress), the oVirt engine simulator over HTTPS and the operator bring three machines (a
# control-plane Machine and a MachineDeployment of two) to Ready while a table shows their progress. With
# --kubeconfig (or KUBECONFIG) the demo uses that cluster instead of starting its own.
#
# The operator runs the way users run it whenever a node can be started here (root, no --kubeconfig): its image,
# built offline (tools/image/build.sh), as a pod installed by Helm on a real node (containerd, kubelet, kube-proxy:
# tools/node/up.sh; the first run builds them from Go modules, a few minutes more). Otherwise it runs as a process.
# --mode pod|process forces one; the demo prints which mode it runs.
#
# On a terminal the machines' table is redrawn in place, under an "N of M Ready" line; otherwise (a pipe, CI) each
# change is one plain line.
#
# Usage: ./tools/demo.sh [OPTIONS]
#   --mode pod|process        how the operator runs (default: pod as root without --kubeconfig, else process)
#   --machines N              how many machines to create (default 3)
#   --kubeconfig FILE         use this cluster instead of starting a local apiserver (also from KUBECONFIG)
#   --headless                plain progress lines, and exit 0 once every machine is Ready (for CI)
#   --timeout SECONDS         give up after this many seconds (default 600)
#   --help                    this text
# CAPOV_DEMO_PROFILE=dev builds with the test profile instead of release.
# --help prints the comment above, before anything is built or changed.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=auto
kubeconfig_given=${KUBECONFIG:+yes}
args=()
while (($#)); do
  case $1 in
    --mode) mode=${2:?--mode needs pod or process}; shift 2 ;;
    --mode=*) mode=${1#--mode=}; shift ;;
    --kubeconfig|--kubeconfig=*) kubeconfig_given=yes; args+=("$1"); shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ $mode == auto ]]; then
  if [[ -n $kubeconfig_given ]]; then
    mode=process why="a cluster was given (--kubeconfig/KUBECONFIG)"
  elif [[ $(id -u) != 0 ]]; then
    mode=process why="starting a node needs root"
  elif ! command -v apt-get >/dev/null && [[ ! -x /usr/bin/docker ]]; then
    mode=process why="no Docker engine and no apt to install one"
  else
    mode=pod why="root: a node can be started here"
  fi
  echo "==> mode: $mode ($why; --mode process|pod to choose)"
fi
case $mode in
  pod|process) ;;
  *) echo "demo.sh: --mode must be pod or process, not '$mode'" >&2; exit 2 ;;
esac
if [[ $mode == pod && -n $kubeconfig_given ]]; then
  echo "demo.sh: --mode pod starts its own cluster and node; drop --kubeconfig/KUBECONFIG" >&2
  exit 2
fi

if [[ -z $kubeconfig_given ]]; then
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
bin=${CARGO_TARGET_DIR:-target}/$dir
if [[ $mode == pod ]]; then
  echo "==> node binaries and helm (tools/build-go-tools.sh --node --containerd --helm; the first run builds them)"
  CAPOV_NODE_DIR=$(tools/build-go-tools.sh --node)
  export CAPOV_NODE_DIR
  tools/build-go-tools.sh --containerd >/dev/null
  CAPOV_HELM_DIR=$(tools/build-go-tools.sh --helm)
  export CAPOV_HELM_DIR
  echo "==> the operator image (tools/image/build.sh, offline)"
  image=$(tools/image/build.sh)
fi
# Both binaries in every mode: one feature set, so the build reuses what the tests and the other mode compiled.
echo "==> building the operator and the demo (cargo build --profile $profile)"
cargo build --profile "$profile" --locked -p capov --bin manager -p capov-demo --bin capov-demo
if [[ $mode == pod ]]; then
  exec "$bin/capov-demo" --image "$image" "${args[@]}"
fi
exec "$bin/capov-demo" --manager "$bin/manager" "${args[@]}"
