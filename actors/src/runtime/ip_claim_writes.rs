//! Writing IPAddressClaims (issue 25), for machines' static addresses and the control-plane endpoint alike: a claim
//! is created owned by its object (controller owner reference) with CAPOV's finalizer, and released by deleting it
//! and removing that finalizer. The rules of when to do which are `crate::ip_claims`'s.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::json;

use super::{finalizers, ipam};
use crate::ip_claims::{CLAIM_FINALIZER, WantedClaim};
use capov_crds::labels::CLUSTER_NAME_LABEL;

/// Who a claim is for: its owner and the CAPI cluster it belongs to.
pub struct ClaimOwner {
    pub namespace: String,
    pub owner: OwnerReference,
    pub cluster: Option<String>,
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

/// Deletes the claim and removes CAPOV's finalizer from it; one already gone is released.
pub async fn release(client: &kube::Client, namespace: &str, name: &str) -> Result<(), String> {
    let api = claims_api(client, namespace);
    release_one(&api, name)
        .await
        .map_err(|err| claim_error("releasing", name, &err))
}

async fn release_one(api: &Api<DynamicObject>, name: &str) -> Result<(), kube::Error> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(err) => return Err(err),
    }
    let Some(claim) = api.get_opt(name).await? else {
        return Ok(());
    };
    finalizers::remove(api, &claim, CLAIM_FINALIZER).await.map(|_| ())
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
