#!/usr/bin/env bash
# Starts a real Kubernetes node on this machine, joined to the apiserver of KUBECONFIG: containerd 2.x with Debian's
# runc and CNI plugins (a bridge network), a locally made pause image, kubelet, and kube-proxy (iptables mode) so that
# pods reach Services (the apiserver through `kubernetes`). KUBECONFIG's CA also verifies the apiserver's client
# certificate towards kubelet (`kubectl logs`). Binaries from
# tools/build-go-tools.sh --node / --containerd (cached by go.sum hash). Images reach the node by import only
# (tools/node/up.sh imports the pause image; `ctr -n k8s.io images import` others); nothing is pulled.
#
# Usage: tools/node/up.sh KUBECONFIG STATE_DIR [NODE_NAME]
#   Leaves containerd, kubelet and kube-proxy running (their PIDs in STATE_DIR/*.pid, logs in STATE_DIR/*.log) and prints the
#   containerd socket last on stdout. tools/node/down.sh STATE_DIR stops them.
#
# This machine kind runs cgroup v1 (hybrid): kubelet 1.36 starts there only with failCgroupV1: false.
# --help prints the comment above, before anything is built or changed.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
kubeconfig=$(realpath "$1")
state=$(mkdir -p "$2" && realpath "$2")
node=${3:-capov-node}
say() { printf 'node: %s\n' "$*" >&2; }

missing=()
for package in runc containernetworking-plugins iptables musl-tools docker.io; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi
node_bin=$(tools/build-go-tools.sh --node)
ctd_bin=$(tools/build-go-tools.sh --containerd)

sock=$state/containerd.sock
mkdir -p "$state"/{containerd,cni/net.d,kubelet,pki,manifests}
cat >"$state/containerd.toml" <<TOML
version = 3
root = "$state/containerd/root"
state = "$state/containerd/state"

[grpc]
  address = "$sock"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "capov.invalid/pause:local"

[plugins."io.containerd.cri.v1.runtime"]
  # Without CAP_SYS_RESOURCE (this machine kind's root) runc cannot lower a pod's OOM score below containerd's own
  # (kubelet asks -998 for sandboxes): clamp it instead of failing every sandbox.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$state/cni/net.d"
TOML
cat >"$state/cni/net.d/10-capov.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "capov-node",
  "plugins": [
    {"type": "bridge", "bridge": "capov0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
JSON

if ! [[ -S $sock ]] || ! "$ctd_bin/ctr" --address "$sock" version >/dev/null 2>&1; then
  say "starting containerd ($("$ctd_bin/containerd" --version | awk '{print $3}'))"
  PATH=$ctd_bin:$PATH setsid nohup "$ctd_bin/containerd" --config "$state/containerd.toml" \
    >"$state/containerd.log" 2>&1 </dev/null &
  echo $! >"$state/containerd.pid"
  for _ in $(seq 60); do "$ctd_bin/ctr" --address "$sock" version >/dev/null 2>&1 && break; sleep 0.5; done
  "$ctd_bin/ctr" --address "$sock" version >/dev/null || { tail -20 "$state/containerd.log" >&2; exit 1; }
fi

# The pause image: a static binary of tools/node/pause.c in an otherwise empty image.
if ! "$ctd_bin/ctr" --address "$sock" -n k8s.io images ls -q | grep -qx 'capov.invalid/pause:local'; then
  say "making the pause image"
  work=$(mktemp -d)
  musl-gcc -static -Os -s -o "$work/pause" tools/node/pause.c
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$work/Dockerfile"
  DOCKER_BUILDKIT=1 /usr/bin/docker build -q -t capov.invalid/pause:local "$work" >&2
  /usr/bin/docker save capov.invalid/pause:local | "$ctd_bin/ctr" --address "$sock" -n k8s.io images import - >&2
  rm -rf "$work"
fi

cat >"$state/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$sock
imageServiceEndpoint: unix://$sock
staticPodPath: $state/manifests
failSwapOn: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization:
  mode: Webhook
# A shared CI disk: evict on nothing the test makes.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
YAML
sed -n 's/^ *certificate-authority-data: *//p' "$kubeconfig" | head -n1 | base64 -d >"$state/pki/ca.crt"
if ! [[ -f $state/kubelet.pid ]] || ! kill -0 "$(cat "$state/kubelet.pid")" 2>/dev/null; then
  say "starting kubelet ($("$node_bin/kubelet" --version))"
  setsid nohup "$node_bin/kubelet" --config="$state/kubelet.yaml" --kubeconfig="$kubeconfig" \
    --root-dir="$state/kubelet" --cert-dir="$state/pki" --hostname-override="$node" \
    >"$state/kubelet.log" 2>&1 </dev/null &
  echo $! >"$state/kubelet.pid"
fi
if ! [[ -f $state/kube-proxy.pid ]] || ! kill -0 "$(cat "$state/kube-proxy.pid")" 2>/dev/null; then
  say "starting kube-proxy (iptables)"
  # The conntrack settings at 0 leave the kernel's as they are (read-only in some containers).
  setsid nohup "$node_bin/kube-proxy" --kubeconfig="$kubeconfig" --hostname-override="$node" \
    --proxy-mode=iptables --cluster-cidr=10.88.0.0/16 --conntrack-max-per-core=0 \
    --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
    --metrics-bind-address=127.0.0.1:10249 --healthz-bind-address=127.0.0.1:10256 --v=1 \
    >"$state/kube-proxy.log" 2>&1 </dev/null &
  echo $! >"$state/kube-proxy.pid"
fi
echo "$sock"
