//! The operator's switches and the retry timing every step shares.

pub mod backoff;
pub mod feature_gates;
