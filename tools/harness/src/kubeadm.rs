//! The parts of the kubeadm bootstrap and control-plane providers that CAPI core waits on, played where only CAPI
//! core runs (no kubeadm binaries boot in the engine simulator's VMs). A second harness apiserver is the workload
//! cluster's control plane; this task reports it through the KubeadmControlPlane's status, and hands every
//! KubeadmConfig a bootstrap data Secret as CABPK would once it had rendered it.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::{HarnessError, objects};

/// What every played KubeadmConfig's data Secret holds: a cloud-config, as the ClusterClass's templates ask for.
const BOOTSTRAP_DATA: &str = "#cloud-config\nhostname: worker\n";

fn kubeadm_control_planes() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("controlplane.cluster.x-k8s.io", "v1beta2", "KubeadmControlPlane"),
        "kubeadmcontrolplanes",
    )
}

fn kubeadm_configs() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bootstrap.cluster.x-k8s.io", "v1beta2", "KubeadmConfig"),
        "kubeadmconfigs",
    )
}

/// Until aborted, every 300 ms: each KubeadmControlPlane in `namespace` reports its spec's version and replicas as
/// initialized and available, and each KubeadmConfig without data gets its Secret (owned by the config, so it goes
/// with it) and reports it. Failed requests are retried on the next round.
pub fn play_kubeadm(client: kube::Client, namespace: String) -> JoinHandle<()> {
    tokio::spawn(async move {
        let control_planes: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &namespace, &kubeadm_control_planes());
        let configs: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &kubeadm_configs());
        loop {
            if let Ok(list) = control_planes.list(&ListParams::default()).await {
                for control_plane in list.items {
                    let _ = report_control_plane(&control_planes, &control_plane).await;
                }
            }
            if let Ok(list) = configs.list(&ListParams::default()).await {
                for config in list.items {
                    let _ = hand_out_bootstrap_data(&client, &namespace, &configs, &config).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}

/// The status of a control plane that runs `spec.version` on `spec.replicas` machines, all up to date.
fn control_plane_status(control_plane: &DynamicObject) -> Option<Value> {
    let version = control_plane.data["spec"]["version"].as_str()?;
    let replicas = control_plane.data["spec"]["replicas"].as_i64().unwrap_or(1);
    Some(json!({
        "version": version,
        "initialization": {"controlPlaneInitialized": true},
        "replicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "upToDateReplicas": replicas
    }))
}

async fn report_control_plane(api: &Api<DynamicObject>, control_plane: &DynamicObject) -> Result<(), kube::Error> {
    let Some(status) = control_plane_status(control_plane) else {
        return Ok(());
    };
    let reported = status
        .as_object()
        .into_iter()
        .flatten()
        .all(|(field, value)| control_plane.data["status"][field] == *value);
    if reported || control_plane.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let name = control_plane.metadata.name.as_deref().unwrap_or_default();
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({"status": status})))
        .await
        .map(drop)
}

async fn hand_out_bootstrap_data(
    client: &kube::Client,
    namespace: &str,
    api: &Api<DynamicObject>,
    config: &DynamicObject,
) -> Result<(), HarnessError> {
    if config.data["status"]["dataSecretName"].is_string() || config.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let (Some(name), Some(uid)) = (config.metadata.name.as_deref(), config.metadata.uid.as_deref()) else {
        return Ok(());
    };
    // The cluster's label, as CABPK sets it on the Secret (the config carries it from its Machine).
    let labels: serde_json::Map<String, Value> = config
        .labels()
        .get("cluster.x-k8s.io/cluster-name")
        .map(|cluster| ("cluster.x-k8s.io/cluster-name".to_string(), json!(cluster)))
        .into_iter()
        .collect();
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": name,
            "labels": labels,
            "ownerReferences": [{"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
                                 "name": name, "uid": uid, "controller": true}]
        },
        "type": "cluster.x-k8s.io/secret",
        "stringData": {"value": BOOTSTRAP_DATA, "format": "cloud-config"}
    });
    objects::apply(client, &objects::secrets(), Some(namespace), secret).await?;
    let status = json!({"status": {"dataSecretName": name, "initialization": {"dataSecretCreated": true}}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map(drop)
        .map_err(|err| HarnessError::Kube(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control_plane(spec: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
            "metadata": {"name": "cp"}, "spec": spec
        }))
        .expect("object")
    }

    #[test]
    fn a_control_plane_reports_its_spec_version_and_replicas_as_available() {
        let status = control_plane_status(&control_plane(json!({"version": "v1.34.0", "replicas": 3})));
        let status = status.expect("a status");
        assert_eq!(status["version"], "v1.34.0");
        assert_eq!(status["initialization"]["controlPlaneInitialized"], true);
        for field in ["replicas", "readyReplicas", "availableReplicas", "upToDateReplicas"] {
            assert_eq!(status[field], 3, "{field}");
        }
    }

    #[test]
    fn a_control_plane_without_a_version_yet_reports_nothing() {
        assert!(control_plane_status(&control_plane(json!({"replicas": 1}))).is_none());
    }
}
