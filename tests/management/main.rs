//! CAPOV under the real Cluster API core manager, in one test process: the tests of `capi`, `placement` and
//! `topology` share one management cluster (`world::management`), each in a namespace of its own with its own engine
//! simulator, workload cluster and operator restricted to that namespace, and run side by side; the clusterctl tests
//! (`clusterctl_move`, `clusterctl_upgrade`) start management clusters of their own through `world::clusterctl`.
//! Why one process: docs/decisions.md, "One pure core (issue 37)", "One management-plane world for the Cluster API
//! tests".

mod capi;
mod clusterctl_move;
mod clusterctl_upgrade;
mod engines;
mod placement;
mod topology;
mod world;
