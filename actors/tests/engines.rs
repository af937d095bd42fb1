//! One cluster across engines (issue 39): failure domains that name OVirtProviders. Three engine simulators side by
//! side, each with its own SSO, inventory and outage controls, and an OVirtProvider each; one OVirtCluster with a
//! domain per provider. Real kube-apiserver.

mod support;

use std::time::Duration;

use capov_crds::{ConditionStatus, OVirtCluster};
use capov_harness::{ProviderSpec, objects};
use capov_ovirt_sim::{Simulator, SimulatorHandle, Timings};
use capov_testkit::eventually;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::{World, condition};

const MINUTE: Duration = Duration::from_secs(60);

/// An engine besides the World's own: its simulator and the OVirtProvider pointing at it.
struct OtherEngine {
    sim: SimulatorHandle,
    provider: String,
}

async fn other_engine(world: &World, suffix: &str) -> OtherEngine {
    other_engine_with(world, suffix, capov_ovirt_sim::default_inventory()).await
}

/// Engine `suffix` whose kubeadm template is called `ubuntu-<suffix>` and has its disk on data1 and data2: the
/// names a failure domain's overrides give.
fn renamed_template(suffix: &str) -> capov_ovirt_sim::Inventory {
    let mut inventory = capov_ovirt_sim::default_inventory();
    for template in &mut inventory.templates {
        if template.name == "ubuntu-22.04" {
            template.name = format!("ubuntu-{suffix}");
            for disk in &mut template.disks {
                disk.storage_domains = vec!["data1".into(), "data2".into()];
            }
        }
    }
    inventory
}

async fn other_engine_with(world: &World, suffix: &str, inventory: capov_ovirt_sim::Inventory) -> OtherEngine {
    let sim = Simulator::builder()
        .inventory(inventory)
        .timings(Timings {
            image_locked_ms: 1500,
            boot_ms: 3000,
            ..Timings::fast()
        })
        .start()
        .await
        .expect("simulator");
    let spec = ProviderSpec {
        name: format!("{}-engine-{suffix}", world.namespace),
        ..ProviderSpec::for_simulator(&world.namespace, &sim)
    };
    spec.apply(&world.client).await.expect("provider");
    OtherEngine {
        sim,
        provider: spec.name,
    }
}

async fn set_failure_domains(world: &World, domains: Value) {
    Api::<OVirtCluster>::namespaced(world.client.clone(), &world.namespace)
        .patch(
            &world.cluster,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"failureDomains": domains}})),
        )
        .await
        .expect("patch the OVirtCluster");
}

/// A Machine in failure domain `domain` with an OVirtMachine whose spec names no provider (the domain's decides),
/// unless `provider` says one.
async fn machine_in(world: &World, name: &str, domain: &str, provider: Option<&str>) {
    let mut spec = json!({"ovirtcluster": "Default", "template": "ubuntu-22.04"});
    if let Some(provider) = provider {
        spec["provider"] = json!(provider);
    }
    let machine = objects::MachineSpec {
        name,
        labels: world.labels(),
        spec,
    };
    objects::create_machine_in_failure_domain(&world.client, &world.namespace, &world.cluster, machine, domain)
        .await
        .expect("machine");
}

/// The OVirtCluster's published domains (sorted) once `check` accepts them.
async fn published_domains(world: &World, what: &str, check: impl Fn(&[String]) -> bool) -> Vec<String> {
    let clusters = Api::<OVirtCluster>::namespaced(world.client.clone(), &world.namespace);
    eventually(MINUTE, what.to_string(), || async {
        let status = clusters.get(&world.cluster).await.ok().and_then(|c| c.status);
        let mut names: Vec<String> = status
            .iter()
            .flat_map(|s| &s.failure_domains)
            .map(|d| d.name.clone())
            .collect();
        names.sort();
        if check(&names) {
            Ok(names)
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await
}

/// The OVirtCluster's FailureDomainsPublished condition: (status, reason, message).
async fn domains_condition(world: &World) -> Option<(ConditionStatus, String, String)> {
    let cluster = Api::<OVirtCluster>::namespaced(world.client.clone(), &world.namespace)
        .get(&world.cluster)
        .await
        .ok()?;
    let status = cluster.status?;
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == "FailureDomainsPublished")?;
    Some((c.status, c.reason.to_string(), c.message.clone()))
}

/// Issue 39: machines placed in a domain get their VM on that domain's engine (the domain's provider wins over
/// spec.provider until the VM exists, and is then written into spec.provider), each VM's ownership marker names its
/// own machine. One engine's outage shows EngineUnreachable on its machines only and takes its domain out of
/// status.failureDomains; when it answers again its machine heals without a re-create and the domain comes back.
#[tokio::test]
async fn each_domain_puts_its_machines_on_its_engine_and_one_engines_outage_stays_there() {
    let mut world = World::new("engines").await;
    let b = other_engine(&world, "b").await;
    // Engine C names the template and its storage domain otherwise: the domain's overrides say so.
    let c = other_engine_with(&world, "c", renamed_template("c")).await;
    let (a_sim, a_provider) = (world.sim.control().clone(), world.provider.clone());
    set_failure_domains(
        &world,
        json!([
            {"name": "site-a", "provider": a_provider},
            {"name": "site-b", "provider": b.provider},
            {"name": "site-c", "provider": c.provider,
             "overrides": {"template": "ubuntu-c", "storagedomainname": "data2"}}
        ]),
    )
    .await;
    world.start_operator().await;
    let all = published_domains(&world, "three domains published", |names| names.len() == 3).await;
    assert_eq!(all, ["site-a", "site-b", "site-c"]);

    machine_in(&world, "m-a", "site-a", None).await;
    machine_in(&world, "m-b", "site-b", None).await;
    machine_in(&world, "m-c", "site-c", None).await;
    // The template's provider is A, the domain's B: the domain decides, since no VM exists yet.
    machine_in(&world, "m-b2", "site-b", Some(&a_provider)).await;

    let engines = [
        (a_sim.clone(), a_provider.clone()),
        (b.sim.control().clone(), b.provider.clone()),
        (c.sim.control().clone(), c.provider.clone()),
    ];
    let placed = [("m-a", 0), ("m-b", 1), ("m-c", 2), ("m-b2", 1)];
    let mut vm_ids = Vec::new();
    for (name, engine) in placed {
        let vm_id = world.vm_id(name).await;
        let machine = world.machine(name).await;
        assert_eq!(
            machine.spec.settings.provider, engines[engine].1,
            "{name}: spec.provider"
        );
        let vm = engines[engine]
            .0
            .vm(&vm_id)
            .unwrap_or_else(|| panic!("{name}: VM {vm_id} not on its domain's engine"));
        let uid = machine.metadata.uid.clone().unwrap_or_default();
        assert!(
            vm.description.contains(&format!("/{name} ")) && vm.description.contains(&uid),
            "{name}: the marker names another machine: {}",
            vm.description
        );
        for (other, (sim, _)) in engines.iter().enumerate() {
            if other != engine {
                assert!(sim.vm(&vm_id).is_none() && sim.vm_by_name(name).is_none());
            }
        }
        vm_ids.push(vm_id);
    }
    assert_eq!(
        [a_sim.vm_count(), b.sim.control().vm_count(), c.sim.control().vm_count()],
        [1, 2, 1]
    );
    // On C, from the domain's template and on its storage domain.
    let on_c = c.sim.control().vm(&vm_ids[2]).expect("m-c's VM");
    assert_eq!(
        Some(on_c.template_id.clone()),
        c.sim.control().id_of("template", "ubuntu-c")
    );
    let data2 = c.sim.control().id_of("storagedomain", "data2").expect("data2");
    assert!(
        !on_c.disks.is_empty() && on_c.disks.iter().all(|d| d.storage_domain_ids == [data2.clone()]),
        "{:?}",
        on_c.disks
    );
    for name in ["m-a", "m-b", "m-b2", "m-c"] {
        world.wait_reason(MINUTE, name, "CanConnectToOVirt", "Connected").await;
    }
    // status.capacity has each engine's oVirt cluster, from that engine's inventory, naming the domain it serves; C's
    // storage shows data2.
    let clusters = Api::<OVirtCluster>::namespaced(world.client.clone(), &world.namespace);
    let mut expected = vec![a_provider.clone(), b.provider.clone(), c.provider.clone()];
    expected.sort();
    eventually(MINUTE, "capacity of the three engines", || async {
        let capacity = clusters.get(&world.cluster).await.ok()?.status?.capacity?;
        let mut providers: Vec<String> = capacity.ovirt_clusters.iter().map(|c| c.provider.clone()).collect();
        providers.sort();
        let c_storage = capacity
            .storage_domains
            .iter()
            .any(|d| d.provider == c.provider && d.name == "data2");
        // Each engine's Default cluster serves its own domain only.
        let per_domain = capacity.ovirt_clusters.iter().all(|cluster| {
            let wanted = if cluster.provider == a_provider {
                "site-a"
            } else if cluster.provider == b.provider {
                "site-b"
            } else {
                "site-c"
            };
            cluster.failure_domains == [wanted]
        });
        (providers == expected && c_storage && per_domain).then_some(())
    })
    .await;
    let connected_since = |machine: &capov_crds::OVirtMachine| {
        condition(machine, "CanConnectToOVirt").map(|c| (c.status, c.last_transition_time.clone()))
    };
    let mut before = Vec::new();
    for name in ["m-a", "m-b", "m-b2"] {
        before.push(connected_since(&world.machine(name).await));
    }
    assert_eq!(
        domains_condition(&world).await.map(|(s, r, _)| (s, r)),
        Some((ConditionStatus::True, "AllFailureDomainsPublished".into()))
    );

    // Engine C goes down: only its machine sees it, and its domain is no longer offered to CAPI.
    c.sim.control().set_outage(true);
    world
        .wait_reason(MINUTE, "m-c", "CanConnectToOVirt", "EngineUnreachable")
        .await;
    let live = published_domains(&world, "site-c left out", |names| names.len() == 2).await;
    assert_eq!(live, ["site-a", "site-b"]);
    let (status, reason, message) = domains_condition(&world).await.expect("FailureDomainsPublished");
    assert_eq!(
        (status, reason.as_str()),
        (ConditionStatus::False, "FailureDomainsLeftOut")
    );
    assert!(
        message.contains("\"site-c\"") && message.contains(&c.provider) && message.contains("EngineUnreachable"),
        "{message}"
    );
    for (name, was) in ["m-a", "m-b", "m-b2"].iter().zip(&before) {
        assert_eq!(
            &connected_since(&world.machine(name).await),
            was,
            "{name}: its condition changed"
        );
    }

    // Engine C answers again: its machine heals on the VM it had, and the domain is offered again.
    c.sim.control().set_outage(false);
    world.wait_reason(MINUTE, "m-c", "CanConnectToOVirt", "Connected").await;
    published_domains(&world, "site-c back", |names| names.len() == 3).await;
    assert_eq!(world.vm_id("m-c").await, vm_ids[2], "m-c was re-created");
    assert_eq!(c.sim.control().vm_count(), 1);
    eventually(MINUTE, "FailureDomainsPublished True again", || async {
        let (status, reason, _) = domains_condition(&world).await?;
        (status == ConditionStatus::True && reason == "AllFailureDomainsPublished").then_some(())
    })
    .await;
    world.stop_operator().await;
    println!("VMs per engine: a 1, b 2, c 1; engine c's outage showed on m-c only and took site-c out for its length");
}

/// Issue 39: a domain whose provider refuses the cluster's namespace (its spec.allowedNamespaces) is not published,
/// and the OVirtCluster's condition says which and why; a domain of a provider that does not exist neither. A machine
/// with neither spec.provider nor a domain naming one waits with NoProvider and no VM anywhere; a template name a
/// domain's overrides give that its engine lacks is TemplateNotFound naming the domain and the provider.
#[tokio::test]
async fn a_domain_whose_provider_refuses_the_namespace_is_not_published() {
    let mut world = World::new("engines-ns").await;
    let b = other_engine(&world, "b").await;
    Api::<capov_crds::OVirtProvider>::all(world.client.clone())
        .patch(
            &b.provider,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"allowedNamespaces": {"names": ["someone-else"]}}})),
        )
        .await
        .expect("patch provider b");
    let missing = format!("{}-engine-gone", world.namespace);
    set_failure_domains(
        &world,
        json!([
            {"name": "site-a", "provider": world.provider},
            {"name": "site-b", "provider": b.provider},
            {"name": "site-x", "provider": missing},
            {"name": "site-typo", "provider": world.provider, "overrides": {"template": "ubuntu-typo"}},
            {"name": "rack", "ovirtcluster": "Default"}
        ]),
    )
    .await;
    world.start_operator().await;
    let names = published_domains(&world, "only the allowed domains", |names| {
        names.len() == 3 && names.iter().any(|n| n == "site-a")
    })
    .await;
    assert_eq!(names, ["rack", "site-a", "site-typo"]);
    let (status, _, message) = eventually(MINUTE, "FailureDomainsLeftOut", || async {
        domains_condition(&world)
            .await
            .filter(|(_, reason, _)| reason == "FailureDomainsLeftOut")
    })
    .await;
    assert_eq!(status, ConditionStatus::False);
    for part in [
        "\"site-b\"",
        &b.provider,
        "does not allow namespace",
        &world.namespace,
        "\"site-x\"",
        "not found",
    ] {
        assert!(message.contains(part), "{part:?} not in: {message}");
    }

    // No provider anywhere: the machine says where to set one, and no engine gets a VM.
    machine_in(&world, "nowhere", "rack", None).await;
    let machine = world
        .wait_reason(MINUTE, "nowhere", "CanConnectToOVirt", "NoProvider")
        .await;
    let connect = condition(&machine, "CanConnectToOVirt").expect("condition");
    assert!(connect.message.contains("set spec.provider"), "{}", connect.message);
    // A Machine placed in the refused domain all the same (the domain is tenant-written): the provider still refuses
    // the namespace, and engine B gets nothing.
    machine_in(&world, "refused", "site-b", None).await;
    let machine = world
        .wait_reason(MINUTE, "refused", "CanConnectToOVirt", "NamespaceNotAllowed")
        .await;
    assert_eq!(machine.spec.settings.provider, b.provider);

    machine_in(&world, "typo", "site-typo", None).await;
    let machine = world
        .wait_reason(MINUTE, "typo", "MachineCreated", "TemplateNotFound")
        .await;
    let created = condition(&machine, "MachineCreated").expect("condition");
    for part in [
        "\"ubuntu-typo\"",
        "overrides.template",
        "\"site-typo\"",
        &world.provider,
    ] {
        assert!(created.message.contains(part), "{part:?} not in: {}", created.message);
    }
    assert_eq!(world.sim.control().vm_count() + b.sim.control().vm_count(), 0);
    world.stop_operator().await;
}
