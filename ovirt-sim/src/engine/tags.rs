//! Tags: `POST /tags` (`AddTagCommand`) and `POST /vms/{id}/tags` (`AttachVmsToTagCommand`), both needing
//! `TAG_MANAGEMENT` on the system (`TagsCommandBase.getPermissionCheckSubjects`), an administrator's action group.

use capov_ovirt::model;

use super::*;
use crate::ids::new_id;
use crate::state::*;

/// `Tags.name`: `@Size(max = TAG_NAME_SIZE)`, 50.
const TAG_NAME_SIZE: usize = 50;

/// The answer to a tag command from a user without `TAG_MANAGEMENT` (`USER_NOT_AUTHORIZED_TO_PERFORM_ACTION`).
pub fn not_authorized() -> EngineError {
    operation_failed(403, "User is not authorized to perform this action.")
}

/// `POST /tags`: a new tag under the root tag (or the parent named by id); names are unique engine-wide.
pub fn add_tag(state: &mut State, tag: &model::Tag) -> EngineResult<String> {
    let name = tag
        .name
        .clone()
        .ok_or_else(|| incomplete("Tag [name] required for add"))?;
    // `ValidationUtils.NO_SPECIAL_CHARACTERS_I18N`: letters, digits, '.', '_' and '-'.
    if !valid_i18n_name(&name) {
        return Err(operation_failed(
            400,
            "Invalid tag name. Only letters, numbers, '-', and '_' are valid characters.",
        ));
    }
    if name.is_empty() || java_length(&name) > TAG_NAME_SIZE {
        return Err(operation_failed(400, "size must be between 1 and 50"));
    }
    if state.tags.values().any(|t| t.name == name) {
        return Err(operation_failed(409, "The specified Tag name already exists."));
    }
    let parent_id = match tag.parent.as_ref().and_then(|p| p.id.clone()) {
        Some(id) if !state.tags.contains_key(&id) => {
            return Err(operation_failed(400, "The specified Tag does not exist."));
        }
        Some(id) => id,
        None => ROOT_TAG_ID.to_string(),
    };
    let id = new_id();
    state.tags.insert(
        id.clone(),
        TagRecord {
            id: id.clone(),
            name,
            description: tag.description.clone().unwrap_or_default(),
            parent_id: Some(parent_id),
        },
    );
    Ok(id)
}

/// `POST /vms/{id}/tags`: by id, or by name as the REST layer looks it up (`lookupTagByName`: 404 when none has
/// it). Assigning a tag the VM already has changes nothing (`USER_ATTACH_TAG_TO_VM_EXISTS`).
pub fn assign_vm_tag(state: &mut State, vm_id: &str, tag: &model::Tag) -> EngineResult<String> {
    if !state.vms.contains_key(vm_id) {
        return Err(EngineError::NotFound);
    }
    let found = match (&tag.id, &tag.name) {
        (Some(id), _) => state.tags.get(id),
        (None, Some(name)) => state.tags.values().find(|t| &t.name == name),
        (None, None) => return Err(incomplete("Tag [id|name] required for add")),
    };
    let id = found.map(|t| t.id.clone()).ok_or(EngineError::NotFound)?;
    vm_mut(state, vm_id)?.tag_ids.insert(id.clone());
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> model::Tag {
        model::Tag {
            name: Some(name.into()),
            ..Default::default()
        }
    }

    /// `Tags.name`: `@Size(min = 1, max = 50)` in UTF-16 units and `NO_SPECIAL_CHARACTERS_I18N`.
    #[test]
    fn names_are_held_to_the_engines_length_and_characters() {
        let mut state = State::default();
        let invalid = Err(operation_failed(
            400,
            "Invalid tag name. Only letters, numbers, '-', and '_' are valid characters.",
        ));
        for name in ["a b", "٣", "Ⅻ", "a/b"] {
            assert_eq!(add_tag(&mut state, &named(name)), invalid, "{name}");
        }
        let too_long = Err(operation_failed(400, "size must be between 1 and 50"));
        assert_eq!(add_tag(&mut state, &named(&"𝐀".repeat(26))), too_long);
        assert_eq!(add_tag(&mut state, &named(&"a".repeat(51))), too_long);
        for name in [
            "capov.cluster.team-a.prod",
            "capov-ns-team-a",
            "é",
            &"a".repeat(50),
            &"𝐀".repeat(25),
        ] {
            assert!(add_tag(&mut state, &named(name)).is_ok(), "{name}");
        }
        assert_eq!(
            add_tag(&mut state, &named("é")),
            Err(operation_failed(409, "The specified Tag name already exists."))
        );
    }
}
