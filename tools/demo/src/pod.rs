//! The operator as users run it: a real node (containerd, kubelet, kube-proxy from `tools/node/up.sh`) joined to
//! the demo's control plane, the image imported into it (nothing is pulled), and `chart/capov-crds` and
//! `chart/capov` installed by Helm. The operator pod then reaches the apiserver through the `kubernetes` Service
//! under the chart's ServiceAccount, like in a user's cluster.

use std::time::{Duration, Instant};

use capov_harness::{ControlPlane, Node, objects};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use crate::{Error, say};

/// Where the chart installs the operator.
pub const NAMESPACE: &str = "capov-system";
/// How long the operator pod may take to become Ready after `helm install`.
const POD_READY_TIMEOUT: Duration = Duration::from_secs(300);

/// Starts the node, imports `image` and installs both charts with it; returns the node (dropping it stops the node
/// and its pods) once the operator pod is Ready.
pub async fn install(plane: &ControlPlane, image: &str) -> Result<Node, Error> {
    say("starting a node (containerd, kubelet, kube-proxy; tools/node/up.sh)");
    let node = Node::start(plane, "capov-demo-node").await?;
    say(&format!("importing the image {image} into the node"));
    node.import_image(image)?;
    let (repository, tag) = image
        .rsplit_once(':')
        .ok_or_else(|| format!("image {image} has no tag"))?;
    say("helm install capov-crds chart/capov-crds");
    helm(plane, &["install", "capov-crds", "chart/capov-crds"])?;
    say(&format!(
        "helm install capov chart/capov --namespace {NAMESPACE} (image {image}, pullPolicy Never)"
    ));
    // `Never`: the pod runs the imported image only; no registry is asked.
    let values = format!("manager.image={repository},manager.tag={tag},manager.pullPolicy=Never");
    helm(
        plane,
        &[
            "install",
            "capov",
            "chart/capov",
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--set",
            &values,
            // The demo's workload cluster runs on this node, which the operator refuses otherwise.
            "--set",
            "extraArgs={--allow-internal-workload-servers}",
        ],
    )?;
    let pod = wait_for_ready_pod(plane, &node).await?;
    say(&format!("operator pod {NAMESPACE}/{pod} is Ready"));
    Ok(node)
}

async fn wait_for_ready_pod(plane: &ControlPlane, node: &Node) -> Result<String, Error> {
    let pods: Api<Pod> = Api::namespaced(plane.client().await?, NAMESPACE);
    let selector = ListParams::default().labels("control-plane=controller-manager");
    let deadline = Instant::now() + POD_READY_TIMEOUT;
    loop {
        let list = pods.list(&selector).await?;
        if let Some(name) = list
            .items
            .iter()
            .find(|pod| objects::pod_ready(pod))
            .and_then(|pod| pod.metadata.name.clone())
        {
            return Ok(name);
        }
        if Instant::now() > deadline {
            let phases: Vec<String> = list
                .items
                .iter()
                .map(|pod| {
                    format!(
                        "{:?}: {:?}",
                        pod.metadata.name,
                        pod.status.as_ref().and_then(|s| s.phase.clone())
                    )
                })
                .collect();
            return Err(format!(
                "the operator pod was not Ready within {}s of helm install ({phases:?}); kubelet's log:\n{}",
                POD_READY_TIMEOUT.as_secs(),
                node.log_tail("kubelet")
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Helm against `plane` (its binary from `CAPOV_HELM_DIR`, which tools/demo.sh sets).
fn helm(plane: &ControlPlane, args: &[&str]) -> Result<(), Error> {
    let output = plane.helm()?.args(args).output()?;
    if !output.status.success() {
        return Err(format!(
            "helm {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(())
}
