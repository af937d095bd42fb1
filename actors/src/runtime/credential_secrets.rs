//! The credentials Secrets as the watch last listed them. A relist (after a watch gap) is a complete picture: a
//! Secret it does not contain was deleted meanwhile, and the providers using it must stop using its old content.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::watcher::Event;

pub type SecretData = BTreeMap<String, ByteString>;

/// What changed for one Secret: its new content, or None when it is gone.
pub type Change = (String, Option<SecretData>);

#[derive(Default)]
pub struct CredentialSecrets {
    secrets: HashMap<String, SecretData>,
    /// The names seen since a relist began; None outside a relist.
    relisting: Option<HashSet<String>>,
}

impl CredentialSecrets {
    pub fn get(&self, name: &str) -> Option<&SecretData> {
        self.secrets.get(name)
    }

    /// Takes in one watch event and returns the Secrets whose content changed because of it.
    pub fn apply(&mut self, event: Event<Secret>) -> Vec<Change> {
        match event {
            Event::Init => {
                self.relisting = Some(HashSet::new());
                Vec::new()
            }
            Event::InitApply(secret) => {
                let name = secret.name_any();
                if let Some(seen) = &mut self.relisting {
                    seen.insert(name.clone());
                }
                self.store(name, secret.data.unwrap_or_default())
            }
            Event::Apply(secret) => self.store(secret.name_any(), secret.data.unwrap_or_default()),
            Event::Delete(secret) => self.forget(&secret.name_any()),
            Event::InitDone => {
                let Some(seen) = self.relisting.take() else {
                    return Vec::new();
                };
                let gone: Vec<String> = self
                    .secrets
                    .keys()
                    .filter(|name| !seen.contains(*name))
                    .cloned()
                    .collect();
                gone.iter().flat_map(|name| self.forget(name)).collect()
            }
        }
    }

    fn store(&mut self, name: String, data: SecretData) -> Vec<Change> {
        if self.secrets.get(&name) == Some(&data) {
            return Vec::new();
        }
        self.secrets.insert(name.clone(), data.clone());
        vec![(name, Some(data))]
    }

    fn forget(&mut self, name: &str) -> Vec<Change> {
        match self.secrets.remove(name) {
            Some(_) => vec![(name.to_string(), None)],
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(name: &str, password: &str) -> Secret {
        let mut secret = Secret::default();
        secret.metadata.name = Some(name.into());
        secret.data = Some(BTreeMap::from([(
            "password".to_string(),
            ByteString(password.as_bytes().to_vec()),
        )]));
        secret
    }

    fn names(changes: &[Change]) -> Vec<(&str, bool)> {
        changes
            .iter()
            .map(|(name, data)| (name.as_str(), data.is_some()))
            .collect()
    }

    #[test]
    fn a_secret_missing_from_a_relist_is_gone() {
        let mut cache = CredentialSecrets::default();
        cache.apply(Event::Apply(secret("engine-a", "one")));
        cache.apply(Event::Apply(secret("engine-b", "two")));

        // The watch lost its connection; engine-a was deleted meanwhile and the relist does not contain it.
        assert!(cache.apply(Event::Init).is_empty());
        assert!(cache.apply(Event::InitApply(secret("engine-b", "two"))).is_empty());
        let changes = cache.apply(Event::InitDone);

        assert_eq!(names(&changes), [("engine-a", false)]);
        assert!(cache.get("engine-a").is_none());
        assert!(cache.get("engine-b").is_some());
    }

    #[test]
    fn a_relist_reports_content_changed_during_the_gap() {
        let mut cache = CredentialSecrets::default();
        cache.apply(Event::Apply(secret("engine-a", "old")));
        cache.apply(Event::Init);
        let changes = cache.apply(Event::InitApply(secret("engine-a", "new")));
        assert_eq!(names(&changes), [("engine-a", true)]);
        assert!(cache.apply(Event::InitDone).is_empty());
    }

    #[test]
    fn unchanged_content_and_unknown_deletions_announce_nothing() {
        let mut cache = CredentialSecrets::default();
        assert_eq!(names(&cache.apply(Event::Apply(secret("a", "p")))), [("a", true)]);
        assert!(cache.apply(Event::Apply(secret("a", "p"))).is_empty());
        assert!(cache.apply(Event::Delete(secret("b", "p"))).is_empty());
        assert_eq!(names(&cache.apply(Event::Delete(secret("a", "p")))), [("a", false)]);
        // InitDone without Init (never happens in kube's watcher) changes nothing.
        assert!(cache.apply(Event::InitDone).is_empty());
    }
}
