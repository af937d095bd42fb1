#!/usr/bin/env bash
# Builds the Go-made test binaries (kube-apiserver, kube-controller-manager, kubectl, etcd) from the wrapper module
# in tools/envtest, once per go.sum: the binaries land in a cache directory keyed by the hash of the module files,
# this script and the Go version, and a later run with the same key only prints that directory.
#
#   tools/build-go-tools.sh          -> prints the directory holding the binaries (KUBEBUILDER_ASSETS layout)
#   tools/build-go-tools.sh --helm   -> builds helm from the wrapper module in tools/helm instead and prints the
#                                       directory holding `helm` (a sibling cache directory `helm-<key>`, keyed the
#                                       same way by tools/helm/go.{mod,sum}, this script and the Go version)
#
# KUBEBUILDER_ASSETS, when set to a directory that already holds the binaries, is used as is.
# CAPOV_HELM_DIR, when set to a directory that already holds an executable `helm`, is used as is by --helm.
# CAPOV_TOOLS_CACHE moves the cache (default: ~/.cache/capov-tools).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ "${1:-}" = "--helm" ]; then
  if [ -n "${CAPOV_HELM_DIR:-}" ] && [ -x "$CAPOV_HELM_DIR/helm" ]; then
    echo "$CAPOV_HELM_DIR"
    exit 0
  fi
  export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -modcacherw"
  export GOPROXY=${GOPROXY_OVERRIDE:-https://proxy.golang.org,off}
  key=$( { cat "$here/helm/go.mod" "$here/helm/go.sum" "${BASH_SOURCE[0]}"; go version; } | sha256sum | cut -c1-16)
  cache=${CAPOV_TOOLS_CACHE:-$HOME/.cache/capov-tools}
  out="$cache/helm-$key"
  if [ -x "$out/helm" ]; then
    echo "$out"
    exit 0
  fi
  tmp="$out.partial.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  cd "$here/helm"
  hver=$(go list -m -f '{{.Version}}' helm.sh/helm/v4)
  start=$(date +%s)
  echo "build-go-tools: building helm $hver — the first build takes a few minutes" >&2
  go build -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$hver -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
    -o "$tmp/helm" helm.sh/helm/v4/cmd/helm
  echo "build-go-tools: built helm in $(( $(date +%s) - start ))s" >&2
  mkdir -p "$cache"
  rm -rf "$out"
  mv "$tmp" "$out"
  trap - EXIT
  echo "$out"
  exit 0
fi
needed=(kube-apiserver kube-controller-manager kubectl etcd)

have_all() {
  local dir=$1 bin
  for bin in "${needed[@]}"; do [ -x "$dir/$bin" ] || return 1; done
}

if [ -n "${KUBEBUILDER_ASSETS:-}" ] && have_all "$KUBEBUILDER_ASSETS"; then
  echo "$KUBEBUILDER_ASSETS"
  exit 0
fi

export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -modcacherw"
export GOPROXY=${GOPROXY_OVERRIDE:-https://proxy.golang.org,off}

key=$( { cat "$here/envtest/go.mod" "$here/envtest/go.sum" "${BASH_SOURCE[0]}"; go version; } | sha256sum | cut -c1-16)
cache=${CAPOV_TOOLS_CACHE:-$HOME/.cache/capov-tools}
out="$cache/envtest-$key"
if have_all "$out"; then
  echo "$out"
  exit 0
fi

log() { echo "build-go-tools: $*" >&2; }
tmp="$out.partial.$$"
rm -rf "$tmp"; mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

cd "$here/envtest"
kver=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$kver" | cut -d. -f2)
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=$kver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  ld="$ld -X $p.buildDate=1970-01-01T00:00:00Z"
done
start=$(date +%s)
log "building Kubernetes $kver (kube-apiserver, kube-controller-manager, kubectl) — the first build takes 10-20 minutes"
go build -pgo=off -ldflags "$ld" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
ever=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
log "building etcd $ever"
go build -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$ever" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
log "built in $(( $(date +%s) - start ))s"

mkdir -p "$cache"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
