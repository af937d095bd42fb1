//! Talking to Kubernetes apiservers: the clients with their deadlines and body limits (`clients`, `body_limit`),
//! whether the management cluster's apiserver answers at all (`pulse`),
//! the requests CAPOV sends raw (`requests`, `slim_requests`), and the slim decoding of what the runtime keeps of
//! watched objects (`slim`, `slim_meta`).

pub mod body_limit;
pub mod clients;
pub mod pulse;
pub mod requests;
pub mod resource;
pub mod slim;
pub mod slim_meta;
pub mod slim_requests;
