//! One received request, as the handlers read it.

use bytes::Bytes;
use http::{HeaderMap, Method};

/// One received request.
pub struct Incoming {
    pub method: Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Incoming {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The engine's boolean parameter rules: empty = true, t/true/y/yes/1 and f/false/n/no/0,
    /// anything else is ignored.
    pub fn bool_param(&self, name: &str) -> Option<bool> {
        match self.param(name)?.to_ascii_lowercase().as_str() {
            "" | "t" | "true" | "y" | "yes" | "1" => Some(true),
            "f" | "false" | "n" | "no" | "0" => Some(false),
            _ => None,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// URL-encoded form fields of the body.
    pub fn form(&self) -> Vec<(String, String)> {
        form_urlencoded::parse(&self.body).into_owned().collect()
    }
}
