//! What a watch's relist showed: a relist (`Init` … `InitDone`) delivers every existing object, and no `Delete` for
//! those that are gone. [`Relisting`] lets the supervisor stop the actors of objects deleted while the watch was down;
//! [`RelistChanges`] lets a store's watch wake only the machines whose objects changed or went away meanwhile, instead
//! of every machine (a relist of 10,000 CAPI Machines after an apiserver restart would otherwise start 10,000
//! passes at once).

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

pub struct Relisting<K>(Option<HashSet<K>>);

impl<K: Clone + Eq + Hash> Default for Relisting<K> {
    fn default() -> Self {
        Relisting(None)
    }
}

impl<K: Clone + Eq + Hash> Relisting<K> {
    /// A relist starts (`Init`).
    pub fn start(&mut self) {
        self.0 = Some(HashSet::new());
    }

    /// The relist under way (if any) showed `key`.
    pub fn saw(&mut self, key: &K) {
        if let Some(seen) = &mut self.0 {
            seen.insert(key.clone());
        }
    }

    /// The relist ends (`InitDone`): the keys of `held` it did not show. None when no relist was under way.
    pub fn finish<'a>(&mut self, held: impl Iterator<Item = &'a K>) -> Option<Vec<K>>
    where
        K: 'a,
    {
        let seen = self.0.take()?;
        Some(held.filter(|key| !seen.contains(*key)).cloned().collect())
    }
}

/// The objects a store held when a relist began, by key: their resourceVersion and whom a change of them wakes.
pub struct RelistChanges<K, W> {
    before: HashMap<K, (Option<String>, Option<W>)>,
    wake: Vec<W>,
}

impl<K: Eq + Hash, W: Eq + Clone> RelistChanges<K, W> {
    /// A relist begins; `held` is what the store holds (it is replaced only once the relist is complete).
    pub fn start(held: impl Iterator<Item = (K, Option<String>, Option<W>)>) -> RelistChanges<K, W> {
        RelistChanges {
            before: held.map(|(key, version, wake)| (key, (version, wake))).collect(),
            wake: Vec::new(),
        }
    }

    /// The relist shows `key` at `version`: new or changed, it wakes `wake`.
    pub fn saw(&mut self, key: &K, version: Option<&str>, wake: Option<W>) {
        let unchanged = self
            .before
            .remove(key)
            .is_some_and(|(held, _)| held.is_some() && held.as_deref() == version);
        if !unchanged && let Some(wake) = wake {
            self.push(wake);
        }
    }

    /// The relist is complete: whom the new and changed objects wake, and the objects it no longer shows.
    pub fn finish(mut self) -> Vec<W> {
        let gone: Vec<W> = self.before.drain().filter_map(|(_, (_, wake))| wake).collect();
        for wake in gone {
            self.push(wake);
        }
        self.wake
    }

    fn push(&mut self, wake: W) {
        if !self.wake.contains(&wake) {
            self.wake.push(wake);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{RelistChanges, Relisting};

    #[test]
    fn a_relist_names_what_it_did_not_show() {
        let held = ["kept", "deleted meanwhile"];
        let mut relisting = Relisting::default();
        relisting.saw(&"kept");
        assert_eq!(relisting.finish(held.iter()), None, "no relist was under way");
        relisting.start();
        relisting.saw(&"kept");
        relisting.saw(&"created meanwhile");
        assert_eq!(relisting.finish(held.iter()), Some(vec!["deleted meanwhile"]));
        assert_eq!(relisting.finish(held.iter()), None, "the relist ended");
    }

    #[test]
    fn a_relist_wakes_only_what_changed_or_went_away() {
        let held = [
            ("same", Some("1".to_string()), Some("m-same")),
            ("changed", Some("2".to_string()), Some("m-changed")),
            ("deleted", Some("3".to_string()), Some("m-deleted")),
            ("wakes nobody", Some("4".to_string()), None),
        ];
        let mut relist = RelistChanges::start(held.into_iter());
        relist.saw(&"same", Some("1"), Some("m-same"));
        relist.saw(&"changed", Some("5"), Some("m-changed"));
        relist.saw(&"new", Some("6"), Some("m-new"));
        relist.saw(&"new too", Some("7"), Some("m-new"));
        let mut woken = relist.finish();
        woken.sort();
        assert_eq!(woken, ["m-changed", "m-deleted", "m-new"]);
    }

    #[test]
    fn an_object_without_a_version_counts_as_changed() {
        let mut relist = RelistChanges::start([("x", None, Some("m"))].into_iter());
        relist.saw(&"x", None, Some("m"));
        assert_eq!(relist.finish(), ["m"]);
    }
}
