//! The `manager` command line: every flag also read from the environment as `CAPOV_<FLAG_IN_UPPER_SNAKE>` (the flag
//! wins), parsed and checked by clap, then turned into the validated [`Config`] the rest of the program uses.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, Subcommand};
use serde::Serialize;

/// Namespace of the credential Secrets and the leader-election Lease when neither `--credentials-namespace` nor
/// `POD_NAMESPACE` names one.
pub const DEFAULT_CREDENTIALS_NAMESPACE: &str = "capov-system";
/// Name of the leader-election Lease when `--leader-election-id` is not given.
pub const DEFAULT_LEADER_ELECTION_ID: &str = "capov-controller-manager";

const ABOUT: &str = "CAPOV, the Cluster API infrastructure provider for oVirt: the operator process.";
const LONG_ABOUT: &str = "CAPOV, the Cluster API infrastructure provider for oVirt: the operator process.

Runs the controllers for OVirtProvider, OVirtCluster and OVirtMachine, serves Prometheus metrics over HTTPS \
(bearer token checked with a TokenReview and a SubjectAccessReview) and health probes over plain HTTP.

Every flag can also be set through the environment variable named in brackets; a flag on the command line wins \
over its variable. Boolean flags accept `--flag`, `--flag=true` and `--flag=false`.";
const AFTER_HELP: &str = "Examples:
  manager --metrics-bind-address=:8443 --leader-elect
  manager --debug=true --log-format=text --kubeconfig=$HOME/.kube/config --metrics-secure=false
  manager check-engine ovirt-prod";

/// The parsed command line (and environment). Build a [`Config`] from it with [`Config::from_cli`].
#[derive(Parser, Debug, Clone)]
#[command(name = "manager", version, about = ABOUT, long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct Cli {
    /// Address of the metrics endpoint (`/metrics`), `[host]:port`; `0` disables it. An empty host listens on every
    /// interface.
    #[arg(long, env = "CAPOV_METRICS_BIND_ADDRESS", default_value = ":8443", value_name = "ADDRESS",
          value_parser = |v: &str| parse_bind_address(or_default(v, ":8443")))]
    pub metrics_bind_address: BindAddress,

    /// Serve metrics over HTTPS and require a bearer token that a TokenReview authenticates and a
    /// SubjectAccessReview allows to `get` the path. `false` serves plain HTTP without authentication (only for
    /// local debugging).
    #[arg(long, env = "CAPOV_METRICS_SECURE", default_value = "true", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set,
          value_parser = |v: &str| parse_bool(or_default(v, "true")))]
    pub metrics_secure: bool,

    /// Directory holding `tls.crt` and `tls.key` for the metrics endpoint (re-read when they change). Without it a
    /// self-signed certificate is generated at start.
    #[arg(long, env = "CAPOV_METRICS_CERT_DIR", value_name = "DIR")]
    pub metrics_cert_dir: Option<String>,

    /// Address of the health probes (`/healthz`, `/readyz`, plain HTTP), `[host]:port`; `0` disables them.
    #[arg(long, env = "CAPOV_HEALTH_PROBE_BIND_ADDRESS", default_value = ":8081", value_name = "ADDRESS",
          value_parser = |v: &str| parse_bind_address(or_default(v, ":8081")))]
    pub health_probe_bind_address: BindAddress,

    /// Take a Lease in the credentials namespace before doing any work, so that only one replica acts. The chart
    /// sets it.
    #[arg(long, env = "CAPOV_LEADER_ELECT", default_value = "false", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set,
          value_parser = |v: &str| parse_bool(or_default(v, "false")))]
    pub leader_elect: bool,

    /// Name of the leader-election Lease.
    #[arg(long, env = "CAPOV_LEADER_ELECTION_ID", default_value = DEFAULT_LEADER_ELECTION_ID, value_name = "NAME",
          value_parser = |v: &str| parse_dns_subdomain(or_default(v, DEFAULT_LEADER_ELECTION_ID)))]
    pub leader_election_id: String,

    /// Feature gates, `key=bool,...`: disk-keep-template-name (default true), disk-add-vm-name (default false),
    /// disk-clone (default false), disk-detach-when-node-gone (default false). Unknown keys and invalid values are
    /// ignored (logged at debug level).
    #[arg(long, env = "CAPOV_FEATURE_GATES", default_value = "", value_name = "GATES")]
    pub feature_gates: String,

    /// Log at debug level (`RUST_LOG` may refine the filter further).
    #[arg(long, env = "CAPOV_DEBUG", default_value = "false", value_name = "BOOL", global = true,
          num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set,
          value_parser = |v: &str| parse_bool(or_default(v, "false")))]
    pub debug: bool,

    /// How many OVirtMachines are reconciled at the same time.
    #[arg(long, env = "CAPOV_MAX_CONCURRENT_RECONCILES", default_value = "10", value_name = "N",
          value_parser = |v: &str| parse_count(or_default(v, "10"), 10_000))]
    pub max_concurrent_reconciles: u32,

    /// Namespace whose OVirtClusters and OVirtMachines this instance handles; empty (the default) means all
    /// namespaces, as clusterctl's `--namespace=""`.
    #[arg(long, env = "CAPOV_NAMESPACE", default_value = "", value_name = "NAMESPACE",
          value_parser = parse_optional_namespace)]
    pub namespace: String,

    /// Namespace of the credential Secrets and of the leader-election Lease. Default: the `POD_NAMESPACE`
    /// environment variable, else `capov-system`.
    #[arg(long, env = "CAPOV_CREDENTIALS_NAMESPACE", value_name = "NAMESPACE",
          value_parser = parse_optional_namespace)]
    pub credentials_namespace: Option<String>,

    /// Handle only objects whose label `cluster.x-k8s.io/watch-filter` has this value; empty handles every object.
    #[arg(long, env = "CAPOV_WATCH_FILTER", default_value = "", value_name = "VALUE",
          value_parser = parse_watch_filter)]
    pub watch_filter: String,

    /// Identity of this management cluster, recorded on each OVirtProvider that has none and named by the ownership
    /// markers of its VMs. Empty: the UID of the `kube-system` namespace. `clusterctl move` needs no value: the
    /// provider carries the id its VMs were marked with.
    #[arg(long, env = "CAPOV_MANAGEMENT_CLUSTER_ID", default_value = "", value_name = "ID",
          value_parser = parse_management_cluster_id)]
    pub management_cluster_id: String,

    /// Let workload kubeconfigs point at loopback and link-local addresses and at the management cluster's own
    /// apiserver and service network, which are refused otherwise. For tests and demos whose workload apiservers run
    /// on the same host; never in production.
    #[arg(long, env = "CAPOV_ALLOW_INTERNAL_WORKLOAD_SERVERS", default_value = "false", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set,
          value_parser = |v: &str| parse_bool(or_default(v, "false")))]
    pub allow_internal_workload_servers: bool,

    /// How often every object is reconciled even without a change, e.g. `10m`, `1h30m`, `90s`.
    #[arg(long, env = "CAPOV_SYNC_PERIOD", default_value = "10m", value_name = "DURATION",
          value_parser = |v: &str| parse_duration(or_default(v, "10m")))]
    pub sync_period: Duration,

    /// Requests per second to each oVirt engine (sustained rate).
    #[arg(long, env = "CAPOV_OVIRT_QPS", default_value = "10", value_name = "QPS", value_parser = |v: &str| parse_qps(or_default(v, "10")))]
    pub ovirt_qps: f64,

    /// Requests to each oVirt engine that may be sent at once above the sustained rate.
    #[arg(long, env = "CAPOV_OVIRT_BURST", default_value = "20", value_name = "N",
          value_parser = |v: &str| parse_count(or_default(v, "20"), 100_000))]
    pub ovirt_burst: u32,

    /// Kubeconfig of the management cluster. Default: the in-cluster service account, else `KUBECONFIG`, else
    /// `~/.kube/config`.
    #[arg(long, env = "CAPOV_KUBECONFIG", value_name = "FILE", global = true)]
    pub kubeconfig: Option<String>,

    /// Log line format: `json` or `text`.
    #[arg(long, env = "CAPOV_LOG_FORMAT", default_value = "json", value_name = "FORMAT", global = true,
          value_parser = |v: &str| parse_log_format(or_default(v, "json")))]
    pub log_format: LogFormat,

    /// Print the effective configuration (flags and environment, validated) as JSON and exit. (No environment
    /// variable: a forgotten one would stop the operator from starting.)
    #[arg(long, default_value = "false", value_name = "BOOL",
          num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set,
          value_parser = parse_bool)]
    pub print_config: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What to do instead of running the operator.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Command {
    /// Diagnose the connection to the engine of one OVirtProvider (DNS, TLS, authentication, API version) with the
    /// operator's own client and credentials, and exit non-zero on the first failing step.
    CheckEngine {
        /// Name of the OVirtProvider (cluster-scoped).
        provider: String,
    },
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One JSON object per line (the default, for log collectors).
    Json,
    /// Human-readable text.
    Text,
}

/// A listen address or `0` (disabled), as the bind-address flags take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddress(pub Option<ListenAddress>);

/// A TCP address to listen on. `host: None` listens on every interface (IPv6 and IPv4 where available).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddress {
    pub host: Option<IpAddr>,
    pub port: u16,
}

impl fmt::Display for ListenAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.host {
            None => write!(f, ":{}", self.port),
            Some(IpAddr::V6(ip)) => write!(f, "[{ip}]:{}", self.port),
            Some(IpAddr::V4(ip)) => write!(f, "{ip}:{}", self.port),
        }
    }
}

impl Serialize for ListenAddress {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The validated configuration of one operator process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    /// Where `/metrics` listens; `None` = disabled.
    pub metrics_bind_address: Option<ListenAddress>,
    /// HTTPS + TokenReview/SubjectAccessReview (true) or plain HTTP without authentication (false).
    pub metrics_secure: bool,
    /// `tls.crt` + `tls.key` for the metrics endpoint; `None` = self-signed certificate generated at start.
    pub metrics_cert_dir: Option<PathBuf>,
    /// Where `/healthz` and `/readyz` listen; `None` = disabled.
    pub health_probe_bind_address: Option<ListenAddress>,
    pub leader_elect: bool,
    /// Name of the Lease (in `credentials_namespace`).
    pub leader_election_id: String,
    /// The raw `--feature-gates` value; parsed by `capov_core::policy::feature_gates`.
    pub feature_gates: String,
    pub debug: bool,
    pub max_concurrent_reconciles: u32,
    /// Namespace to watch; `None` = all namespaces.
    pub namespace: Option<String>,
    /// Namespace of the credential Secrets and the Lease.
    pub credentials_namespace: String,
    /// Value of the `cluster.x-k8s.io/watch-filter` label to select; `None` = every object.
    pub watch_filter: Option<String>,
    /// `None` = the UID of the `kube-system` namespace.
    pub management_cluster_id: Option<String>,
    /// Workload kubeconfigs may point at loopback, link-local and the management cluster's apiserver and services.
    pub allow_internal_workload_servers: bool,
    #[serde(serialize_with = "serialize_duration")]
    pub sync_period: Duration,
    pub ovirt_qps: f64,
    pub ovirt_burst: u32,
    /// `None` = in-cluster config, else `KUBECONFIG`, else `~/.kube/config` (kube's inference order).
    pub kubeconfig: Option<PathBuf>,
    pub log_format: LogFormat,
    /// A subcommand to run instead of the operator.
    pub command: Option<Command>,
    /// `--print-config`: print this configuration and exit.
    #[serde(skip)]
    pub print_config: bool,
}

impl Config {
    /// Builds the configuration from the command line, `pod_namespace` being the `POD_NAMESPACE` environment
    /// variable (the default of `--credentials-namespace`).
    pub fn from_cli(cli: Cli, pod_namespace: Option<&str>) -> Result<Config, String> {
        // An empty value (e.g. `value: ""` in a manifest) counts as not set.
        let non_empty = |value: Option<String>| value.filter(|value| !value.is_empty());
        let credentials_namespace = match (non_empty(cli.credentials_namespace), pod_namespace) {
            (Some(namespace), _) => namespace,
            (None, Some(namespace)) if !namespace.is_empty() => {
                parse_namespace(namespace).map_err(|err| format!("environment variable POD_NAMESPACE: {err}"))?
            }
            (None, _) => DEFAULT_CREDENTIALS_NAMESPACE.to_string(),
        };
        Ok(Config {
            metrics_bind_address: cli.metrics_bind_address.0,
            metrics_secure: cli.metrics_secure,
            metrics_cert_dir: non_empty(cli.metrics_cert_dir).map(PathBuf::from),
            health_probe_bind_address: cli.health_probe_bind_address.0,
            leader_elect: cli.leader_elect,
            leader_election_id: cli.leader_election_id,
            feature_gates: cli.feature_gates,
            debug: cli.debug,
            max_concurrent_reconciles: cli.max_concurrent_reconciles,
            namespace: Some(cli.namespace).filter(|namespace| !namespace.is_empty()),
            credentials_namespace,
            watch_filter: Some(cli.watch_filter).filter(|value| !value.is_empty()),
            management_cluster_id: Some(cli.management_cluster_id).filter(|value| !value.is_empty()),
            allow_internal_workload_servers: cli.allow_internal_workload_servers,
            sync_period: cli.sync_period,
            ovirt_qps: cli.ovirt_qps,
            ovirt_burst: cli.ovirt_burst,
            kubeconfig: non_empty(cli.kubeconfig).map(PathBuf::from),
            log_format: cli.log_format,
            command: cli.command,
            print_config: cli.print_config,
        })
    }

    /// Parses `args` (the first item is the program name) and the process environment into a configuration.
    /// Help and version requests come back as the `clap::Error` that prints them.
    pub fn parse_from<I, T>(args: I) -> Result<Config, ParseError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let cli = Cli::try_parse_from(args).map_err(ParseError::Clap)?;
        let pod_namespace = std::env::var("POD_NAMESPACE").ok();
        Config::from_cli(cli, pod_namespace.as_deref()).map_err(ParseError::Invalid)
    }
}

/// Why the command line gave no configuration.
#[derive(Debug)]
pub enum ParseError {
    /// A clap error, or a help/version request (see [`clap::Error::use_stderr`]).
    Clap(clap::Error),
    /// A value that is well-formed but not acceptable.
    Invalid(String),
}

impl ParseError {
    /// True for `--help` and `--version`: print [`ParseError::message`] to stdout and exit 0.
    pub fn is_informational(&self) -> bool {
        matches!(self, ParseError::Clap(err) if !err.use_stderr())
    }

    /// For help/version: the full text; for an error: one line saying what is wrong.
    pub fn message(&self) -> String {
        match self {
            ParseError::Clap(err) if !err.use_stderr() => err.to_string(),
            ParseError::Clap(err) => {
                let text = err.to_string();
                let first = text
                    .lines()
                    .map(str::trim)
                    .find(|line| !line.is_empty())
                    .unwrap_or("invalid arguments");
                let first = first.strip_prefix("error: ").unwrap_or(first);
                format!("{first} (see --help)")
            }
            ParseError::Invalid(reason) => reason.clone(),
        }
    }
}

fn serialize_duration<S: serde::Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_duration(*duration))
}

/// Renders a duration the way `--sync-period` takes it (`10m0s`, `1h30m0s`, `500ms`).
pub fn format_duration(duration: Duration) -> String {
    let total_ms = duration.as_millis();
    if total_ms < 1000 {
        return format!("{total_ms}ms");
    }
    let (hours, rest) = (total_ms / 3_600_000, total_ms % 3_600_000);
    let (minutes, rest) = (rest / 60_000, rest % 60_000);
    let (seconds, millis) = (rest / 1000, rest % 1000);
    let mut out = String::new();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    if millis > 0 {
        out.push_str(&format!("{seconds}.{millis:03}s"));
    } else {
        out.push_str(&format!("{seconds}s"));
    }
    out
}

/// An empty value — an environment variable set to `""`, as manifests often have — means the flag's default.
fn or_default<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.trim().is_empty() { default } else { value }
}

fn parse_count(value: &str, max: u32) -> Result<u32, String> {
    match value.trim().parse::<u32>() {
        Ok(count) if (1..=max).contains(&count) => Ok(count),
        _ => Err(format!("expected a whole number from 1 to {max}")),
    }
}

fn parse_log_format(value: &str) -> Result<LogFormat, String> {
    match value.trim() {
        "json" => Ok(LogFormat::Json),
        "text" => Ok(LogFormat::Text),
        _ => Err("expected json or text".into()),
    }
}

/// Go's `strconv.ParseBool` spellings, as the documents' `--debug=true`.
pub fn parse_bool(value: &str) -> Result<bool, String> {
    match value {
        "true" | "True" | "TRUE" | "t" | "T" | "1" => Ok(true),
        "false" | "False" | "FALSE" | "f" | "F" | "0" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

/// `[host]:port` or `0` (disabled). The host is an IP address (IPv6 in brackets), `localhost`, or empty for every
/// interface.
pub fn parse_bind_address(value: &str) -> Result<BindAddress, String> {
    parse_listen_address(value).map(BindAddress)
}

fn parse_listen_address(value: &str) -> Result<Option<ListenAddress>, String> {
    let value = value.trim();
    if value == "0" {
        return Ok(None);
    }
    let Some((host, port)) = value.rsplit_once(':') else {
        return Err("expected [host]:port (e.g. :8443 or 127.0.0.1:8443) or 0 to disable".into());
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("port {port:?} is not a number from 0 to 65535"))?;
    let host = match host {
        "" => None,
        "localhost" => Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        _ => {
            let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
            let ip: IpAddr = bare
                .parse()
                .map_err(|_| format!("host {host:?} is not an IP address, localhost or empty"))?;
            if ip.is_ipv6() && !host.starts_with('[') {
                return Err(format!(
                    "IPv6 host {host:?} must be written in brackets, e.g. [::1]:8443"
                ));
            }
            Some(ip)
        }
    };
    Ok(Some(ListenAddress { host, port }))
}

/// A Go-style duration: a sequence of `<number><unit>` with units `h`, `m`, `s`, `ms`, e.g. `10m`, `1h30m`,
/// `1.5s`. Must be positive.
pub fn parse_duration(value: &str) -> Result<Duration, String> {
    const HINT: &str = "expected a duration such as 10m, 1h30m, 90s or 500ms";
    let mut rest = value.trim();
    if rest.is_empty() {
        return Err(HINT.into());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(HINT.into());
        }
        let number: f64 = rest[..number_len].parse().map_err(|_| HINT.to_string())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return Err(HINT.into()),
        };
        rest = &rest[unit_len..];
        total += number * seconds_per_unit;
    }
    if !(total.is_finite() && total > 0.0 && total < 366.0 * 86_400.0) {
        return Err("must be greater than zero and less than a year".into());
    }
    Ok(Duration::from_secs_f64(total))
}

fn parse_qps(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(qps) if qps.is_finite() && qps > 0.0 && qps <= 100_000.0 => Ok(qps),
        _ => Err("expected a number of requests per second greater than 0 (e.g. 10 or 0.5)".into()),
    }
}

/// A Kubernetes namespace name (RFC 1123 label).
pub fn parse_namespace(value: &str) -> Result<String, String> {
    if is_dns_label(value) {
        Ok(value.to_string())
    } else {
        Err(format!(
            "{value:?} is not a namespace name (lowercase letters, digits and '-', at most 63, starting and ending \
             with a letter or digit)"
        ))
    }
}

fn parse_optional_namespace(value: &str) -> Result<String, String> {
    if value.is_empty() {
        Ok(String::new())
    } else {
        parse_namespace(value)
    }
}

fn parse_dns_subdomain(value: &str) -> Result<String, String> {
    if !value.is_empty() && value.len() <= 253 && value.split('.').all(is_dns_label) {
        Ok(value.to_string())
    } else {
        Err(format!(
            "{value:?} is not a valid object name (lowercase letters, digits, '-' and '.', at most 253)"
        ))
    }
}

fn parse_management_cluster_id(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(String::new());
    }
    capov_core::trust::identity::validate_management_cluster_id(value).map(|()| value.to_string())
}

fn parse_watch_filter(value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Ok(String::new());
    }
    let bytes = value.as_bytes();
    let valid = value.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if valid {
        Ok(value.to_string())
    } else {
        Err(format!(
            "{value:?} is not a label value (letters, digits, '-', '_' and '.', at most 63, starting and ending \
             with a letter or digit)"
        ))
    }
}

fn is_dns_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    fn parse(args: &[&str]) -> Result<Config, ParseError> {
        let cli =
            Cli::try_parse_from(std::iter::once("manager").chain(args.iter().copied())).map_err(ParseError::Clap)?;
        Config::from_cli(cli, None).map_err(ParseError::Invalid)
    }

    fn error(args: &[&str]) -> String {
        match parse(args) {
            Ok(config) => panic!("{args:?} parsed: {config:?}"),
            Err(err) => {
                assert!(!err.is_informational());
                err.message()
            }
        }
    }

    #[test]
    fn defaults_follow_the_spec() {
        let config = parse(&[]).unwrap();
        assert_eq!(
            config.metrics_bind_address,
            Some(ListenAddress { host: None, port: 8443 })
        );
        assert!(config.metrics_secure);
        assert_eq!(config.metrics_cert_dir, None);
        assert_eq!(
            config.health_probe_bind_address,
            Some(ListenAddress { host: None, port: 8081 })
        );
        assert!(!config.leader_elect);
        assert_eq!(config.leader_election_id, DEFAULT_LEADER_ELECTION_ID);
        assert_eq!(config.feature_gates, "");
        assert!(!config.debug);
        assert_eq!(config.max_concurrent_reconciles, 10);
        assert_eq!(config.namespace, None);
        assert_eq!(config.credentials_namespace, "capov-system");
        assert_eq!(config.watch_filter, None);
        assert_eq!(config.management_cluster_id, None);
        assert_eq!(config.sync_period, Duration::from_secs(600));
        assert_eq!(config.ovirt_qps, 10.0);
        assert_eq!(config.ovirt_burst, 20);
        assert_eq!(config.kubeconfig, None);
        assert_eq!(config.log_format, LogFormat::Json);
        assert_eq!(config.command, None);
        assert!(!config.print_config);
    }

    #[test]
    fn the_chart_command_line_parses() {
        let config = parse(&[
            "--metrics-bind-address=:8443",
            "--leader-elect",
            "--feature-gates=disk-keep-template-name=true,disk-add-vm-name=false",
        ])
        .unwrap();
        assert!(config.leader_elect);
        assert_eq!(
            config.feature_gates,
            "disk-keep-template-name=true,disk-add-vm-name=false"
        );
    }

    #[test]
    fn boolean_flags_take_bare_and_explicit_forms() {
        assert!(parse(&["--debug"]).unwrap().debug);
        assert!(parse(&["--debug=true"]).unwrap().debug);
        assert!(!parse(&["--debug=false"]).unwrap().debug);
        assert!(!parse(&["--metrics-secure=false"]).unwrap().metrics_secure);
        assert!(parse(&["--metrics-secure"]).unwrap().metrics_secure);
        assert!(!parse(&["--leader-elect=0"]).unwrap().leader_elect);
        assert!(parse(&["--leader-elect=True"]).unwrap().leader_elect);
        // A separate word after a bare boolean flag is not its value (it is taken for a subcommand and refused).
        assert!(error(&["--debug", "false"]).contains("'false'"));
        assert!(error(&["--debug=yes"]).contains("expected true or false"));
    }

    #[test]
    fn namespace_empty_means_all_namespaces() {
        assert_eq!(parse(&["--namespace="]).unwrap().namespace, None);
        assert_eq!(parse(&["--namespace", ""]).unwrap().namespace, None);
        assert_eq!(
            parse(&["--namespace=team-a"]).unwrap().namespace.as_deref(),
            Some("team-a")
        );
        assert!(error(&["--namespace=Team_A"]).contains("not a namespace name"));
    }

    #[test]
    fn credentials_namespace_defaults_to_pod_namespace() {
        let cli = Cli::try_parse_from(["manager"]).unwrap();
        let config = Config::from_cli(cli.clone(), Some("ops")).unwrap();
        assert_eq!(config.credentials_namespace, "ops");
        assert_eq!(
            Config::from_cli(cli.clone(), Some("")).unwrap().credentials_namespace,
            "capov-system"
        );
        assert!(
            Config::from_cli(cli, Some("Bad Namespace"))
                .unwrap_err()
                .contains("POD_NAMESPACE")
        );
        let cli = Cli::try_parse_from(["manager", "--credentials-namespace=creds"]).unwrap();
        assert_eq!(
            Config::from_cli(cli, Some("ops")).unwrap().credentials_namespace,
            "creds"
        );
    }

    #[test]
    fn bind_addresses() {
        let parse_bind = parse_listen_address;
        assert_eq!(parse_bind("0"), Ok(None));
        assert_eq!(parse_bind(":0"), Ok(Some(ListenAddress { host: None, port: 0 })));
        let local = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(
            parse_bind("127.0.0.1:9000"),
            Ok(Some(ListenAddress {
                host: local,
                port: 9000
            }))
        );
        assert_eq!(
            parse_bind("localhost:9000"),
            Ok(Some(ListenAddress {
                host: local,
                port: 9000
            }))
        );
        let v6 = Some(IpAddr::V6(Ipv6Addr::LOCALHOST));
        assert_eq!(
            parse_bind("[::1]:9000"),
            Ok(Some(ListenAddress { host: v6, port: 9000 }))
        );
        assert!(parse_bind("::1:9000").is_err());
        assert!(parse_bind("8443").is_err());
        assert!(parse_bind(":99999").is_err());
        assert!(parse_bind("example.com:80").is_err());
        assert_eq!(parse_bind("[::1]:9000").unwrap().unwrap().to_string(), "[::1]:9000");
        assert_eq!(parse(&["--metrics-bind-address=0"]).unwrap().metrics_bind_address, None);
        assert!(error(&["--health-probe-bind-address=nowhere"]).contains("--health-probe-bind-address"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        for bad in ["", "10", "m", "10x", "0s", "-1m", "1y"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(format_duration(Duration::from_secs(600)), "10m0s");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m0s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.500s");
        assert_eq!(
            parse(&["--sync-period=1h"]).unwrap().sync_period,
            Duration::from_secs(3600)
        );
    }

    #[test]
    fn numbers_and_enums() {
        let config = parse(&["--max-concurrent-reconciles=3", "--ovirt-qps=0.5", "--ovirt-burst=1"]).unwrap();
        assert_eq!(
            (config.max_concurrent_reconciles, config.ovirt_qps, config.ovirt_burst),
            (3, 0.5, 1)
        );
        assert_eq!(parse(&["--log-format=text"]).unwrap().log_format, LogFormat::Text);
        assert!(error(&["--max-concurrent-reconciles=0"]).contains("--max-concurrent-reconciles"));
        assert!(error(&["--ovirt-qps=0"]).contains("greater than 0"));
        assert!(error(&["--ovirt-qps=NaN"]).contains("--ovirt-qps"));
        assert!(error(&["--ovirt-burst=-1"]).contains("--ovirt-burst"));
        assert!(error(&["--log-format=xml"]).contains("--log-format"));
        assert!(error(&["--sync-period=soon"]).contains("expected a duration"));
    }

    #[test]
    fn names_and_labels() {
        assert_eq!(
            parse(&["--watch-filter=team-a"]).unwrap().watch_filter.as_deref(),
            Some("team-a")
        );
        assert!(error(&["--watch-filter=a b"]).contains("not a label value"));
        assert_eq!(
            parse(&["--leader-election-id=capov.example.com"])
                .unwrap()
                .leader_election_id,
            "capov.example.com"
        );
        assert!(error(&["--leader-election-id=Capov"]).contains("not a valid object name"));
    }

    #[test]
    fn empty_values_mean_the_default() {
        let config = parse(&[
            "--metrics-secure=",
            "--debug=",
            "--sync-period=",
            "--ovirt-burst=",
            "--log-format=",
            "--metrics-bind-address=",
            "--credentials-namespace=",
            "--kubeconfig=",
            "--metrics-cert-dir=",
        ])
        .unwrap();
        assert_eq!(config, parse(&[]).unwrap());
    }

    #[test]
    fn errors_are_one_line() {
        for args in [
            &["--no-such-flag"][..],
            &["--sync-period=x"],
            &["--debug=maybe"],
            &["stray"],
        ] {
            let message = error(args);
            assert_eq!(message.lines().count(), 1, "{message}");
            assert!(message.ends_with("(see --help)"), "{message}");
        }
    }

    #[test]
    fn help_and_version_are_informational() {
        let help = parse(&["--help"]).unwrap_err();
        assert!(help.is_informational());
        let text = help.message();
        for flag in [
            "--metrics-bind-address",
            "--credentials-namespace",
            "CAPOV_SYNC_PERIOD",
            "check-engine",
        ] {
            assert!(text.contains(flag), "help lacks {flag}");
        }
        assert!(parse(&["--version"]).unwrap_err().is_informational());
    }

    #[test]
    fn check_engine_subcommand() {
        let config = parse(&["--debug", "check-engine", "ovirt-prod", "--log-format=text"]).unwrap();
        assert_eq!(
            config.command,
            Some(Command::CheckEngine {
                provider: "ovirt-prod".into()
            })
        );
        assert!(config.debug);
        assert_eq!(config.log_format, LogFormat::Text);
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn management_cluster_id_is_one_short_word() {
        assert_eq!(
            parse(&["--management-cluster-id=prod-mgmt"])
                .unwrap()
                .management_cluster_id
                .as_deref(),
            Some("prod-mgmt")
        );
        assert!(parse(&["--management-cluster-id=two words"]).is_err());
        assert!(parse(&[&format!("--management-cluster-id={}", "x".repeat(65))]).is_err());
    }
}
