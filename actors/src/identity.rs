//! How a VM is tied to its OVirtMachine: `spec.providerID` = `ovirt://<vm-id>`, and the marker
//! `capov:<namespace>/<name>` in the VM's description, which lets a restarted operator adopt a VM it created but
//! could not record, and keeps it from touching a same-named VM that someone else created (SPEC §2 step 3).

/// Prefix of every provider ID this operator writes.
pub const PROVIDER_ID_PREFIX: &str = "ovirt://";

/// `ovirt://<vm-id>`.
pub fn format_provider_id(vm_id: &str) -> String {
    format!("{PROVIDER_ID_PREFIX}{vm_id}")
}

/// The VM id of `ovirt://<vm-id>`; None for anything else (other prefix, empty id, a path).
pub fn parse_provider_id(provider_id: &str) -> Option<&str> {
    let id = provider_id.trim().strip_prefix(PROVIDER_ID_PREFIX)?;
    (!id.is_empty() && !id.contains('/') && !id.chars().any(char::is_whitespace)).then_some(id)
}

/// The marker written into the description of every VM this operator creates.
pub fn description_marker(namespace: &str, name: &str) -> String {
    format!("capov:{namespace}/{name}")
}

/// True when `description` carries the marker as a whole whitespace-delimited word, so that the marker of
/// `worker-1` is not found in that of `worker-10`.
pub fn has_marker(description: &str, namespace: &str, name: &str) -> bool {
    let marker = description_marker(namespace, name);
    description.split_whitespace().any(|word| word == marker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_id_round_trips() {
        let id = "0a5c3c43-4b4e-4a31-9d0e-1b2f5a7e8c90";
        assert_eq!(parse_provider_id(&format_provider_id(id)), Some(id));
    }

    #[test]
    fn malformed_provider_ids_are_rejected() {
        for bad in ["", "ovirt://", "vsphere://abc", "abc", "ovirt://a/b", "ovirt://a b"] {
            assert_eq!(parse_provider_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn marker_names_namespace_and_name() {
        assert_eq!(description_marker("default", "worker-1"), "capov:default/worker-1");
    }

    #[test]
    fn marker_must_match_as_a_whole_word() {
        assert!(has_marker("capov:default/worker-1", "default", "worker-1"));
        assert!(has_marker(
            "created by CAPOV capov:default/worker-1",
            "default",
            "worker-1"
        ));
        assert!(!has_marker("capov:default/worker-10", "default", "worker-1"));
        assert!(!has_marker("capov:other/worker-1", "default", "worker-1"));
        assert!(!has_marker("", "default", "worker-1"));
    }
}
