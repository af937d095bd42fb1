//! What decoding one engine answer may build. The client caps the bytes it reads, but a byte cap is not a memory
//! bound: `<vm/>` is five bytes and decodes into a whole VM, so 16 MiB of empty elements would become gigabytes of
//! structs. Every list of the model is decoded through [`items`], which charges each element its decoded size
//! against the answer's budget, set by [`crate::xml::from_xml`]; an answer over it is refused after a bounded amount
//! of memory. Strings need no budget: each costs about the bytes that carried it.

use std::cell::Cell;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{Deserializer, Error as _, SeqAccess, Visitor};

/// The decoded size of list elements one answer may build: as much as the bytes one answer may have
/// (`capov_ovirt::MAX_BODY_BYTES`). A real engine answer is far larger on the wire than decoded (a VM's XML is
/// kilobytes, its struct hundreds of bytes), so only answers of empty or near-empty elements come near it.
pub const MAX_DECODED_ITEM_BYTES: usize = 16 << 20;

/// What the answer being decoded on this thread has spent; `None` outside [`within`] (values decoded by other
/// means, e.g. JSON in tests, are not charged).
#[derive(Clone, Copy)]
struct Spent {
    items: usize,
    bytes: usize,
}

thread_local! {
    static SPENT: Cell<Option<Spent>> = const { Cell::new(None) };
}

/// The budget was spent: how many elements had been decoded when decoding stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exceeded {
    pub items: usize,
    pub limit: usize,
}

/// Runs `decode` with a fresh budget. Decoding is synchronous, so the budget is the thread's while it runs.
pub(crate) fn within<T>(decode: impl FnOnce() -> T) -> (T, Option<Exceeded>) {
    let outer = SPENT.replace(Some(Spent { items: 0, bytes: 0 }));
    let value = decode();
    let spent = SPENT.replace(outer);
    let exceeded = spent.filter(|s| s.bytes > MAX_DECODED_ITEM_BYTES).map(|s| Exceeded {
        items: s.items,
        limit: MAX_DECODED_ITEM_BYTES,
    });
    (value, exceeded)
}

/// Charges one decoded element of `size` bytes; false once the budget is spent (the spending is kept, so the caller
/// of [`within`] sees it).
fn charge(size: usize) -> bool {
    SPENT.with(|spent| match spent.get() {
        None => true,
        Some(s) => {
            let now = Spent {
                items: s.items + 1,
                bytes: s.bytes.saturating_add(size),
            };
            spent.set(Some(now));
            now.bytes <= MAX_DECODED_ITEM_BYTES
        }
    })
}

/// Decodes a list, charging each element its size (`deserialize_with` on every `Vec` of the model).
pub(crate) fn items<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_seq(Charged(PhantomData))
}

struct Charged<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for Charged<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of elements")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<T>()? {
            if !charge(size_of::<T>()) {
                return Err(A::Error::custom("the answer's lists exceed the decoding budget"));
            }
            items.push(item);
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{Vm, Vms};
    use crate::xml::{DecodeError, MAX_DECODED_ITEM_BYTES, from_xml};

    /// `count` empty `<vm/>` elements in one `<vms>`: a few bytes each on the wire.
    fn empty_vms(count: usize) -> String {
        format!("<vms>{}</vms>", "<vm/>".repeat(count))
    }

    #[test]
    fn an_answer_of_empty_elements_is_refused_once_its_decoded_size_passes_the_budget() {
        let fits = MAX_DECODED_ITEM_BYTES / size_of::<Vm>();
        eprintln!(
            "a Vm decodes into {} bytes: {fits} empty <vm/> fill the budget",
            size_of::<Vm>()
        );
        let body = empty_vms(fits + 1);
        assert!(
            body.len() < 16 << 20,
            "the body itself is within the byte cap: {} bytes",
            body.len()
        );
        match from_xml::<Vms>(body.as_bytes()) {
            Err(DecodeError::TooManyItems { items, limit }) => {
                assert_eq!(items, fits + 1);
                assert_eq!(limit, MAX_DECODED_ITEM_BYTES);
            }
            other => panic!("expected TooManyItems, got {:?}", other.map(|vms| vms.items.len())),
        }
        let within = from_xml::<Vms>(empty_vms(fits).as_bytes()).expect("as many as the budget holds");
        assert_eq!(within.items.len(), fits);
    }

    #[test]
    fn nested_lists_share_the_answers_budget() {
        // Few VMs, each with a large list of links: the budget is the answer's, not each list's.
        let links = "<link/>".repeat(MAX_DECODED_ITEM_BYTES / size_of::<crate::model::Link>() / 4 + 1);
        let body = format!("<vms>{}</vms>", format!("<vm>{links}</vm>").repeat(4));
        assert!(matches!(
            from_xml::<Vms>(body.as_bytes()),
            Err(DecodeError::TooManyItems { .. })
        ));
        // The next answer starts afresh.
        let one = format!("<vms><vm>{links}</vm></vms>");
        assert_eq!(
            from_xml::<Vms>(one.as_bytes()).expect("one VM's links fit").items.len(),
            1
        );
    }
}
