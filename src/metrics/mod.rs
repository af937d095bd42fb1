//! The metrics endpoint: serves the actors' [`Metrics`] registry over HTTPS, with the bearer token checked by a
//! TokenReview and a SubjectAccessReview.

mod auth;
mod server;
mod tls;

pub use auth::{Authorizer, Decision};
pub use server::{MetricsServerOptions, serve};
pub use tls::server_config;

pub use capov_actors::metrics::{Metrics, TEXT_CONTENT_TYPE, result};
