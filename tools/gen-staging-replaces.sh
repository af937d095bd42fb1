#!/usr/bin/env bash
# Prints the `replace ( … )` block tools/envtest/go.mod needs for a Kubernetes version, read from the real
# k8s.io/kubernetes go.mod (its staging modules are replaced by ./staging paths that consumers ignore, so the wrapper
# must pin each to the published v0.MINOR.PATCH). Use on every Kubernetes bump:
#   tools/gen-staging-replaces.sh v1.36.3
# --help prints the comment above, before anything is built or changed.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -euo pipefail
kver=${1:?usage: $0 vMAJOR.MINOR.PATCH}
sver="v0.${kver#v1.}"
export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY=${GOPROXY_OVERRIDE:-https://proxy.golang.org,off}
gomod=$(cd "$(mktemp -d)" && go mod download -json "k8s.io/kubernetes@$kver" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
[ -f "$gomod" ] || { echo "cannot download the go.mod of k8s.io/kubernetes@$kver" >&2; exit 1; }
echo "replace ("
sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/src/k8s\.io/.*#\t\1 => \1 '"$sver"'#p' "$gomod"
echo ")"
