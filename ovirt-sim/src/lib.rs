//! The oVirt Engine simulator.
