//! Text from outside CAPOV (an engine's fault detail, a workload apiserver's error body, a kubeconfig's names) ends
//! up in condition messages, Event notes, failureMessage and log lines. A hostile or broken server decides its
//! length, so every such place cuts it to a bound here.

/// Longest condition message, Event note and failureMessage CAPOV writes, in bytes. The Event API refuses a note
/// over 1 KiB, and a status of several megabytes would be refused by the apiserver and held in memory meanwhile.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// What ends a text that was cut.
const CUT_MARK: &str = " …(cut)";

/// `text` if it fits in `max` bytes, else its longest prefix (on a character boundary) that fits with a mark saying
/// it was cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(CUT_MARK.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT_MARK}", &text[..end])
}

/// [`cut`] to [`MAX_MESSAGE_BYTES`].
pub fn message(text: &str) -> String {
    cut(text, MAX_MESSAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_whole() {
        assert_eq!(message("the VM is locked"), "the VM is locked");
        let exact = "x".repeat(MAX_MESSAGE_BYTES);
        assert_eq!(message(&exact), exact);
    }

    #[test]
    fn long_text_is_cut_to_the_bound_and_says_so() {
        let long = "y".repeat(8 << 20);
        let cut = message(&long);
        assert_eq!(cut.len(), MAX_MESSAGE_BYTES);
        assert!(cut.ends_with(CUT_MARK), "{}", &cut[cut.len() - 20..]);
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        // Three-byte characters: no bound falls on a boundary by chance.
        let long = "€".repeat(1000);
        for max in 16..40 {
            let cut = cut(&long, max);
            assert!(cut.len() <= max, "{max}: {}", cut.len());
            assert!(cut.starts_with('€'), "{max}");
        }
    }
}
