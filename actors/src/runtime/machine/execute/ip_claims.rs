//! The IPAddressClaims of static addresses (issue 25): created owned by the OVirtMachine with CAPOV's finalizer,
//! released (deleted, finalizer removed) when no longer wanted or when the machine goes. The rules are
//! `crate::ip_claims`'s; this file only writes.

use capov_crds::OVirtMachine;
use capov_crds::labels::CLUSTER_NAME_LABEL;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::conditions::{reasons, types};
use crate::ip_claims::{CLAIM_FINALIZER, WantedClaim};
use crate::runtime::machine::outcome::{Executed, Failure};
use crate::runtime::machine::state::MachineState;
use crate::runtime::{finalizers, ipam};

/// Creates the claims; one that already exists is left to the next observation (its owner decides whether it is
/// this machine's). The watch of claims wakes the machine when they show up.
pub async fn create(state: &MachineState, claims: &[WantedClaim]) -> Executed {
    let api = claims_api(state);
    for claim in claims {
        let body = match claim_body(&state.object, claim) {
            Ok(body) => body,
            Err(message) => return failed(types::MACHINE_CREATED, message),
        };
        match api.create(&PostParams::default(), &body).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(err) => return failed(types::MACHINE_CREATED, claim_error("creating", &claim.name, &err)),
        }
    }
    Executed::Requeue(crate::machine_steps::Requeue::OnChange)
}

/// Deletes each claim and removes CAPOV's finalizer from it; one already gone is released.
pub async fn release(state: &MachineState, names: &[String]) -> Executed {
    let api = claims_api(state);
    let type_ = if state.object.metadata.deletion_timestamp.is_some() {
        types::MACHINE_DELETED
    } else {
        types::MACHINE_CREATED
    };
    for name in names {
        if let Err(err) = release_one(&api, name).await {
            return failed(type_, claim_error("releasing", name, &err));
        }
    }
    Executed::Continue
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

/// The claim as an IPAM provider expects it: the pool, the cluster (label and spec.clusterName), and the
/// OVirtMachine as its controlling owner (the garbage collector's fallback should CAPOV not release it).
fn claim_body(machine: &OVirtMachine, claim: &WantedClaim) -> Result<DynamicObject, String> {
    let owner = machine
        .controller_owner_ref(&())
        .ok_or_else(|| "the OVirtMachine has no name or UID yet".to_string())?;
    let cluster = machine.labels().get(CLUSTER_NAME_LABEL).cloned();
    let mut spec = json!({"poolRef": {
        "apiGroup": claim.pool.api_group,
        "kind": claim.pool.kind,
        "name": claim.pool.name,
    }});
    let mut labels = serde_json::Map::new();
    if let Some(cluster) = cluster.filter(|c| !c.is_empty()) {
        spec["clusterName"] = json!(cluster);
        labels.insert(CLUSTER_NAME_LABEL.into(), json!(cluster));
    }
    let value = json!({
        "apiVersion": format!("{}/{}", ipam::GROUP, ipam::VERSION),
        "kind": "IPAddressClaim",
        "metadata": {
            "name": claim.name,
            "namespace": machine.namespace(),
            "labels": labels,
            "finalizers": [CLAIM_FINALIZER],
            "ownerReferences": [owner],
        },
        "spec": spec,
    });
    serde_json::from_value(value).map_err(|err| format!("building IPAddressClaim {}: {err}", claim.name))
}

fn claims_api(state: &MachineState) -> Api<DynamicObject> {
    let resource = ApiResource::erase::<ipam::IpAddressClaim>(&());
    Api::namespaced_with(
        state.shared.client.clone(),
        &state.key.namespace.clone().unwrap_or_default(),
        &resource,
    )
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

fn failed(type_: &'static str, message: String) -> Executed {
    Executed::Failed {
        type_,
        failure: Failure {
            reason: reasons::IP_ADDRESS_CLAIM_FAILED,
            severity: capov_crds::Severity::Warning,
            message,
        },
    }
}
