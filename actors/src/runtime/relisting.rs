//! What a watch's relist showed, so that the supervisor can stop the actors of objects deleted while the watch was
//! down: a relist (`Init` … `InitDone`) delivers every existing object, and no `Delete` for those that are gone.

use std::collections::HashSet;
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

#[cfg(test)]
mod tests {
    use super::Relisting;

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
}
