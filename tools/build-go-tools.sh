#!/usr/bin/env bash
# Builds the Go-made test binaries from the wrapper modules under tools/, once per go.sum: the binaries land in a
# cache directory keyed by the hash of the module files, this script and the Go version, and a later run with the
# same key only prints that directory.
#
#   tools/build-go-tools.sh          -> the directory holding kube-apiserver, kube-controller-manager, kubectl and
#                                       etcd (tools/envtest; the KUBEBUILDER_ASSETS layout)
#   tools/build-go-tools.sh --helm   -> the directory holding helm (tools/helm)
#   tools/build-go-tools.sh --capi   -> the directory holding capi-manager, clusterctl and capi-config/ (the core
#                                       CRD bases and webhook manifests of the same CAPI version; tools/capi)
#   tools/build-go-tools.sh --node   -> the directory holding kubelet, kube-proxy and kube-scheduler (tools/node; the
#                                       control plane's Kubernetes version), for a real node
#   tools/build-go-tools.sh --containerd -> the directory holding containerd 2.x, its runc shim and ctr (tools/containerd)
#   tools/build-go-tools.sh --ignition -> the directory holding ignition-validate, Ignition's own config validator
#                                       (github.com/coreos/ignition/v2/validate; tools/ignition)
#   tools/build-go-tools.sh --promtool -> the directory holding promtool, Prometheus' own rule checker and rule
#                                       unit-test runner (github.com/prometheus/prometheus/cmd/promtool; tools/promtool)
#
# KUBEBUILDER_ASSETS (envtest), CAPOV_HELM_DIR (helm), CAPOV_CAPI_DIR (capi), CAPOV_IGNITION_DIR (ignition) or
# CAPOV_PROMTOOL_DIR (promtool), when set to a directory that already holds the binaries, is used as is. CAPOV_TOOLS_CACHE moves the cache (default: ~/.cache/capov-tools).
# --help prints the comment above, before anything is built or changed.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${CAPOV_TOOLS_CACHE:-$HOME/.cache/capov-tools}
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -modcacherw"
export GOPROXY=${GOPROXY_OVERRIDE:-https://proxy.golang.org,off}

log() { echo "build-go-tools: $*" >&2; }

have_all() {  # have_all DIR BINARY...
  local dir=$1 bin
  shift
  [ -n "$dir" ] || return 1
  for bin in "$@"; do [ -x "$dir/$bin" ] || return 1; done
}

build_envtest() {  # build_envtest OUT_DIR
  local out=$1 kver minor ld p ever
  kver=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
  minor=$(echo "$kver" | cut -d. -f2)
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$kver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    ld="$ld -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  log "building Kubernetes $kver (kube-apiserver, kube-controller-manager, kubectl) — the first build takes 10-20 minutes"
  go build -pgo=off -ldflags "$ld" -o "$out/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
  ever=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
  log "building etcd $ever"
  go build -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$ever" -o "$out/etcd" go.etcd.io/etcd/server/v3
}

build_helm() {  # build_helm OUT_DIR
  local out=$1 hver
  hver=$(go list -m -f '{{.Version}}' helm.sh/helm/v4)
  log "building helm $hver — the first build takes a few minutes"
  go build -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$hver \
-X helm.sh/helm/v4/internal/version.gitTreeState=clean" -o "$out/helm" helm.sh/helm/v4/cmd/helm
}

build_capi() {  # build_capi OUT_DIR
  local out=$1 cver minor ld p src
  cver=$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
  minor=$(echo "$cver" | cut -d. -f2)
  ld="-s -w"
  p=sigs.k8s.io/cluster-api/version
  ld="$ld -X $p.gitVersion=$cver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  ld="$ld -X $p.buildDate=1970-01-01T00:00:00Z"
  log "building Cluster API $cver (core manager, clusterctl) — the first build takes 10-20 minutes"
  go build -pgo=off -ldflags "$ld" -o "$out/" sigs.k8s.io/cluster-api/cmd/clusterctl
  go build -pgo=off -ldflags "$ld" -o "$out/capi-manager" sigs.k8s.io/cluster-api/core
  src=$(go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)
  mkdir -p "$out/capi-config"
  cp -r "$src/core/config/crd/bases" "$out/capi-config/crd"
  cp "$src/core/config/webhook/manifests.yaml" "$out/capi-config/webhook.yaml"
  chmod -R u+w "$out/capi-config"
}

build_node() {  # build_node OUT_DIR
  local out=$1 kver minor ld p
  kver=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
  minor=$(echo "$kver" | cut -d. -f2)
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$kver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    ld="$ld -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  log "building Kubernetes $kver node binaries (kubelet, kube-proxy, kube-scheduler)"
  go build -pgo=off -ldflags "$ld" -o "$out/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler
}

build_containerd() {  # build_containerd OUT_DIR
  local out=$1 cver ld
  cver=$(go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)
  ld="-s -w -X github.com/containerd/containerd/v2/version.Version=$cver"
  log "building containerd $cver (containerd, containerd-shim-runc-v2, ctr)"
  # Static, without the cgo-only snapshotters (btrfs) and without libseccomp: runc applies the seccomp profiles.
  go build -pgo=off -tags "no_btrfs no_devmapper no_zfs osusergo netgo" -ldflags "$ld" -o "$out/" \
    github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
    github.com/containerd/containerd/v2/cmd/ctr
}

build_ignition() {  # build_ignition OUT_DIR
  local out=$1 iver
  iver=$(go list -m -f '{{.Version}}' github.com/coreos/ignition/v2)
  log "building ignition-validate $iver"
  go build -ldflags "-s -w -X github.com/coreos/ignition/v2/internal/version.Raw=$iver" -o "$out/ignition-validate" \
    github.com/coreos/ignition/v2/validate
}

build_promtool() {  # build_promtool OUT_DIR
  local out=$1 pver p
  pver=$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
  p=github.com/prometheus/common/version
  log "building promtool (Prometheus module $pver) — the first build takes a few minutes"
  # remove_all_sd: without the service discovery plugins (cloud SDKs), which checking and testing rules never use.
  go build -pgo=off -tags remove_all_sd -ldflags "-s -w -X $p.Version=$pver -X $p.Branch=module -X $p.Revision=module-$pver" \
    -o "$out/promtool" github.com/prometheus/prometheus/cmd/promtool
}

# cached MODULE OVERRIDE_DIR BINARY... : prints a directory holding the module's binaries, building them on a miss.
cached() {
  local module=$1 override=$2 key out tmp start
  shift 2
  if have_all "$override" "$@"; then
    echo "$override"
    return
  fi
  # The key covers what decides the binaries: the module files, this module's build function and the Go version
  # (not the whole script, so that adding a module leaves the other caches valid).
  key=$( { cat "$here/$module/go.mod" "$here/$module/go.sum"; declare -f "build_$module"; go version; } |
    sha256sum | cut -c1-16)
  out="$cache/$module-$key"
  if have_all "$out" "$@"; then
    echo "$out"
    return
  fi
  tmp="$out.partial.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  start=$(date +%s)
  (cd "$here/$module" && "build_$module" "$tmp")
  log "built $module in $(( $(date +%s) - start ))s"
  rm -rf "$out"
  mv "$tmp" "$out"
  trap - EXIT
  echo "$out"
}

case "${1:-}" in
  --helm) cached helm "${CAPOV_HELM_DIR:-}" helm ;;
  --capi) cached capi "${CAPOV_CAPI_DIR:-}" capi-manager clusterctl ;;
  --node) cached node "${CAPOV_NODE_DIR:-}" kubelet kube-proxy kube-scheduler ;;
  --containerd) cached containerd "${CAPOV_CONTAINERD_DIR:-}" containerd containerd-shim-runc-v2 ctr ;;
  --ignition) cached ignition "${CAPOV_IGNITION_DIR:-}" ignition-validate ;;
  --promtool) cached promtool "${CAPOV_PROMTOOL_DIR:-}" promtool ;;
  "") cached envtest "${KUBEBUILDER_ASSETS:-}" kube-apiserver kube-controller-manager kubectl etcd ;;
  *) log "unknown argument $1 (use no argument, --helm, --capi, --node, --containerd, --ignition or --promtool; --help)"; exit 2 ;;
esac
