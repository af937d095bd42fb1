//! The oVirt Engine REST client.
