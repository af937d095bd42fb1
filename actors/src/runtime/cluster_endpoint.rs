//! An OVirtCluster's control-plane endpoint from an IPAM pool (issue 25): carries out
//! `capov_core::network::control_plane_endpoint`'s steps for `cluster.rs`: the claim created or released, the endpoint written.

use capov_crds::OVirtCluster;
use capov_crds::labels::{CLUSTER_NAME_LABEL, WATCH_FILTER_LABEL};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::runtime::ip_claim_writes::{self, ClaimOwner};
use crate::runtime::ipam;
use crate::runtime::shared::Shared;
use capov_core::conditions::{ConditionUpdate, reasons, types};
use capov_core::network::control_plane_endpoint::{self, EndpointStep};
use capov_core::network::ip_claims::{ClaimFact, WantedClaim};

/// None: no endpoint from a pool, or it is written. Else the Ready condition saying what the cluster waits for, and
/// the reconcile's outcome (an error, retried with backoff, when a write failed).
pub async fn not_ready(shared: &Shared, cluster: &OVirtCluster) -> Option<(ConditionUpdate, Result<(), String>)> {
    match reconcile(shared, cluster).await {
        Ok(None) => None,
        Ok(Some(waiting)) => Some((waiting, Ok(()))),
        Err(message) => {
            let failed = ConditionUpdate::false_(
                types::READY,
                reasons::IP_ADDRESS_CLAIM_FAILED,
                capov_crds::Severity::Warning,
                message.clone(),
            );
            Some((failed, Err(message)))
        }
    }
}

/// Ok(None): no endpoint from a pool, or it is written; Ok(Some): the Ready condition saying what the cluster
/// waits for; Err: a write failed.
async fn reconcile(shared: &Shared, cluster: &OVirtCluster) -> Result<Option<ConditionUpdate>, String> {
    let Some(from_pool) = cluster.spec.control_plane_endpoint_from_pool.as_ref() else {
        return Ok(None);
    };
    let name = cluster.name_any();
    let facts = facts(shared, cluster);
    let current = cluster.spec.control_plane_endpoint.as_ref();
    let waiting = |message: String| {
        ConditionUpdate::false_(
            types::READY,
            reasons::WAITING_FOR_CONTROL_PLANE_ENDPOINT,
            capov_crds::Severity::Info,
            message,
        )
    };
    match control_plane_endpoint::decide(&name, from_pool, current, &facts) {
        EndpointStep::Ready => Ok(None),
        EndpointStep::Write(endpoint) => {
            let patch = json!({"spec": {"controlPlaneEndpoint": {"host": endpoint.host, "port": endpoint.port}}});
            let api: Api<OVirtCluster> = Api::namespaced(shared.client.clone(), &namespace_of(cluster));
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|err| format!("writing spec.controlPlaneEndpoint {}: {err}", endpoint.host))?;
            tracing::info!(cluster = %name, host = %endpoint.host, "control-plane endpoint taken from the pool");
            Ok(None)
        }
        EndpointStep::Create(claim) => {
            create(shared, cluster, &claim).await?;
            Ok(Some(waiting(format!("creating IPAddressClaim {}", claim.name))))
        }
        EndpointStep::Release(names) => {
            release(shared, cluster, &names).await?;
            Ok(Some(waiting(format!("releasing IPAddressClaim {}", names.join(", ")))))
        }
        EndpointStep::NotReady {
            reason,
            severity,
            message,
        } => Ok(Some(ConditionUpdate::false_(types::READY, reason, severity, message))),
    }
}

/// On deletion: releases the endpoint's claim before the finalizer goes.
pub async fn release_on_deletion(shared: &Shared, cluster: &OVirtCluster) -> Result<(), String> {
    if !shared.ip_claims_known() {
        // After a restart the claims may not be listed yet: seeing none then would let the claim keep its address.
        return Err("waiting for the IPAddressClaims to be listed before the endpoint's claim is released".into());
    }
    let names = control_plane_endpoint::to_release(&facts(shared, cluster));
    release(shared, cluster, &names).await
}

async fn create(shared: &Shared, cluster: &OVirtCluster, claim: &WantedClaim) -> Result<(), String> {
    let owner = ClaimOwner {
        namespace: namespace_of(cluster),
        owner: cluster
            .controller_owner_ref(&())
            .ok_or_else(|| "the OVirtCluster has no name or UID yet".to_string())?,
        cluster: cluster.labels().get(CLUSTER_NAME_LABEL).cloned(),
        watch_filter: cluster.labels().get(WATCH_FILTER_LABEL).cloned(),
    };
    ip_claim_writes::create(&shared.client, &owner, claim).await
}

async fn release(shared: &Shared, cluster: &OVirtCluster, names: &[String]) -> Result<(), String> {
    for name in names {
        ip_claim_writes::release(&shared.client, &namespace_of(cluster), name).await?;
    }
    Ok(())
}

fn facts(shared: &Shared, cluster: &OVirtCluster) -> Vec<ClaimFact> {
    let wanted = match &cluster.spec.control_plane_endpoint_from_pool {
        Some(from_pool) => vec![WantedClaim {
            name: control_plane_endpoint::claim_name(&cluster.name_any()),
            nic: 0,
            pool: from_pool.pool.clone(),
        }],
        None => Vec::new(),
    };
    ipam::claim_facts(
        &shared.ip_claims,
        &shared.ip_addresses,
        &namespace_of(cluster),
        cluster.metadata.uid.as_deref().unwrap_or_default(),
        &wanted,
        ipam::age_now,
    )
}

fn namespace_of(cluster: &OVirtCluster) -> String {
    cluster.namespace().unwrap_or_default()
}
