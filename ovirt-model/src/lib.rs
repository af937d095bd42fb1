//! The oVirt Engine's objects in their XML wire format (`model`) and the encoding and decoding of engine bodies
//! (`xml`). No I/O: the client (`capov-ovirt`) sends and reads them, the simulator serves them, and CAPOV's pure core
//! (`capov-core`) decides from them without pulling an HTTP stack.

mod decode_budget;
pub mod model;
pub mod xml;
