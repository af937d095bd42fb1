//! The VM's NICs against spec.nics, looked at right before the first start (SPEC §2 step 5).

use capov_ovirt::Client;

use super::observation::{Engine, ObserveError};
use crate::runtime::machine::state::MachineState;
use crate::runtime::provider::lookups::key;
use capov_core::machine_steps::Observed;
use capov_core::network::nics::{CurrentNic, NicAssessment, VnicProfileFact, assess_nics};

/// Step 5 compares the NICs only right before the first start, and looking them up costs up to four engine requests:
/// a decision to start the VM asks for them (`ReadRequest::Nics`), only when spec.nics names some.
pub async fn read_nics(
    state: &MachineState,
    engine: &Engine,
    observed: &Observed,
    vm_id: &str,
) -> Result<NicAssessment, ObserveError> {
    nic_assessment(state, &engine.client, observed, vm_id).await
}

/// The VM's NICs against spec.nics, with the vNIC profiles of the networks of the oVirt cluster's data center
/// (`/vnicprofiles` has no search, so all are read and matched by network). Only the VM's own NICs are read afresh;
/// cluster, networks and profiles come from the lookups.
async fn nic_assessment(
    state: &MachineState,
    client: &Client,
    observed: &Observed,
    vm_id: &str,
) -> Result<NicAssessment, ObserveError> {
    let engine_error = |err: capov_ovirt::Error| ObserveError::new(format!("reading NICs and vNIC profiles: {err}"));
    let (lookups, provider) = (&state.shared.lookups, observed.settings.provider.as_str());
    let cluster_name = observed.failure_domain.ovirt_cluster(&observed.settings.ovirtcluster);
    let cluster = lookups
        .get(key(provider, &format!("cluster/{cluster_name}")), || {
            client.find_cluster_by_name(cluster_name)
        })
        .await
        .map_err(engine_error)?;
    let data_center = cluster
        .and_then(|c| c.data_center)
        .and_then(|dc| dc.id)
        .unwrap_or_default();
    let networks: Vec<_> = lookups
        .get(key(provider, "networks"), || client.networks())
        .await
        .map_err(engine_error)?
        .into_iter()
        .filter(|n| n.data_center.as_ref().and_then(|dc| dc.id.as_deref()) == Some(data_center.as_str()))
        .collect();
    let profiles: Vec<VnicProfileFact> = lookups
        .get(key(provider, "vnicprofiles"), || client.vnic_profiles())
        .await
        .map_err(engine_error)?
        .into_iter()
        .filter_map(|p| {
            let network_id = p.network.as_ref()?.id.clone()?;
            let network = networks.iter().find(|n| n.id.as_deref() == Some(network_id.as_str()))?;
            Some(VnicProfileFact {
                id: p.id?,
                name: p.name?,
                network_name: network.name.clone().unwrap_or_default(),
            })
        })
        .collect();
    // What this pass observed inlined the NICs (`follow=nics`) unless an engine did not.
    let held = state
        .vm_snapshot
        .as_ref()
        .filter(|s| s.id == vm_id)
        .and_then(|s| s.nics.as_ref());
    let current: Vec<CurrentNic> = match held {
        Some(nics) => nics
            .iter()
            .map(|n| CurrentNic {
                id: n.id.clone(),
                name: n.name.clone(),
                vnic_profile_id: n.vnic_profile_id.clone(),
            })
            .collect(),
        None => client
            .nics(vm_id)
            .await
            .map_err(engine_error)?
            .into_iter()
            .map(|n| CurrentNic {
                id: n.id.unwrap_or_default(),
                name: n.name.unwrap_or_default(),
                vnic_profile_id: n.vnic_profile.and_then(|p| p.id),
            })
            .collect(),
    };
    Ok(assess_nics(&observed.settings.nics, &current, &profiles))
}
