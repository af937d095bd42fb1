//! Names of the engine objects CAPOV creates whose names the engine keeps unique across the whole engine: affinity
//! groups (`AddAffinityGroupCommand`) and tags (`AddTagCommand`). Two tenants must never be given the same name, or
//! the second one's group is refused (`AffinityGroupConflict`) and its tag is shared with the first.
//!
//! Rule (issue #35): `capov` then each part, in order, after a `.`, written so that no part can run into the next:
//!
//! * letters `A-Z`/`a-z`, digits and `-` stay as they are (every Kubernetes namespace and almost every cluster
//!   name is made of nothing else, so the name stays readable: `capov.team-a.prod.control-plane.Default`);
//! * any other character becomes `_` and two hex digits of its code (ASCII: `.` is `_2e`, `_` is `_5f`), or `_u`
//!   and six hex digits (any other character: `ü` is `_u0000fc`). The engine would take `ü` as it is, but a name of
//!   ASCII letters, digits, `.`, `_` and `-` meets every engine rule for names (`ValidationUtils.
//!   NO_SPECIAL_CHARACTERS_I18N`: letters, `0-9`, `.`, `_`, `-`) on every engine and in every client.
//!
//! So a part never holds a `.`, and the parts can be read back from the name: two different lists of parts never
//! give the same name. A name longer than the engine allows (counted in UTF-16 units, as Java's `String.length()`;
//! the name is ASCII, so in bytes) keeps its longest beginning that ends between two written characters, and ends in
//! `_h` and the first 16 hex digits of the SHA-256 of the whole name. No name that was not cut holds `_h` (a `_` is
//! always followed by a hex digit or `u` there), so a cut name never equals a name that was not; two cut names are
//! equal only when 64 bits of SHA-256 are.
//!
//! Every name CAPOV gave before this rule began with `capov-` (or was `capov`): no name of this rule equals one of
//! them, so an object made under an older name is never taken for another tenant's.

/// The first part of every name of this rule.
const PREFIX: &str = "capov";
const SEPARATOR: char = '.';
const ESCAPE: char = '_';
/// Ends a cut name, before the hash.
const CUT_MARK: &str = "_h";
/// Hex digits of the SHA-256 in a cut name (64 bits).
const HASH_DIGITS: usize = 16;

/// The engine-wide name of an object CAPOV names after `parts` (e.g. namespace, cluster, purpose, oVirt cluster), at
/// most `limit` characters (`limit` must leave room for the prefix, the cut mark and the hash: 24 at least).
pub fn engine_wide(parts: &[&str], limit: usize) -> String {
    let mut pieces: Vec<String> = vec![PREFIX.to_string()];
    for part in parts {
        pieces.push(SEPARATOR.to_string());
        pieces.extend(part.chars().map(written));
    }
    let whole: String = pieces.concat();
    if whole.len() <= limit {
        return whole;
    }
    let room = limit.saturating_sub(CUT_MARK.len() + HASH_DIGITS);
    let mut kept = String::new();
    for piece in &pieces {
        if kept.len() + piece.len() > room {
            break;
        }
        kept.push_str(piece);
    }
    let kept = kept.trim_end_matches([SEPARATOR, '-']);
    format!("{kept}{CUT_MARK}{}", sha256_hex(&whole, HASH_DIGITS))
}

/// One character of a part as it is written in a name.
fn written(ch: char) -> String {
    if ch.is_ascii_alphanumeric() || ch == '-' {
        ch.to_string()
    } else if ch.is_ascii() {
        format!("{ESCAPE}{:02x}", u32::from(ch))
    } else {
        format!("{ESCAPE}u{:06x}", u32::from(ch))
    }
}

/// The first `digits` lower-case hex digits of the SHA-256 of `text`.
pub fn sha256_hex(text: &str, digits: usize) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<String>()
        .chars()
        .take(digits)
        .collect()
}

/// Whether `name` is made only of what the engine takes in the names of affinity groups, affinity labels, tags and
/// clusters (`ValidationUtils.NO_SPECIAL_CHARACTERS_I18N`, `^[\p{L}0-9._-]*$`), restricted to ASCII letters, which
/// is what this rule writes.
pub fn engine_safe(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn parts_are_kept_readable_and_apart() {
        assert_eq!(
            engine_wide(&["team-a", "prod", "control-plane", "Default"], 255),
            "capov.team-a.prod.control-plane.Default"
        );
        assert_eq!(
            engine_wide(&["team", "a.prod", "md-w_1", "Clüster 1"], 255),
            "capov.team.a_2eprod.md-w_5f1.Cl_u0000fcster_201"
        );
    }

    #[test]
    fn look_alike_namespaces_and_clusters_get_different_names() {
        // Issue #35: namespace a-b with cluster c, and namespace a with cluster b-c, shared one group.
        assert_ne!(engine_wide(&["a-b", "c"], 50), engine_wide(&["a", "b-c"], 50));
        assert_ne!(
            engine_wide(&["team", "a-prod"], 50),
            engine_wide(&["team-a", "prod"], 50)
        );
        assert_ne!(engine_wide(&["a.b", "c"], 50), engine_wide(&["a", "b.c"], 50));
        assert_ne!(engine_wide(&["a_2eb", "c"], 50), engine_wide(&["a.b", "c"], 50));
        assert_ne!(engine_wide(&["a", "b"], 50), engine_wide(&["a", "b", ""], 50));
    }

    /// Every list of up to three parts over an alphabet holding the separator, the escape, the cut mark's letter, a
    /// hex digit and a non-ASCII letter gets a name of its own.
    #[test]
    fn no_two_lists_of_parts_share_a_name() {
        let alphabet = ['a', '-', '.', '_', 'h', '2', 'e', 'é'];
        let mut words = vec![String::new()];
        let mut longest = vec![String::new()];
        for _ in 0..3 {
            longest = longest
                .iter()
                .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
                .collect();
            words.extend(longest.iter().cloned());
        }
        let mut seen: HashMap<String, Vec<String>> = HashMap::new();
        for a in &words {
            for b in &words {
                let parts = vec![a.clone(), b.clone()];
                let name = engine_wide(&[a, b], 255);
                assert!(engine_safe(&name), "{name}");
                if let Some(other) = seen.insert(name.clone(), parts.clone()) {
                    panic!("{other:?} and {parts:?} both give {name}");
                }
            }
        }
        assert!(seen.len() > 300_000, "{}", seen.len());
    }

    #[test]
    fn long_names_are_cut_to_the_limit_with_a_stable_sha256() {
        let namespace = "n".repeat(63);
        let cluster = "c".repeat(63);
        let name = engine_wide(&["cluster", &namespace, &cluster], 50);
        assert_eq!(name.len(), 50);
        assert!(engine_safe(&name), "{name}");
        assert!(name.starts_with("capov.cluster.nnnn"), "{name}");
        let whole = format!("capov.cluster.{namespace}.{cluster}");
        // The SHA-256 of the whole name, as `printf %s NAME | sha256sum | cut -c1-16` gives it.
        assert_eq!(sha256_hex(&whole, 16), "2f92ad42c7a243ca");
        assert!(name.ends_with("_h2f92ad42c7a243ca"), "{name}");
        assert_eq!(
            name,
            engine_wide(&["cluster", &namespace, &cluster], 50),
            "the same every time"
        );
        let other = engine_wide(&["cluster", &namespace, &format!("{}d", "c".repeat(62))], 50);
        assert_ne!(name, other, "names differing after the cut stay apart");
        assert_eq!(other.len(), 50);
    }

    #[test]
    fn a_cut_never_splits_a_written_character_nor_looks_like_a_name_that_was_not_cut() {
        for n in 0..12 {
            let part = format!("{}{}", "x".repeat(n), ".".repeat(40));
            let name = engine_wide(&["ns", &part], 50);
            assert!(name.len() <= 50, "{name}");
            let (kept, hash) = name.rsplit_once(CUT_MARK).expect("cut");
            assert_eq!(hash.len(), HASH_DIGITS);
            assert!(
                kept.ends_with('x') || kept.ends_with("_2e") || kept.ends_with("ns"),
                "{kept}"
            );
        }
        // A part cannot spell the cut mark: its `_` is written `_5f`.
        let crafted = engine_wide(&["ns", "x_h0123456789abcdef"], 255);
        assert!(!crafted.contains(CUT_MARK), "{crafted}");
    }

    #[test]
    fn no_name_of_this_rule_equals_a_name_of_the_older_one() {
        // The older names: capov, capov-ns-<ns>, capov-cluster-<ns>-<cluster>, capov-<ns>-<cluster>-<purpose>-…
        for name in [
            engine_wide(&["ns", "team-a"], 50),
            engine_wide(&["cluster", "team-a", "prod"], 50),
            engine_wide(&["team-a", "prod", "control-plane", "Default"], 255),
            engine_wide(&["cluster", &"n".repeat(63), "prod"], 50),
        ] {
            assert!(name.starts_with("capov."), "{name}");
        }
    }
}
