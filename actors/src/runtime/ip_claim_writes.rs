//! Writing IPAddressClaims (issue 25), for machines' static addresses and the control-plane endpoint alike: a claim
//! is created owned by its object (controller owner reference) with CAPOV's finalizer, and released by removing
//! that finalizer and then deleting it. The rules of when to do which are `capov_core::network::ip_claims`'s.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::json;

use crate::runtime::{finalizers, ipam};
use capov_core::network::ip_claims::{CLAIM_FINALIZER, WantedClaim};
use capov_crds::labels::{CLUSTER_NAME_LABEL, WATCH_FILTER_LABEL};

/// Who a claim is for: its owner, the CAPI cluster it belongs to, and the owner's watch-filter label (the claims
/// watch honours `--watch-filter`, so a claim without it would never be seen).
pub struct ClaimOwner {
    pub namespace: String,
    pub owner: OwnerReference,
    pub cluster: Option<String>,
    pub watch_filter: Option<String>,
}

pub fn claims_api(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::erase::<ipam::IpAddressClaim>(&());
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// Creates the claim; one that already exists counts as created (the next observation tells whose it is).
pub async fn create(client: &kube::Client, owner: &ClaimOwner, claim: &WantedClaim) -> Result<(), String> {
    let body = claim_body(owner, claim)?;
    match claims_api(client, &owner.namespace)
        .create(&PostParams::default(), &body)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(claim_error("creating", &claim.name, &err)),
    }
}

/// Removes CAPOV's finalizer from the claim, then deletes it; one already gone is released.
///
/// In that order, the claim never is deleting while it still carries CAPOV's finalizer: an IPAM provider that
/// releases the address of a deleting claim and then writes the claim's finalizer list from its cached copy
/// (cluster-api-ipam-provider-in-cluster does) would otherwise put CAPOV's finalizer back, which the apiserver
/// refuses on a deleting object, and the release would wait for the provider's retry. Should CAPOV stop between the
/// two steps, the claim is left undeleted and unprotected, and the next release deletes it.
pub async fn release(client: &kube::Client, namespace: &str, name: &str) -> Result<(), String> {
    let api = claims_api(client, namespace);
    release_one(&api, name)
        .await
        .map_err(|err| claim_error("releasing", name, &err))
}

async fn release_one(api: &Api<DynamicObject>, name: &str) -> Result<(), kube::Error> {
    let Some(claim) = api.get_opt(name).await? else {
        return Ok(());
    };
    finalizers::remove(api, &claim, CLAIM_FINALIZER).await?;
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(err),
    }
}

/// The claim as an IPAM provider expects it: the pool, the cluster (label and spec.clusterName), and its owner as
/// controller (the garbage collector's fallback should CAPOV not release it).
fn claim_body(owner: &ClaimOwner, claim: &WantedClaim) -> Result<DynamicObject, String> {
    let mut spec = json!({"poolRef": {
        "apiGroup": claim.pool.api_group,
        "kind": claim.pool.kind,
        "name": claim.pool.name,
    }});
    let mut labels = serde_json::Map::new();
    if let Some(cluster) = owner.cluster.as_ref().filter(|c| !c.is_empty()) {
        spec["clusterName"] = json!(cluster);
        labels.insert(CLUSTER_NAME_LABEL.into(), json!(cluster));
    }
    if let Some(filter) = &owner.watch_filter {
        labels.insert(WATCH_FILTER_LABEL.into(), json!(filter));
    }
    let value = json!({
        "apiVersion": format!("{}/{}", ipam::GROUP, ipam::VERSION),
        "kind": "IPAddressClaim",
        "metadata": {
            "name": claim.name,
            "namespace": owner.namespace,
            "labels": labels,
            "finalizers": [CLAIM_FINALIZER],
            "ownerReferences": [owner.owner],
        },
        "spec": spec,
    });
    serde_json::from_value(value).map_err(|err| format!("building IPAddressClaim {}: {err}", claim.name))
}

fn claim_error(what: &str, name: &str, err: &kube::Error) -> String {
    let hint = match err {
        kube::Error::Api(status) if status.code == 404 => {
            ": CAPI's IPAM API (ipam.cluster.x-k8s.io/v1beta2 IPAddressClaim) is not installed; install CAPI core \
             v1.11 or later"
        }
        kube::Error::Api(status) if status.code == 403 => {
            ": the manager may not write IPAddressClaims here; check its RBAC (the chart grants it)"
        }
        _ => "",
    };
    format!("{what} IPAddressClaim {name} failed: {err}{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use capov_crds::IpPoolRef;
    use kube::ResourceExt;

    #[test]
    fn a_claim_names_its_pool_cluster_owner_finalizer_and_watch_filter() {
        let owner = ClaimOwner {
            namespace: "team-a".into(),
            owner: OwnerReference {
                api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
                kind: "OVirtMachine".into(),
                name: "worker-0".into(),
                uid: "uid-1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
            cluster: Some("prod".into()),
            watch_filter: Some("shard-1".into()),
        };
        let claim = WantedClaim {
            name: "worker-0-0-0".into(),
            nic: 0,
            pool: IpPoolRef {
                api_group: "ipam.cluster.x-k8s.io".into(),
                kind: "InClusterIPPool".into(),
                name: "nodes".into(),
            },
        };
        let body = serde_json::to_value(claim_body(&owner, &claim).expect("body")).expect("json");
        assert_eq!(body["apiVersion"], "ipam.cluster.x-k8s.io/v1beta2");
        assert_eq!(body["metadata"]["namespace"], "team-a");
        assert_eq!(body["metadata"]["finalizers"], json!([CLAIM_FINALIZER]));
        assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(body["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(body["metadata"]["labels"][CLUSTER_NAME_LABEL], "prod");
        assert_eq!(body["metadata"]["labels"][WATCH_FILTER_LABEL], "shard-1");
        assert_eq!(body["spec"]["clusterName"], "prod");
        assert_eq!(body["spec"]["poolRef"]["name"], "nodes");
        let without = ClaimOwner {
            cluster: None,
            watch_filter: None,
            ..owner
        };
        let body = serde_json::to_value(claim_body(&without, &claim).expect("body")).expect("json");
        assert!(body["spec"].get("clusterName").is_none());
        assert_eq!(body["metadata"]["labels"], json!({}));
    }

    async fn next(seen: &mut tokio::sync::mpsc::UnboundedReceiver<DynamicObject>) -> DynamicObject {
        let version = tokio::time::timeout(std::time::Duration::from_secs(30), seen.recv()).await;
        version.ok().flatten().expect("a version of the claim")
    }

    /// Against a real apiserver with CAPI's IPAM CRDs: the claim holds an IPAM provider's finalizer too. No
    /// version of the claim is deleting while CAPOV's finalizer is on it (the provider could not write its own
    /// finalizer list then), and what is left is the deleting claim under the provider's finalizer alone.
    #[tokio::test]
    async fn a_release_lets_go_of_the_claim_before_deleting_it() {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let _ = rustls::crypto::ring::default_provider().install_default();
        let plane = capov_harness::shared().await;
        let client = plane.client().await.expect("client");
        let namespace = plane
            .create_namespace(&client, "claim-release")
            .await
            .expect("namespace");
        let api = claims_api(&client, &namespace);
        let provider_finalizer = "ipam.cluster.x-k8s.io/ReleaseAddress";
        let body: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
            "metadata": {"name": "worker-0-0-0", "finalizers": [CLAIM_FINALIZER, provider_finalizer]},
            "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "nodes"}},
        }))
        .expect("claim");
        api.create(&PostParams::default(), &body).await.expect("create");
        let config = watcher::Config::default().fields("metadata.name=worker-0-0-0");
        let (versions, mut seen) = tokio::sync::mpsc::unbounded_channel::<DynamicObject>();
        let watch = tokio::spawn(watcher(api.clone(), config).applied_objects().for_each(move |claim| {
            if let Ok(claim) = claim {
                let _ = versions.send(claim);
            }
            std::future::ready(())
        }));
        // The watch has the claim before the release starts, so it sees every write of the release.
        next(&mut seen).await;
        release(&client, &namespace, "worker-0-0-0").await.expect("release");
        loop {
            let claim = next(&mut seen).await;
            let held = claim.finalizers().iter().any(|f| f == CLAIM_FINALIZER);
            let deleting = claim.metadata.deletion_timestamp.is_some();
            assert!(
                !(held && deleting),
                "deleting while CAPOV's finalizer is on it: {:?}",
                claim.metadata
            );
            if deleting {
                break;
            }
        }
        watch.abort();
        let left = api.get("worker-0-0-0").await.expect("held by the provider's finalizer");
        assert!(left.metadata.deletion_timestamp.is_some());
        assert_eq!(left.finalizers(), [provider_finalizer.to_string()]);
        release(&client, &namespace, "gone")
            .await
            .expect("a claim already gone is released");
    }
}
