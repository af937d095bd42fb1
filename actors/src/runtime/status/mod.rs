//! Reporting: the one status writer (`writer`) with its coalescing queue (`queue`) and the schedule of its retries
//! (`retry`), Events (`events`), the metrics' census of written statuses (`census`), and the OVirtMachineTemplates'
//! computed status (`templates`).

pub mod census;
pub mod events;
pub mod queue;
pub mod retry;
pub mod templates;
pub mod writer;
