//! The several-tenants form (`--tenants K`): K CAPI Clusters share one OVirtProvider (one engine rate limit). The
//! first tenant scales to `--machines` workers at once; `--tenant-delay-seconds` later every other tenant creates one
//! control-plane machine. Each control-plane machine's time until its VM runs is compared with the time the same
//! machine takes in the idle operator, measured first: the ratio is what one tenant's batch costs the others (issue
//! #24: at most 1.5 × idle + 10 s). Requests and rate are the operator's defaults unless `--manager-arg` says
//! otherwise.

use std::time::{Duration, Instant};

use capov_harness::{ControlPlane, Options, objects};
use capov_ovirt_sim::{Control, Simulator, SimulatorHandle};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::{Args, Error, Manager, NAMESPACE, PARALLEL, PROVIDER, say, start_manager};

/// The busy tenant, and the prefix of the others.
const BUSY: &str = "tenant-1";

fn tenant(index: usize) -> String {
    format!("tenant-{}", index + 1)
}

/// Runs the form and prints its report; true when every control-plane machine ran within the bound.
pub async fn run(args: &Args, timings: capov_ovirt_sim::Timings) -> Result<bool, Error> {
    let tenants = args.tenants.max(2);
    say(&format!(
        "{tenants} tenants on one provider: {BUSY} scales to {} workers, the others each create a control-plane \
         machine {} s later",
        args.machines, args.tenant_delay_seconds
    ));
    let plane = ControlPlane::start(Options {
        controller_manager: false,
        crds: true,
        capi_crds: true,
        capi_manager: false,
    })
    .await?;
    let workload = ControlPlane::start(Options::default()).await?;
    let client = plane.client().await?;
    let sim = Simulator::builder().timings(timings).start().await?;
    let control = sim.control().clone();
    prepare(&client, &sim, &workload.kubeconfig_yaml()?, tenants).await?;

    let log_path = std::env::temp_dir().join("capov-bench-manager-tenants.log");
    let _manager = Manager(start_manager(args, plane.kubeconfig_path(), &log_path, None)?);
    say(&format!("operator started (log {})", log_path.display()));
    let timeout = Duration::from_secs(args.timeout);

    let idle = runs_after(&client, &control, &tenant(1), "idle-cp", timeout).await?;
    say(&format!(
        "idle: the control-plane machine ran after {:.1} s",
        idle.as_secs_f64()
    ));

    let batch_started = Instant::now();
    let batch = create_workers(&client, args.machines);
    let others = async {
        tokio::time::sleep(Duration::from_secs(args.tenant_delay_seconds)).await;
        let runs = (1..tenants).map(|index| {
            let (client, control) = (&client, &control);
            async move {
                let time = runs_after(client, control, &tenant(index), "cp", timeout).await?;
                let up = busy_vms_up(control);
                Ok::<_, Error>((tenant(index), time, up))
            }
        });
        futures::future::try_join_all(runs).await
    };
    let (created, busy) = tokio::join!(batch, others);
    created?;
    let busy = busy?;
    Ok(report(args, idle, &busy, batch_started.elapsed()))
}

/// The namespace, the provider and its credentials, and one CAPI Cluster per tenant (all with the workload
/// cluster's kubeconfig).
async fn prepare(client: &kube::Client, sim: &SimulatorHandle, kubeconfig: &str, tenants: usize) -> Result<(), Error> {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await?;
    objects::apply_secret(
        client,
        NAMESPACE,
        "engine-credentials",
        &[("username", "admin@internal"), ("password", "admin")],
    )
    .await?;
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(sim.ca_pem().unwrap_or_default());
    let spec = json!({"engine": sim.api_url(), "credentialsSecretName": "engine-credentials", "tls": {"certs": ca}});
    objects::apply_provider(client, PROVIDER, json!({}), spec).await?;
    for index in 0..tenants {
        let name = tenant(index);
        let labels = json!({"cluster.x-k8s.io/cluster-name": name});
        objects::create_workload_cluster(client, NAMESPACE, &name, labels, kubeconfig).await?;
    }
    Ok(())
}

fn machine_spec() -> serde_json::Value {
    json!({"provider": PROVIDER, "ovirtcluster": "Default", "template": "ubuntu-22.04",
           "cpu": {"sockets": 1, "cores": 2, "threads": 1}, "memory": {"sizemb": 4096}})
}

/// The busy tenant's batch, created as a MachineDeployment scaled to `count` at once would be.
async fn create_workers(client: &kube::Client, count: usize) -> Result<(), Error> {
    futures::stream::iter(0..count)
        .map(|index| async move {
            let labels = json!({"cluster.x-k8s.io/cluster-name": BUSY});
            let name = format!("{BUSY}-worker-{index}");
            objects::create_machine(client, NAMESPACE, BUSY, &name, labels, machine_spec()).await
        })
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Creates a control-plane machine of `cluster` and returns how long until its VM is up in the engine.
async fn runs_after(
    client: &kube::Client,
    control: &Control,
    cluster: &str,
    suffix: &str,
    timeout: Duration,
) -> Result<Duration, Error> {
    let started = Instant::now();
    let name = format!("{cluster}-{suffix}");
    let labels = json!({"cluster.x-k8s.io/cluster-name": cluster, "cluster.x-k8s.io/control-plane": ""});
    objects::create_machine(client, NAMESPACE, cluster, &name, labels, machine_spec()).await?;
    loop {
        if control.vms().iter().any(|vm| vm.name == name && vm.status == "up") {
            return Ok(started.elapsed());
        }
        if started.elapsed() > timeout {
            return Err(format!("{name}: no VM up after {} s", timeout.as_secs()).into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn busy_vms_up(control: &Control) -> usize {
    control
        .vms()
        .iter()
        .filter(|vm| vm.name.starts_with(BUSY) && vm.status == "up")
        .count()
}

/// Prints the figures; true when every tenant's control plane ran within 1.5 × idle + 10 s.
fn report(args: &Args, idle: Duration, busy: &[(String, Duration, usize)], elapsed: Duration) -> bool {
    let bound = idle.mul_f64(1.5) + Duration::from_secs(10);
    println!();
    println!(
        "## {} tenants on one provider; {BUSY} scales to {} workers; manager flags: {}",
        busy.len() + 1,
        args.machines,
        if args.manager_args.is_empty() {
            "(defaults)".to_string()
        } else {
            args.manager_args.join(" ")
        }
    );
    println!();
    println!("| tenant | control plane ran after | × idle | within 1.5 × idle + 10 s | {BUSY} VMs up then |");
    println!("|---|---|---|---|---|");
    println!("| idle operator | {:.1} s | 1.00 | – | – |", idle.as_secs_f64());
    let mut within = true;
    for (tenant, time, up) in busy {
        let ok = *time <= bound;
        within &= ok;
        println!(
            "| {tenant} | {:.1} s | {:.2} | {} (bound {:.1} s) | {up} of {} |",
            time.as_secs_f64(),
            time.as_secs_f64() / idle.as_secs_f64(),
            if ok { "yes" } else { "no" },
            bound.as_secs_f64(),
            args.machines,
        );
    }
    println!();
    println!("(measured {:.0} s after the batch began)", elapsed.as_secs_f64());
    within
}
