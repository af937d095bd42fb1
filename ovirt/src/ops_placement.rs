//! Typed engine operations on where VMs run: hosts, affinity groups (`/clusters/{id}/affinitygroups`) and affinity
//! labels. Paths follow the engine's REST API v4.

use reqwest::Method;

use crate::client::{Call, Client};
use crate::error::Result;
use crate::model::*;

impl Client {
    // ---- hosts ----

    /// Every host the caller may see, with its status, memory, CPU topology and cluster: one request for the whole
    /// engine (the provider's inventory poll).
    pub async fn hosts(&self) -> Result<Vec<Host>> {
        Ok(self
            .fetch::<Hosts>(Call::new(Method::GET, "hosts", &["hosts"]))
            .await?
            .items)
    }

    // ---- affinity groups ----

    /// The affinity groups of a cluster, each with its VMs, hosts and labels inlined.
    pub async fn affinity_groups(&self, cluster_id: &str) -> Result<Vec<AffinityGroup>> {
        let call = Call::new(
            Method::GET,
            "affinitygroups",
            &["clusters", cluster_id, "affinitygroups"],
        );
        Ok(self.fetch::<AffinityGroups>(call).await?.items)
    }

    /// Creates an affinity group in a cluster; the answer carries its id. A name taken anywhere in the engine is a
    /// [`crate::Error::BadRequest`] ([`crate::Error::is_affinity_group_name_taken`]).
    pub async fn add_affinity_group(&self, cluster_id: &str, group: &AffinityGroup) -> Result<AffinityGroup> {
        let call = Call::new(
            Method::POST,
            "affinitygroups",
            &["clusters", cluster_id, "affinitygroups"],
        )
        .xml_body(group)?;
        self.fetch(call).await
    }

    pub async fn remove_affinity_group(&self, cluster_id: &str, group_id: &str) -> Result<()> {
        self.perform(Call::new(
            Method::DELETE,
            "affinitygroups",
            &["clusters", cluster_id, "affinitygroups", group_id],
        ))
        .await
    }

    /// Adds a VM to an affinity group; a VM that is a member already is a [`crate::Error::BadRequest`]
    /// ([`crate::Error::is_already_a_member`]).
    pub async fn add_affinity_group_vm(&self, cluster_id: &str, group_id: &str, vm_id: &str) -> Result<()> {
        let body = Vm {
            id: Some(vm_id.to_string()),
            ..Vm::default()
        };
        let call = Call::new(
            Method::POST,
            "affinitygroups",
            &["clusters", cluster_id, "affinitygroups", group_id, "vms"],
        )
        .xml_body(&body)?;
        self.perform(call).await
    }

    /// Takes a VM out of an affinity group; the group stays, even empty.
    pub async fn remove_affinity_group_vm(&self, cluster_id: &str, group_id: &str, vm_id: &str) -> Result<()> {
        self.perform(Call::new(
            Method::DELETE,
            "affinitygroups",
            &["clusters", cluster_id, "affinitygroups", group_id, "vms", vm_id],
        ))
        .await
    }

    // ---- affinity labels ----

    /// Every affinity label (the engine offers no search on them).
    pub async fn affinity_labels(&self) -> Result<Vec<AffinityLabel>> {
        Ok(self
            .fetch::<AffinityLabels>(Call::new(Method::GET, "affinitylabels", &["affinitylabels"]))
            .await?
            .items)
    }
}
