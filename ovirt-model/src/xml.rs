//! XML encoding and decoding of engine bodies.

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use crate::decode_budget::MAX_DECODED_ITEM_BYTES;
use crate::decode_budget::{self, Exceeded};

/// The declaration the engine puts in front of every XML body.
pub const XML_DECLARATION: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>"#;

/// Why a body could not be decoded. Carries only the parser's message, never the body itself
/// (bodies may contain bootstrap secrets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{0}")]
    Malformed(String),
    /// The answer's lists would decode into more than [`MAX_DECODED_ITEM_BYTES`]: far more elements than any engine
    /// answer CAPOV asks for has, or elements emptier than any the engine sends.
    #[error(
        "its lists decode into more than {limit} bytes (decoding stopped at {items} elements): far more than any \
         engine answer holds"
    )]
    TooManyItems { items: usize, limit: usize },
}

/// Decodes an engine XML body. Any byte sequence yields `Ok` or `Err`, never a panic, and the lists decoded stay
/// within [`MAX_DECODED_ITEM_BYTES`] whatever the body holds.
pub fn from_xml<T: DeserializeOwned>(body: &[u8]) -> Result<T, DecodeError> {
    let text = std::str::from_utf8(body).map_err(|e| DecodeError::Malformed(format!("body is not UTF-8: {e}")))?;
    if text.trim().is_empty() {
        return Err(DecodeError::Malformed("empty body".to_string()));
    }
    match decode_budget::within(|| quick_xml::de::from_str(text)) {
        (_, Some(Exceeded { items, limit })) => Err(DecodeError::TooManyItems { items, limit }),
        (decoded, None) => decoded.map_err(|e| DecodeError::Malformed(e.to_string())),
    }
}

/// The root element of an engine answer of this type (`<vm>`, `<vms>`, …). Decoding does not check it (serde reads
/// any element as the type), so callers that must not mistake another document for an empty answer check it with
/// [`root_element`] first.
pub trait Root {
    const ROOT: &'static str;
}

/// How deeply elements may nest before a body is refused (engine answers nest about ten levels).
const MAX_DEPTH: usize = 256;

/// The local name of the root element of a complete, well-formed XML document. Fails on a body without an element,
/// with text or a second element beside the root, with mismatched or missing end tags (a truncated answer), or
/// nested deeper than any engine answer.
pub fn root_element(body: &[u8]) -> Result<String, DecodeError> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(body);
    let mut root: Option<String> = None;
    let mut depth = 0usize;
    let mut buf = Vec::new();
    loop {
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|e| DecodeError::Malformed(format!("not well-formed XML: {e}")))?;
        match event {
            Event::Start(start) | Event::Empty(start) if depth == 0 && root.is_some() => {
                let name = local_name(&start);
                return Err(DecodeError::Malformed(format!("a second root element <{name}>")));
            }
            Event::Start(start) => {
                if depth == 0 {
                    root = Some(local_name(&start));
                }
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(DecodeError::Malformed(format!(
                        "elements nest deeper than {MAX_DEPTH} levels"
                    )));
                }
            }
            Event::Empty(start) if depth == 0 => root = Some(local_name(&start)),
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Text(text) if depth == 0 && !AsRef::<str>::as_ref(&text).trim().is_empty() => {
                return Err(DecodeError::Malformed("text outside the root element".to_string()));
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    match root {
        None => Err(DecodeError::Malformed("no root element".to_string())),
        Some(_) if depth > 0 => Err(DecodeError::Malformed(
            "the document ends inside an element (truncated)".to_string(),
        )),
        Some(root) => Ok(root),
    }
}

fn local_name(start: &quick_xml::events::BytesStart<'_>) -> String {
    AsRef::<str>::as_ref(&start.local_name()).to_string()
}

/// Encodes a value as an XML document (without declaration), its root named after the type.
pub fn to_xml<T: Serialize>(value: &T) -> Result<String, DecodeError> {
    quick_xml::se::to_string(value).map_err(|e| DecodeError::Malformed(e.to_string()))
}

/// Encodes a value as a complete document with the engine's XML declaration.
pub fn to_xml_document<T: Serialize>(value: &T) -> Result<String, DecodeError> {
    Ok(format!("{XML_DECLARATION}\n{}", to_xml(value)?))
}

#[cfg(test)]
mod root_tests {
    use super::*;

    #[test]
    fn the_root_element_of_engine_answers() {
        let vms = format!("{XML_DECLARATION}\n<vms>\n  <vm id=\"a\"><name>x</name></vm>\n</vms>\n");
        assert_eq!(root_element(vms.as_bytes()), Ok("vms".to_string()));
        assert_eq!(root_element(b"<vms/>"), Ok("vms".to_string()));
        // Comments and processing instructions before the root are skipped.
        assert_eq!(
            root_element(b"<?xml version=\"1.0\"?><!-- x --><vm id=\"a\"/>"),
            Ok("vm".to_string())
        );
    }

    #[test]
    fn foreign_truncated_and_broken_documents_are_refused_or_named() {
        // An HTML page is a document, with another root: the caller compares the name.
        assert_eq!(
            root_element(b"<!DOCTYPE html>\n<html><body><p>Sign in</body></html>").ok(),
            None,
            "mismatched end tags are not XML"
        );
        assert_eq!(
            root_element(b"<!DOCTYPE html><html><body>Bad gateway</body></html>"),
            Ok("html".to_string())
        );
        for (body, why) in [
            (&b""[..], "empty"),
            (b"   \n", "blank"),
            (b"Bad gateway", "text only"),
            (b"<vms><vm id=\"a\"><name>x</name></vm>", "truncated"),
            (b"<vms><vm id=\"a\"><name>x</na", "cut inside a tag"),
            (b"<vm/><vm/>", "two roots"),
            (b"<vm/>trailing", "text after the root"),
            (b"<vms></vm>", "mismatched end tag"),
        ] {
            assert!(root_element(body).is_err(), "{why}: {:?}", root_element(body));
        }
        let deep = format!("{}{}", "<a>".repeat(MAX_DEPTH + 1), "</a>".repeat(MAX_DEPTH + 1));
        assert!(root_element(deep.as_bytes()).is_err());
    }
}
