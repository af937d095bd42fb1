//! Which engine release the simulator plays.

use serde::{Deserialize, Serialize};

/// The engine release the simulator plays (`product_info`, and which request elements exist).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EngineVersion {
    pub major: u32,
    pub minor: u32,
    pub build: u32,
}

impl EngineVersion {
    pub const fn new(major: u32, minor: u32, build: u32) -> Self {
        Self { major, minor, build }
    }

    /// The default: the release of the real-engine recordings in `shared/reference/ovirt-samples` (4.4.10).
    pub const DEFAULT: EngineVersion = EngineVersion::new(4, 4, 10);
}

impl Default for EngineVersion {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl std::str::FromStr for EngineVersion {
    type Err = String;

    /// `4.4.10` (or `4.4`; a fourth part, as in `4.4.10.7`, is ignored).
    fn from_str(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.trim().split('.').collect();
        let number = |i: usize| -> Result<u32, String> {
            parts.get(i).map_or(Ok(0), |p| {
                p.parse().map_err(|_| format!("invalid engine version {text:?}"))
            })
        };
        if parts.len() < 2 || parts.len() > 4 {
            return Err(format!(
                "invalid engine version {text:?} (expected MAJOR.MINOR[.BUILD])"
            ));
        }
        Ok(Self::new(number(0)?, number(1)?, number(2)?))
    }
}

impl std::fmt::Display for EngineVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.build)
    }
}

impl Serialize for EngineVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for EngineVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}
