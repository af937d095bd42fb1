//! Affinity groups (`/clusters/{id}/affinitygroups`) with the validation of `AddAffinityGroupCommand`,
//! `AddVmToAffinityGroupCommand`, `RemoveVmFromAffinityGroupCommand` and `RemoveAffinityGroupCommand`, and their
//! texts (`AppErrors.properties`, `${type}` = Affinity Group). Their rules are enforced when VMs are placed
//! (`engine::scheduling`).

use capov_ovirt::model;

use super::*;
use crate::ids::new_id;
use crate::state::*;

/// `BusinessEntitiesDefinitions.GENERAL_NAME_SIZE` and `GENERAL_MAX_SIZE`.
const NAME_LIMIT: usize = 255;
const DESCRIPTION_LIMIT: usize = 4000;

/// `POST /clusters/{id}/affinitygroups`: the new group's id.
pub fn add_affinity_group(state: &mut State, cluster_id: &str, request: &model::AffinityGroup) -> EngineResult<String> {
    if !state.clusters.contains_key(cluster_id) {
        return Err(EngineError::NotFound);
    }
    let name = request.name.clone().unwrap_or_default();
    // Bean validation of the entity (`@Size`, `@ValidI18NName`) comes before the command's own checks.
    if name.is_empty() || java_length(&name) > NAME_LIMIT {
        return Err(add_failed("Name field input is too long."));
    }
    if !valid_i18n_name(&name) {
        return Err(add_failed("Name field is invalid."));
    }
    let description = request.description.clone().unwrap_or_default();
    if java_length(&description) > DESCRIPTION_LIMIT {
        return Err(add_failed("Description field is invalid."));
    }
    // Names are unique in the whole engine (`affinityGroupDao.getByName`), not per cluster.
    if state.affinity_groups.values().any(|g| g.name == name) {
        return Err(add_failed("Affinity Group name already exists."));
    }
    let vm_ids = refs(request.vms.as_ref().map(|v| v.items.as_slice()));
    check_vms(state, cluster_id, &vm_ids).map_err(|problem| add_failed(&problem))?;
    let host_label_ids = refs(request.host_labels.as_ref().map(|l| l.items.as_slice()));
    if host_label_ids.iter().any(|id| !state.affinity_labels.contains_key(id)) {
        return Err(add_failed("Provided label is invalid (does not exist)."));
    }
    let id = new_id();
    state.affinity_groups.insert(
        id.clone(),
        AffinityGroupRecord {
            id: id.clone(),
            name,
            description,
            cluster_id: cluster_id.to_string(),
            vms_rule: vms_rule(request),
            hosts_rule: rule(request.hosts_rule.as_ref(), None, None),
            priority: request.priority.unwrap_or(1.0),
            vm_ids,
            host_ids: refs(request.hosts.as_ref().map(|h| h.items.as_slice())),
            vm_label_ids: refs(request.vm_labels.as_ref().map(|l| l.items.as_slice())),
            host_label_ids,
        },
    );
    Ok(id)
}

/// `DELETE /clusters/{id}/affinitygroups/{group}`; the members stay as they are.
pub fn remove_affinity_group(state: &mut State, cluster_id: &str, group_id: &str) -> EngineResult<()> {
    match state.affinity_groups.get(group_id) {
        Some(group) if group.cluster_id == cluster_id => {
            state.affinity_groups.remove(group_id);
            Ok(())
        }
        _ => Err(EngineError::NotFound),
    }
}

/// `POST /clusters/{id}/affinitygroups/{group}/vms`.
pub fn add_affinity_group_vm(state: &mut State, cluster_id: &str, group_id: &str, vm_id: &str) -> EngineResult<()> {
    let group = group_in(state, cluster_id, group_id)?;
    if !state.vms.contains_key(vm_id) {
        return Err(operation_failed(400, "The selected VM does not exist."));
    }
    if group.vm_ids.iter().any(|member| member == vm_id) {
        return Err(edit_failed("Duplicate VM."));
    }
    if let Some(group) = state.affinity_groups.get_mut(group_id) {
        group.vm_ids.push(vm_id.to_string());
    }
    Ok(())
}

/// `DELETE /clusters/{id}/affinitygroups/{group}/vms/{vm}`.
pub fn remove_affinity_group_vm(state: &mut State, cluster_id: &str, group_id: &str, vm_id: &str) -> EngineResult<()> {
    let group = group_in(state, cluster_id, group_id)?;
    if !state.vms.contains_key(vm_id) {
        return Err(operation_failed(400, "The selected VM does not exist."));
    }
    if !group.vm_ids.iter().any(|member| member == vm_id) {
        return Err(edit_failed("Provided VM is invalid (does not exist)."));
    }
    if let Some(group) = state.affinity_groups.get_mut(group_id) {
        group.vm_ids.retain(|member| member != vm_id);
    }
    Ok(())
}

fn group_in<'a>(state: &'a State, cluster_id: &str, group_id: &str) -> EngineResult<&'a AffinityGroupRecord> {
    state
        .affinity_groups
        .get(group_id)
        .filter(|g| g.cluster_id == cluster_id)
        .ok_or(EngineError::NotFound)
}

/// `AffinityGroupCRUDCommand.validateVms`: each VM exists, lives in the group's cluster, and is named once.
fn check_vms(state: &State, cluster_id: &str, vm_ids: &[String]) -> Result<(), String> {
    for (n, vm_id) in vm_ids.iter().enumerate() {
        let Some(vm) = state.vms.get(vm_id) else {
            return Err("Provided VM is invalid (does not exist).".into());
        };
        if vm.cluster_id != cluster_id {
            return Err("Provided VM resides in another Cluster.".into());
        }
        if vm_ids[..n].contains(vm_id) {
            return Err("Duplicate VM.".into());
        }
    }
    Ok(())
}

/// The VM-to-VM rule as `AffinityGroupMapper` reads it: `vms_rule`, else the deprecated `positive`/`enforcing`.
fn vms_rule(request: &model::AffinityGroup) -> Rule {
    match &request.vms_rule {
        Some(vms_rule) => rule(Some(vms_rule), None, None),
        None => rule(None, request.positive, request.enforcing),
    }
}

/// A rule is disabled unless it says positive or negative; `enabled: false` disables it whatever else it says.
fn rule(given: Option<&model::AffinityRule>, positive: Option<bool>, enforcing: Option<bool>) -> Rule {
    let positive = given.and_then(|r| r.positive).or(positive);
    let enabled = given.and_then(|r| r.enabled) != Some(false) && positive.is_some();
    Rule {
        enabled,
        positive: positive.unwrap_or(false),
        enforcing: given.and_then(|r| r.enforcing).or(enforcing).unwrap_or(false),
    }
}

fn refs(items: Option<&[model::Ref]>) -> Vec<String> {
    items.unwrap_or_default().iter().filter_map(|r| r.id.clone()).collect()
}

fn add_failed(what: &str) -> EngineError {
    operation_failed(400, &format!("Cannot add Affinity Group. {what}"))
}

fn edit_failed(what: &str) -> EngineError {
    operation_failed(400, &format!("Cannot edit Affinity Group. {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::{default_inventory, seed};

    fn engine_with_vm() -> (State, String, String) {
        let mut state = State::default();
        let mut inventory = default_inventory();
        inventory.vms = vec![crate::inventory::VmSeed {
            name: "worker".into(),
            ..Default::default()
        }];
        seed(&mut state, &inventory).unwrap();
        let cluster = state.clusters.keys().next().unwrap().clone();
        let vm = state.vms.keys().next().unwrap().clone();
        (state, cluster, vm)
    }

    fn negative(name: &str) -> model::AffinityGroup {
        model::AffinityGroup {
            name: Some(name.into()),
            vms_rule: Some(model::AffinityRule {
                enabled: Some(true),
                positive: Some(false),
                enforcing: Some(true),
            }),
            ..model::AffinityGroup::default()
        }
    }

    #[test]
    fn names_are_unique_in_the_engine_and_members_join_once() {
        let (mut state, cluster, vm) = engine_with_vm();
        let id = add_affinity_group(&mut state, &cluster, &negative("apart")).unwrap();
        assert_eq!(
            state.affinity_groups[&id].vms_rule,
            Rule {
                enabled: true,
                positive: false,
                enforcing: true
            }
        );
        assert_eq!(
            add_affinity_group(&mut state, &cluster, &negative("apart")),
            Err(operation_failed(
                400,
                "Cannot add Affinity Group. Affinity Group name already exists."
            ))
        );
        assert_eq!(
            add_affinity_group(&mut state, &cluster, &negative("a/b")),
            Err(operation_failed(
                400,
                "Cannot add Affinity Group. Name field is invalid."
            ))
        );
        add_affinity_group_vm(&mut state, &cluster, &id, &vm).unwrap();
        assert_eq!(
            add_affinity_group_vm(&mut state, &cluster, &id, &vm),
            Err(operation_failed(400, "Cannot edit Affinity Group. Duplicate VM."))
        );
        remove_affinity_group_vm(&mut state, &cluster, &id, &vm).unwrap();
        assert!(state.affinity_groups[&id].vm_ids.is_empty());
        assert_eq!(
            remove_affinity_group(&mut state, "other-cluster", &id),
            Err(EngineError::NotFound)
        );
        remove_affinity_group(&mut state, &cluster, &id).unwrap();
        assert!(state.affinity_groups.is_empty());
    }

    /// `@Size(max = 255)` counts UTF-16 units and `@ValidI18NName` takes letters, ASCII digits, '.', '_' and '-'.
    #[test]
    fn names_are_held_to_the_engines_length_and_characters() {
        let (mut state, cluster, _) = engine_with_vm();
        let invalid = Err(operation_failed(
            400,
            "Cannot add Affinity Group. Name field is invalid.",
        ));
        let too_long = Err(operation_failed(
            400,
            "Cannot add Affinity Group. Name field input is too long.",
        ));
        // 128 characters, 256 UTF-16 units.
        assert_eq!(
            add_affinity_group(&mut state, &cluster, &negative(&"𝐀".repeat(128))),
            too_long
        );
        assert_eq!(
            add_affinity_group(&mut state, &cluster, &negative(&"a".repeat(256))),
            too_long
        );
        for name in ["rack 1", "٣", "Ⅻ", "a:b", "a+b"] {
            assert_eq!(
                add_affinity_group(&mut state, &cluster, &negative(name)),
                invalid,
                "{name}"
            );
        }
        for name in ["capov.team-a.prod.control-plane.Default", "Clüster_1", &"a".repeat(255)] {
            assert!(
                add_affinity_group(&mut state, &cluster, &negative(name)).is_ok(),
                "{name}"
            );
        }
    }

    #[test]
    fn a_removed_vm_leaves_its_groups() {
        let (mut state, cluster, vm) = engine_with_vm();
        let id = add_affinity_group(&mut state, &cluster, &negative("apart")).unwrap();
        add_affinity_group_vm(&mut state, &cluster, &id, &vm).unwrap();
        state.remove_vm(&vm);
        assert!(state.affinity_groups[&id].vm_ids.is_empty());
    }
}
