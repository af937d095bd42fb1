//! Log output: tracing-subscriber to stderr, one JSON object per line by default (`--log-format=text` for humans),
//! info level or debug with `--debug`; `RUST_LOG` directives refine the filter (e.g. `RUST_LOG=kube=debug`).

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

use crate::cli::LogFormat;

/// Crates whose debug output is wire-level noise; they stay at info under `--debug` unless `RUST_LOG` names them.
const QUIET_AT_DEBUG: &[&str] = &["hyper", "hyper_util", "h2", "rustls", "tower", "tokio_util", "warp"];

/// ractor opens an info-level span for each actor's whole life: with one actor per OVirtMachine that is 10,000 spans
/// (about 0.7 KB each in the subscriber) for a name and a number CAPOV's log lines do not need (each names its
/// object). Its warnings and errors still show.
const ACTOR_SPANS_OFF: &str = "ractor=warn";

/// kube's trace line for a failed request ("failed with status 504 Gateway Timeout") names no request, and comes once
/// per retry; the runtime's own line (`runtime::kube::requests`) names verb, resource, namespace and name once per
/// request.
const KUBE_BARE_FAILURES_OFF: &str = "kube_client::client::builder=off";

/// The filter for `debug`, refined by `rust_log` (the value of `RUST_LOG`, if any). Directives in `rust_log` win.
pub fn filter(debug: bool, rust_log: Option<&str>) -> EnvFilter {
    let level = if debug { LevelFilter::DEBUG } else { LevelFilter::INFO };
    let mut directives = vec![
        level.to_string(),
        ACTOR_SPANS_OFF.to_string(),
        KUBE_BARE_FAILURES_OFF.to_string(),
    ];
    if debug {
        directives.extend(QUIET_AT_DEBUG.iter().map(|krate| format!("{krate}=info")));
    }
    if let Some(extra) = rust_log.filter(|value| !value.trim().is_empty()) {
        directives.push(extra.to_string());
    }
    EnvFilter::builder()
        .with_default_directive(level.into())
        .parse_lossy(directives.join(","))
}

/// Installs the global subscriber. Call once, first thing in `main`; a second call is a no-op.
pub fn init(format: LogFormat, debug: bool) {
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = filter(debug, rust_log.as_deref());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_target(true)
            .try_init(),
        LogFormat::Text => builder.with_target(true).try_init(),
    };
    // Already initialised (tests that start servers several times): keep the first subscriber.
    let _ = result;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_rust_log_shape_the_filter() {
        assert_eq!(filter(false, None).max_level_hint(), Some(LevelFilter::INFO));
        assert_eq!(filter(true, None).max_level_hint(), Some(LevelFilter::DEBUG));
        let refined = filter(false, Some("capov=trace")).to_string();
        assert!(refined.contains("capov=trace"), "{refined}");
        let quiet = filter(true, Some("hyper=debug")).to_string();
        assert!(quiet.contains("hyper=debug"), "{quiet}");
    }

    #[test]
    fn actor_spans_are_off_unless_rust_log_asks_for_them() {
        use tracing_subscriber::layer::SubscriberExt;
        let actor_span_enabled = |filter: EnvFilter| {
            let subscriber = tracing_subscriber::registry().with(filter);
            tracing::subscriber::with_default(subscriber, || {
                let own = tracing::info_span!(target: "capov_actors::runtime", "pass");
                let actor = tracing::info_span!(target: "ractor::actor", "Actor");
                assert!(!own.is_disabled(), "CAPOV's own info spans stay on");
                !actor.is_disabled()
            })
        };
        assert!(!actor_span_enabled(filter(false, None)));
        assert!(!actor_span_enabled(filter(true, None)));
        assert!(actor_span_enabled(filter(false, Some("ractor=info"))));
    }

    #[test]
    fn kubes_bare_failure_lines_are_off_and_capovs_named_ones_on() {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(filter(false, None));
        tracing::subscriber::with_default(subscriber, || {
            assert!(!tracing::enabled!(target: "kube_client::client::builder", tracing::Level::ERROR));
            assert!(tracing::enabled!(target: "capov_actors::runtime::kube::requests", tracing::Level::WARN));
        });
    }
}
