//! CAPOV's actors.
