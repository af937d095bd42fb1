//! XML encoding and decoding of engine bodies.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The declaration the engine puts in front of every XML body.
pub const XML_DECLARATION: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>"#;

/// Why a body could not be decoded. Carries only the parser message, never the body itself
/// (bodies may contain bootstrap secrets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(String);

/// Decodes an engine XML body. Any byte sequence yields `Ok` or `Err`, never a panic.
pub fn from_xml<T: DeserializeOwned>(body: &[u8]) -> Result<T, DecodeError> {
    let text = std::str::from_utf8(body).map_err(|e| DecodeError(format!("body is not UTF-8: {e}")))?;
    if text.trim().is_empty() {
        return Err(DecodeError("empty body".to_string()));
    }
    quick_xml::de::from_str(text).map_err(|e| DecodeError(e.to_string()))
}

/// Encodes a value as an XML document (without declaration), its root named after the type.
pub fn to_xml<T: Serialize>(value: &T) -> Result<String, DecodeError> {
    quick_xml::se::to_string(value).map_err(|e| DecodeError(e.to_string()))
}

/// Encodes a value as a complete document with the engine's XML declaration.
pub fn to_xml_document<T: Serialize>(value: &T) -> Result<String, DecodeError> {
    Ok(format!("{XML_DECLARATION}\n{}", to_xml(value)?))
}
