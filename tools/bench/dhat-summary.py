#!/usr/bin/env python3
"""Summarizes a dhat-heap.json (the manager built with `--features dhat-heap`) by the bytes live at the heap's peak.

    tools/bench/dhat-summary.py dhat-heap.json [--top 25] [--frames 6] [--per N]

Prints the total at the peak (dhat's t-gmax), the top allocation sites with their first frames of CAPOV's own code
and of the libraries that allocated, and the bytes at the peak grouped by the innermost CAPOV frame (what part of
the operator holds the memory). `--per N` adds bytes per machine for a run of N machines.
"""

import argparse
import collections
import json
import re

# Frames that only pass an allocation through (the allocator, dhat, std's containers and the runtime's glue).
NOISE = re.compile(
    r"^(dhat::|alloc::|core::|std::|<alloc::|<core::|<std::|hashbrown::|<hashbrown::|__rust|_start|main$|"
    r"<dhat::|backtrace::|\[root\])"
)
# Frames inside the standard library and hashbrown (the containers), by where they are.
PLUMBING = re.compile(r"^(__rust_alloc|<dhat)|\((alloc/src|core/src|std/src|src/raw/|collections/|btree/|src/vec/)")
OURS = re.compile(r"\b(capov_actors|capov_ovirt|capov|manager)::")

# What holds the bytes, recognised from the allocating stack (first rule that matches). The sites are where the
# memory was allocated; the names say who keeps it (e.g. an OVirtMachine decoded by the watch lives on in the machine
# actor's state).
CATEGORIES = [
    ("Event recorder cache (kube Recorder, keyed per object and reason, 6 min)", r"kube-runtime-[0-9.]+/src/events\.rs"),
    ("Events being published (a task per Event)", r"status_writer::\{impl#1\}::handle::\{async_fn#0\}::\{async_block_env#0\}"),
    ("machine actor: ractor's boxed processing loop (the handle future, one per actor)",
     r"^new<ractor::actor::\{impl#4\}::processing_loop::[^\n]*MachineActor>> \(alloc/src/boxed\.rs"),
    ("machine actor: pass future (boxed, only while a pass runs)", r"machine::run_pass|machine/mod\.rs.*Box::pin"),
    ("ractor channels (mailbox and supervision blocks)", r"(MuxedMessage|SupervisionEvent)>? \(sync/mpsc/block\.rs"),
    ("mailbox: queued messages", r"mailbox\.rs:\d+.*\n(?s:.*)"),
    ("CAPI Machine/Cluster stores (reflector)", r"apply_watcher_event<kube_core::dynamic::DynamicObject>|apply_watcher_event<capov_actors::runtime::capi"),
    ("Namespace store (reflector)", r"apply_watcher_event<k8s_openapi[^>]*Namespace>"),
    ("supervisor: Child.latest (a copy of each OVirtMachine)", r"supervisor\.rs:(662|711):"),
    ("supervisor: credential Secrets", r"supervisor\.rs:64[0-9]:"),
    ("Event recorder (recent series, runtime/events.rs)", r"runtime/events\.rs"),
    ("workload cluster reads in flight (Node lists)", r"runtime/machine/workload\.rs"),
    ("managedFields decoded from the API (kept by whoever holds the object)", r"managed_fields_entry"),
    ("OVirtMachines decoded from the API (the machine actors' objects)", r"crds/src/machine\.rs:11:"),
    ("statuses as JSON (the status writer's pending and written maps)",
     r"serialize<serde_json::value::ser::Serializer>(?s:.*)runtime/machine/mod\.rs"),
    ("machine actor state and passes", r"src/runtime/machine/"),
    ("status writer (pending / written statuses)", r"src/runtime/status_writer\.rs"),
    ("provider actor (subscribers, watched VMs, engine client)", r"src/runtime/provider\.rs|src/runtime/connection\.rs|ovirt/src/"),
    ("watch streams (decoding, buffers)", r"kube_runtime::watcher|kube-runtime-[0-9.]+/src/watcher\.rs"),
    ("HTTP connections (hyper, rustls buffers)", r"hyper|rustls|h2::"),
    ("tracing spans", r"tracing_subscriber|sharded_slab"),
    ("prometheus metrics", r"prometheus"),
    ("tokio tasks and timers", r"tokio::runtime::task::core::Cell|tokio::time"),
]


def function(frame: str) -> str:
    """`0x1234: capov_actors::runtime::x::y (actors/src/runtime/x.rs:10:5)` -> name and place, without the address."""
    frame = re.sub(r"^0x[0-9a-f]+: ", "", frame)
    frame = re.sub(r"::h[0-9a-f]{16}", "", frame)
    return frame


def short(frame: str) -> str:
    frame = function(frame)
    frame = re.sub(r"\(/[^ )]*/(registry/src/[^/]+/|rustc/[0-9a-f]+/library/)", "(", frame)
    frame = re.sub(r"\(/work/[^/]+/", "(", frame)
    return frame


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--frames", type=int, default=6)
    parser.add_argument("--per", type=int, default=0, help="machines in the run, for bytes per machine")
    args = parser.parse_args()
    with open(args.path) as f:
        data = json.load(f)
    frames = data["ftbl"]
    pps = data["pps"]
    total = sum(pp["gb"] for pp in pps)
    blocks = sum(pp["gbk"] for pp in pps)
    per = f", {total / args.per / 1024:.1f} KiB per machine" if args.per else ""
    print(f"bytes live at the peak (t-gmax): {total / 2**20:.1f} MiB in {blocks} blocks{per}")
    print(f"allocated over the whole run: {sum(pp['tb'] for pp in pps) / 2**20:.1f} MiB")

    def stack(pp):
        return [short(frames[i]) for i in pp["fs"]]

    def interesting(pp):
        return [f for f in stack(pp) if not NOISE.match(f) and not PLUMBING.search(f)]

    print(f"\n## top {args.top} allocation sites by bytes at the peak\n")
    for pp in sorted(pps, key=lambda p: -p["gb"])[: args.top]:
        if pp["gb"] == 0:
            break
        size = pp["gb"] / max(pp["gbk"], 1)
        print(f"{pp['gb'] / 2**20:8.2f} MiB  {pp['gbk']:>8} blocks  {size:>9.0f} B/block")
        for f in interesting(pp)[: args.frames]:
            print(f"      {f}")

    print("\n## bytes at the peak by what holds them\n")
    categories = collections.Counter()
    compiled = [(name, re.compile(rule, re.M)) for name, rule in CATEGORIES]
    for pp in pps:
        if pp["gb"] == 0:
            continue
        text = "\n".join(function(frames[i]) for i in pp["fs"])
        name = next((name for name, rule in compiled if rule.search(text)), "other")
        categories[name] += pp["gb"]
    for name, size in categories.most_common():
        extra = f"  {size / args.per:>9.0f} B/machine" if args.per else ""
        print(f"{size / 2**20:8.2f} MiB{extra}  {name}")

    print("\n## bytes at the peak by the innermost CAPOV frame\n")
    groups = collections.Counter()
    for pp in pps:
        if pp["gb"] == 0:
            continue
        ours = next((function(f) for f in interesting(pp) if OURS.search(function(f))), None)
        if ours is None:
            lib = next(iter(interesting(pp)), "(no frame)")
            ours = "outside CAPOV: " + re.sub(r"[<(].*", "", lib).strip()
        groups[re.sub(r" \(.*", "", ours)] += pp["gb"]
    for name, size in groups.most_common(args.top):
        extra = f"  {size / args.per:>9.0f} B/machine" if args.per else ""
        print(f"{size / 2**20:8.2f} MiB{extra}  {name}")


if __name__ == "__main__":
    main()
