//! The engine name of a machine's VM.
//!
//! The engine refuses VM names longer than 64 characters ("Cannot add VM. The given name is too long.", config
//! `MaxVmNameLength`, counted in UTF-16 units as Java's `String.length()`), and CAPI names machines after their
//! cluster, so a long cluster name gives longer machine names. Rule:
//!
//! * an OVirtMachine name of at most [`VM_NAME_LIMIT`] characters is the VM name unchanged;
//! * a longer one becomes its first 53 characters (trailing `-`/`.` dropped, so the name stays readable), `-`, and
//!   the first 10 hex digits of the SHA-256 of the whole name: `<prefix>-<hash10>`, at most 64 characters.
//!
//! With `spec.vmnametemplate` the name is first built from the template's placeholders (`{name}`, `{namespace}`,
//! `{cluster}`), then shortened by the same rule ([`for_machine`]); the template cannot change once the VM exists.
//!
//! The rule depends only on the object's name (and its template), so every pass (and every CAPOV version with this rule) finds the same
//! VM by name. The VM is still CAPOV's only through the ownership marker, which names the OVirtMachine and its UID in
//! full ([`crate::trust::identity`]); its Node, whose name is the shortened host name, is matched through the VM id
//! (systemUUID, providerID), never through the OVirtMachine's name.

/// The engine's default `MaxVmNameLength` (`packaging/dbscripts/upgrade/pre_upgrade/0000_config.sql`).
pub const VM_NAME_LIMIT: usize = 64;

/// Hex digits of the hash in a shortened name (40 bits: a collision needs two names sharing their first 53
/// characters and these bits).
const HASH_DIGITS: usize = 10;

/// What a name template's placeholders stand for.
#[derive(Clone, Copy, Debug)]
pub struct NameParts<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// The CAPI cluster's name; empty when unknown.
    pub cluster: &'a str,
}

/// The VM name of a machine: its `spec.vmnametemplate` filled in (or its name without one), shortened to the
/// engine's limit. Every lookup of the VM by name (creation, adoption, deletion, the workload Node) uses this.
pub fn for_machine(template: Option<&str>, parts: NameParts<'_>) -> String {
    match template {
        None => for_object(parts.name),
        Some(template) => for_object(&render(template, parts)),
    }
}

/// Fills in the placeholders; anything else in the template stays as written (the CRD admits only `{name}`,
/// `{namespace}` and `{cluster}` besides letters, digits, '.', '_' and '-').
pub fn render(template: &str, parts: NameParts<'_>) -> String {
    template
        .replace("{name}", parts.name)
        .replace("{namespace}", parts.namespace)
        .replace("{cluster}", parts.cluster)
}

/// A VM name CAPOV recorded on the object (the vm-name annotation), if it is one the engine could have given a VM:
/// not empty, within [`VM_NAME_LIMIT`], no whitespace or control characters. Anything else is ignored, and the name
/// is rendered from the spec as before.
pub fn recorded(value: &str) -> Option<String> {
    let fits = !value.is_empty()
        && engine_length(value) <= VM_NAME_LIMIT
        && !value.chars().any(|c| c.is_whitespace() || c.is_control());
    fits.then(|| value.to_string())
}

/// The VM name for an OVirtMachine named `object_name`.
pub fn for_object(object_name: &str) -> String {
    shortened(object_name, VM_NAME_LIMIT)
}

/// `name` unchanged when it has at most `limit` UTF-16 units, else its longest prefix that leaves room for `-` and
/// the hash (trailing `-`/`.` dropped), `-`, and 10 hex digits of the SHA-256 of the whole name.
pub fn shortened(object_name: &str, limit: usize) -> String {
    if engine_length(object_name) <= limit {
        return object_name.to_string();
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, object_name.as_bytes());
    let hash: String = digest
        .as_ref()
        .iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .take(HASH_DIGITS)
        .map(|nibble| char::from_digit(u32::from(nibble), 16).unwrap_or('0'))
        .collect();
    let room = limit.saturating_sub(1 + HASH_DIGITS);
    let mut prefix = String::new();
    for ch in object_name.chars() {
        if engine_length(&prefix) + ch.len_utf16() > room {
            break;
        }
        prefix.push(ch);
    }
    let prefix = prefix.trim_end_matches(['-', '.']);
    format!("{prefix}-{hash}")
}

/// Length as the engine counts it (Java `String.length()`: UTF-16 code units).
pub fn engine_length(name: &str) -> usize {
    name.encode_utf16().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_kept() {
        assert_eq!(for_object("worker-0"), "worker-0");
        let exactly = "a".repeat(VM_NAME_LIMIT);
        assert_eq!(for_object(&exactly), exactly);
    }

    #[test]
    fn long_names_get_a_readable_prefix_and_a_stable_hash() {
        let name = "a-very-long-cluster-name-for-a-production-environment-md-0-7d9f8b6c5-x2kq9";
        assert!(name.len() > VM_NAME_LIMIT);
        let vm = for_object(name);
        assert_eq!(engine_length(&vm), VM_NAME_LIMIT);
        assert!(
            vm.starts_with("a-very-long-cluster-name-for-a-production-environment"),
            "{vm}"
        );
        let (prefix, hash) = vm.rsplit_once('-').expect("a hash part");
        assert!(name.starts_with(prefix));
        assert_eq!(hash.len(), HASH_DIGITS);
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
        // Deterministic, and the SHA-256 of the whole name (checked against an independent implementation:
        // `printf %s NAME | sha256sum | cut -c1-10`).
        assert_eq!(for_object(name), vm);
        assert_eq!(hash, "c60101785d");
    }

    #[test]
    fn names_differing_only_after_the_prefix_get_different_vm_names() {
        let base = "x".repeat(60);
        let a = for_object(&format!("{base}-aaaaa"));
        let b = for_object(&format!("{base}-aaaab"));
        assert_ne!(a, b);
        assert!(engine_length(&a) <= VM_NAME_LIMIT && engine_length(&b) <= VM_NAME_LIMIT);
    }

    #[test]
    fn the_prefix_never_ends_in_a_separator() {
        // Character 53 is a '-': the prefix drops it rather than doubling the separator.
        let name = format!("{}-{}", "b".repeat(52), "c".repeat(30));
        let vm = for_object(&name);
        assert!(!vm.contains("--"), "{vm}");
        assert!(engine_length(&vm) <= VM_NAME_LIMIT);
    }

    #[test]
    fn a_template_fills_in_its_placeholders_then_shortens() {
        let parts = NameParts {
            name: "worker-1",
            namespace: "team-a",
            cluster: "prod",
        };
        assert_eq!(for_machine(None, parts), "worker-1");
        assert_eq!(for_machine(Some("{namespace}-{name}"), parts), "team-a-worker-1");
        assert_eq!(
            for_machine(Some("k8s.{cluster}.{namespace}.{name}"), parts),
            "k8s.prod.team-a.worker-1"
        );
        // Two namespaces, one machine name: different VM names with a template that holds the namespace.
        let other = NameParts {
            namespace: "team-b",
            ..parts
        };
        assert_ne!(
            for_machine(Some("{namespace}-{name}"), parts),
            for_machine(Some("{namespace}-{name}"), other)
        );
        let long = NameParts {
            namespace: &"n".repeat(63),
            ..parts
        };
        let vm = for_machine(Some("{namespace}-{name}"), long);
        assert_eq!(engine_length(&vm), VM_NAME_LIMIT);
        assert_eq!(vm, for_object(&format!("{}-worker-1", "n".repeat(63))));
    }

    #[test]
    fn shortening_to_another_limit_keeps_the_rule() {
        assert_eq!(shortened("capov", 50), "capov");
        let long = format!("capov-cluster-{}", "x".repeat(60));
        let short = shortened(&long, 50);
        assert_eq!(engine_length(&short), 50);
        assert_eq!(short, shortened(&long, 50));
    }

    #[test]
    fn the_limit_counts_utf16_units_as_the_engine_does() {
        let name = "é".repeat(40) + &"😀".repeat(20);
        assert_eq!(engine_length(&name), 40 + 40);
        assert!(engine_length(&for_object(&name)) <= VM_NAME_LIMIT);
    }
}
