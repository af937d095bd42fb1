"""The official oVirt Python SDK (ovirtsdk4) drives the simulator through the workload features: a real client's
writers must pass the simulator's model check and its readers must parse the simulator's answers.

Run by ovirt-sim/tests/sdk.rs with OVIRT_URL (the API) and SIM_URL (the simulator's base, for its control
interface). Exits non-zero on the first failed expectation.
"""

import json
import os
import sys
import time
import urllib.request

import ovirtsdk4 as sdk
import ovirtsdk4.types as types

API = os.environ["OVIRT_URL"]
SIM = os.environ["SIM_URL"]


def control(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(SIM + "/sim/" + path, data=data, method=method)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read() or b"null")


def expect(condition, what):
    if not condition:
        print("FAILED: " + what, file=sys.stderr)
        sys.exit(1)


def wait(what, probe, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    expect(False, "timed out waiting for " + what)


connection = sdk.Connection(url=API, username="admin@internal", password="admin")
expect(connection.test(raise_exception=True), "the connection test")
system = connection.system_service()

# Hosts and their devices, with mdev types.
hosts = system.hosts_service().list()
gpu_host = next(h for h in hosts if h.name == "gpu-1")
devices = system.hosts_service().host_service(gpu_host.id).devices_service().list()
gpu = next(d for d in devices if d.name == "pci_0000_3b_00_0")
expect(gpu.product.name == "TU104GL [Tesla T4]", "the GPU's product")
expect([t.name for t in gpu.m_dev_types] == ["nvidia-222"], "the GPU's mdev types")
expect(gpu.m_dev_types[0].available_instances == 4, "the free vGPU instances")

# Instance types and template versions.
sizes = {t.name: t for t in system.instance_types_service().list()}
expect(set(sizes) == {"Tiny", "Small", "Medium", "Large", "XLarge"}, "the engine's instance types")
expect(sizes["Large"].memory == 8 << 30, "Large's memory")
versions = system.templates_service().list(search="name=gpu-os")
by_number = {t.version.version_number: t for t in versions}
expect(sorted(by_number) == [1, 2], "both template versions")
expect(by_number[2].version.base_template.id == by_number[1].id, "the base template of version 2")

data1 = next(sd for sd in system.storage_domains_service().list() if sd.name == "data1")
vms = system.vms_service()

# A lease without high availability is refused with the engine's text.
try:
    vms.add(
        types.Vm(
            name="no-ha",
            cluster=types.Cluster(name="Default"),
            template=types.Template(id=by_number[1].id),
            lease=types.StorageDomainLease(storage_domain=types.StorageDomain(id=data1.id)),
        )
    )
    expect(False, "a lease without high availability was accepted")
except sdk.Error as error:
    expect(error.code == 409, "409 for a lease without HA, got %s" % error.code)
    expect("high availability option is set to false" in str(error), str(error))

# A GPU worker: pinned to its host, high availability with a lease, host CPU, hugepages, no ballooning, dedicated
# CPUs, a template version by id.
vm = vms.add(
    types.Vm(
        name="gpu-worker",
        cluster=types.Cluster(name="Default"),
        template=types.Template(id=by_number[1].id),
        memory=8 << 30,
        memory_policy=types.MemoryPolicy(guaranteed=8 << 30, ballooning=False),
        high_availability=types.HighAvailability(enabled=True, priority=50),
        lease=types.StorageDomainLease(storage_domain=types.StorageDomain(id=data1.id)),
        cpu=types.Cpu(
            mode=types.CpuMode.HOST_PASSTHROUGH,
            topology=types.CpuTopology(sockets=1, cores=4, threads=1),
        ),
        custom_properties=[types.CustomProperty(name="hugepages", value="1048576")],
        placement_policy=types.VmPlacementPolicy(
            affinity=types.VmAffinity.PINNED, hosts=[types.Host(id=gpu_host.id)]
        ),
        cpu_pinning_policy=types.CpuPinningPolicy.DEDICATED,
    )
)
vm_service = vms.vm_service(vm.id)
wait("the GPU worker down", lambda: vm_service.get().status == types.VmStatus.DOWN)
vm_service.host_devices_service().add(types.HostDevice(name="pci_0000_3b_00_0"))
vm_service.mediated_devices_service().add(
    types.VmMediatedDevice(spec_params=[types.Property(name="mdevType", value="nvidia-222")])
)
vm_service.numa_nodes_service().add(
    types.VirtualNumaNode(
        index=0, memory=4096, cpu=types.Cpu(cores=[types.Core(index=0), types.Core(index=1)])
    )
)
vm_service.start()
wait("the GPU worker up", lambda: vm_service.get().status == types.VmStatus.UP)
read = vm_service.get()
expect(read.high_availability.enabled and read.high_availability.priority == 50, "high availability")
expect(read.lease.storage_domain.id == data1.id, "the lease")
expect(read.cpu.mode == types.CpuMode.HOST_PASSTHROUGH, "the CPU mode")
expect([p.value for p in read.custom_properties] == ["1048576"], "the hugepages property")
expect(read.memory_policy.ballooning is False, "ballooning off")
expect(read.placement_policy.hosts[0].id == gpu_host.id, "the dedicated host")
expect(read.cpu_pinning_policy == types.CpuPinningPolicy.DEDICATED, "the pinning policy")
expect(read.host.id == gpu_host.id, "the host it runs on")
expect(
    [d.name for d in vm_service.host_devices_service().list()] == ["pci_0000_3b_00_0"], "the VM's host devices"
)
expect(
    [p.value for m in vm_service.mediated_devices_service().list() for p in m.spec_params] == ["nvidia-222"],
    "the VM's vGPU",
)
expect(len(vm_service.numa_nodes_service().list()) == 1, "the VM's NUMA node")
held = system.hosts_service().host_service(gpu_host.id).devices_service().list()
expect(any(d.vm is not None and d.vm.id == vm.id for d in held), "the GPU held by the worker")

# High availability: a leased VM is restarted elsewhere when its host is lost.
ha_vm = vms.add(
    types.Vm(
        name="ha-worker",
        cluster=types.Cluster(name="Default"),
        template=types.Template(name="gpu-os"),
        high_availability=types.HighAvailability(enabled=True, priority=10),
        lease=types.StorageDomainLease(storage_domain=types.StorageDomain(id=data1.id)),
    )
)
expect(ha_vm.template.id == by_number[2].id, "by name the newest template version")
ha_service = vms.vm_service(ha_vm.id)
wait("the HA worker down", lambda: ha_service.get().status == types.VmStatus.DOWN)
ha_service.start()
first_host = wait("the HA worker up", lambda: ha_service.get().status == types.VmStatus.UP and ha_service.get().host)
first_name = system.hosts_service().host_service(first_host.id).get().name
control("POST", "hosts/%s/lose" % first_name)


def restarted():
    current = ha_service.get()
    return current.status == types.VmStatus.UP and current.host.id != first_host.id


wait("the HA worker restarted on another host", restarted)
connection.close()
print("SDK scenario passed")
