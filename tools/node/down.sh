#!/usr/bin/env bash
# Stops what tools/node/up.sh STATE_DIR started and removes what its pods left on the machine: kube-proxy and kubelet,
# every container and pod sandbox of containerd's `k8s.io` namespace (their runc shims exit with them), containerd,
# kube-proxy's iptables chains, mounts under STATE_DIR, the CNI bridge `capov0`, its IP allocations and the pods'
# network namespaces that nothing uses any more. Only processes recorded in STATE_DIR/*.pid are signalled.
#
# Usage: tools/node/down.sh STATE_DIR [--keep]   (--keep: leave STATE_DIR's files, e.g. the logs)
# --help prints the comment above, before anything is built or changed.
if [[ " $* " == *" --help "* || " $* " == *" -h "* ]]; then sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" | sed '$d'; exit 0; fi
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
state=$(realpath "$1")
keep=${2:-}
say() { printf 'node down: %s\n' "$*" >&2; }

stop() { # stop NAME: SIGTERM, then SIGKILL after 10 s
  local file=$state/$1.pid pid
  [[ -f $file ]] || return 0
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { say "$1 ($pid) ignored SIGTERM, killing it"; kill -KILL "$pid" 2>/dev/null; }
  fi
  rm -f "$file"
}

stop kube-proxy
stop kubelet

ctd_bin=$(tools/build-go-tools.sh --containerd 2>/dev/null || true)
sock=$state/containerd.sock
if [[ -n $ctd_bin && -S $sock ]] && "$ctd_bin/ctr" --address "$sock" version >/dev/null 2>&1; then
  ctr=("$ctd_bin/ctr" --address "$sock" -n k8s.io)
  for task in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
    "${ctr[@]}" tasks kill -s SIGKILL "$task" >/dev/null 2>&1
  done
  for task in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
    for _ in $(seq 50); do "${ctr[@]}" tasks delete "$task" >/dev/null 2>&1 && break; sleep 0.1; done
  done
  for container in $("${ctr[@]}" containers ls -q 2>/dev/null); do
    "${ctr[@]}" containers delete "$container" >/dev/null 2>&1
  done
fi
stop containerd

# kube-proxy's own clean-up of its iptables chains.
node_bin=$(tools/build-go-tools.sh --node 2>/dev/null || true)
[[ -n $node_bin ]] && "$node_bin/kube-proxy" --cleanup --v=0 >/dev/null 2>&1
# kubelet's own chains (KUBE-FIREWALL drops non-loopback traffic to 127.0.0.0/8; canaries): no other program on this
# machine names a chain KUBE-*, and kube-proxy's are gone by now.
for iptables in iptables ip6tables; do
  command -v "$iptables" >/dev/null || continue
  for table in filter nat mangle; do
    "$iptables" -t "$table" -S 2>/dev/null | awk '$1 == "-A" && $2 !~ /^KUBE-/ && / -j KUBE-/' |
      while read -r rule; do
        # eval: the rule is iptables' own, quoted comments included.
        eval "$iptables -t $table ${rule/#-A/-D}"
      done
    for chain in $("$iptables" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ { print $2 }'); do
      "$iptables" -t "$table" -F "$chain"
    done
    for chain in $("$iptables" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ { print $2 }'); do
      "$iptables" -t "$table" -X "$chain"
    done
  done
done

# Mounts under the state directory (projected volumes, container root filesystems), innermost first.
awk -v prefix="$state/" 'index($2, prefix) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r mount; do
  umount -l "$mount" 2>/dev/null
done

ip link show capov0 >/dev/null 2>&1 && ip link delete capov0
rm -rf /var/lib/cni/networks/capov-node
for netns in /var/run/netns/cni-*; do
  [[ -e $netns ]] || continue
  name=$(basename "$netns")
  if [[ -z $(ip netns pids "$name" 2>/dev/null) ]]; then
    umount "$netns" 2>/dev/null
    rm -f "$netns"
  fi
done

[[ $keep == --keep ]] || rm -rf "$state"
say "stopped"
