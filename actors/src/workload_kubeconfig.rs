//! The workload kubeconfig (Secret `<cluster>-kubeconfig`, key `value`) is written by whoever administers the
//! workload cluster, so it is hostile input to CAPOV. A kubeconfig can tell a client to read files (`tokenFile`,
//! `client-key`, …), run programs (`exec`, `auth-provider`) or go through a proxy; handed to kube as-is, a tenant
//! could make CAPOV send its own ServiceAccount token to a server of theirs. Only inline data is accepted here:
//!
//! - clusters: `server` (https only), `certificate-authority-data` (required), `tls-server-name`, and
//!   `insecure-skip-tls-verify` only when false;
//! - users: exactly one of `token`, `client-certificate-data` + `client-key-data`, or `username` + `password`;
//! - contexts: `cluster`, `user`, `namespace`; top level: `apiVersion`, `kind`, `preferences`, `current-context`.
//!
//! Every entry is checked, not only the current context's, and any other field is rejected by name. The kube
//! `Config` is then built field by field ([`WorkloadKubeconfig::to_kube_config`]) rather than through
//! `Config::from_custom_kubeconfig`, which also reads `HTTPS_PROXY`/`NO_PROXY` from the operator's environment;
//! the required CA keeps the client off the operator's system trust store. Rejections name the entry and the
//! field and never carry a value.
//!
//! What a parse can cost is bounded too: a kubeconfig is at most [`MAX_BYTES`] (one with its CA, client certificate
//! and key inline is a few KiB), and it is parsed with a small YAML budget ([`PARSE_BUDGET_NODES`] nodes) and no
//! anchors or aliases. A few hundred bytes of nested aliases (a "billion laughs" under `preferences`) otherwise
//! expand to a million values, about 65 MiB and seconds of CPU per parse.

use std::fmt;

use base64::Engine as _;
use kube::config::AuthInfo;
use secrecy::SecretString;
use serde_json::{Map, Value};
use serde_saphyr::budget::BudgetBreach;

/// A kubeconfig that passed [`parse`]: what the client of the current context needs, nothing else.
#[derive(Debug)]
pub struct WorkloadKubeconfig {
    server: http::Uri,
    tls_server_name: Option<String>,
    /// DER certificates from `certificate-authority-data`.
    ca_der: Vec<Vec<u8>>,
    credentials: Credentials,
}

/// The user's credentials; `SecretString` keeps them out of `Debug`.
#[derive(Debug)]
enum Credentials {
    Token(SecretString),
    /// Both as written in the kubeconfig (base64 PEM), which is what kube's `AuthInfo` takes.
    ClientCertificate {
        certificate_data: String,
        key_data: SecretString,
    },
    Basic {
        username: String,
        password: SecretString,
    },
}

/// Why a kubeconfig was refused: where, which field, and what to do. Carries no value from the kubeconfig other
/// than entry and field names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// E.g. `users[0] "admin"`; None for the document itself.
    pub entry: Option<String>,
    /// The field as spelled in the kubeconfig, e.g. `tokenFile`.
    pub field: String,
    /// What is wrong and what to write instead.
    pub problem: String,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.entry {
            Some(entry) => write!(f, "{entry}: field {:?} {}", self.field, self.problem),
            None => write!(f, "field {:?} {}", self.field, self.problem),
        }
    }
}

const TOP_LEVEL: &[&str] = &[
    "apiVersion",
    "kind",
    "preferences",
    "current-context",
    "clusters",
    "contexts",
    "users",
];
const CLUSTER: &[&str] = &[
    "server",
    "certificate-authority-data",
    "tls-server-name",
    "insecure-skip-tls-verify",
];
const CONTEXT: &[&str] = &["cluster", "user", "namespace"];
const USER: &[&str] = &[
    "token",
    "client-certificate-data",
    "client-key-data",
    "username",
    "password",
];

const INLINE_CREDENTIALS: &str =
    "put the credentials inline: token, or client-certificate-data + client-key-data, or username + password";

/// Entry and field names are written by the tenant too: cut short, and always shown through `{:?}` (which
/// escapes control characters).
fn short(name: &str) -> &str {
    const MAX: usize = 63;
    name.char_indices().nth(MAX).map_or(name, |(cut, _)| &name[..cut])
}

fn quoted(name: &str) -> String {
    format!("{:?}", short(name))
}

/// What to write instead of a field that is not accepted.
fn not_allowed(field: &str) -> String {
    match field {
        "tokenFile" | "token-file" => {
            "is not allowed: it makes the client read a token from a file on CAPOV's host; put the token itself \
             in \"token\""
                .to_string()
        }
        "exec" => format!("is not allowed: it makes the client run a program on CAPOV's host; {INLINE_CREDENTIALS}"),
        "auth-provider" => {
            format!("is not allowed: auth providers read files and run programs on CAPOV's host; {INLINE_CREDENTIALS}")
        }
        "certificate-authority" | "client-certificate" | "client-key" => {
            format!("is not allowed: it names a file on CAPOV's host; put the base64 PEM in \"{field}-data\" instead")
        }
        "proxy-url" => "is not allowed: CAPOV connects to the server directly; remove it".to_string(),
        "as" | "as-uid" | "as-groups" | "as-user-extra" => {
            "is not allowed: impersonation is not supported; give the user's own credentials".to_string()
        }
        _ => "is not supported in a workload kubeconfig, which may hold only server, certificate-authority-data, \
              tls-server-name and inline credentials; remove it"
            .to_string(),
    }
}

/// The largest workload kubeconfig accepted, in bytes.
pub const MAX_BYTES: usize = 64 * 1024;
/// The most YAML nodes (mappings, sequences, scalars) a kubeconfig may hold: one with a cluster, a user and a context
/// has about 30; this allows well over a hundred contexts.
pub const PARSE_BUDGET_NODES: usize = 4096;
/// The deepest nesting a kubeconfig may have (its entries are three levels deep; `preferences` may nest a little).
const PARSE_BUDGET_DEPTH: usize = 16;

/// The refusal of a kubeconfig of `bytes` bytes, larger than [`MAX_BYTES`].
pub fn too_large(bytes: usize) -> Rejection {
    Rejection {
        entry: None,
        field: "value".into(),
        problem: format!(
            "is {bytes} bytes, more than the {MAX_BYTES} CAPOV reads: a kubeconfig with its CA, client certificate and \
             key inline is a few KiB; keep only the workload cluster's server, CA and credentials"
        ),
    }
}

/// Checks a workload kubeconfig and keeps what the current context needs; see the module documentation.
pub fn parse(value: &[u8]) -> Result<WorkloadKubeconfig, Rejection> {
    if value.len() > MAX_BYTES {
        return Err(too_large(value.len()));
    }
    let document = read_document(value)?;
    let top = document.as_object().ok_or_else(|| Rejection {
        entry: None,
        field: "value".into(),
        problem: "is not a kubeconfig: expected a YAML mapping".into(),
    })?;
    check_fields(None, top, TOP_LEVEL)?;
    let clusters = named_entries(top, "clusters", "cluster")?
        .into_iter()
        .map(|(name, location, fields)| Ok((name, cluster(&location, fields)?)))
        .collect::<Result<Vec<_>, Rejection>>()?;
    let users = named_entries(top, "users", "user")?
        .into_iter()
        .map(|(name, location, fields)| Ok((name, user(&location, fields)?)))
        .collect::<Result<Vec<_>, Rejection>>()?;
    let contexts = named_entries(top, "contexts", "context")?
        .into_iter()
        .map(|(name, location, fields)| Ok((name, context(&location, fields)?)))
        .collect::<Result<Vec<_>, Rejection>>()?;

    let top_rejection = |field: &str, problem: String| Rejection {
        entry: None,
        field: field.into(),
        problem,
    };
    let current = match top.get("current-context") {
        Some(Value::String(name)) if !name.is_empty() => name,
        _ => {
            return Err(top_rejection("current-context", "must name the context to use".into()));
        }
    };
    let Some((_, (cluster_name, user_name))) = contexts.iter().find(|(name, _)| name == current) else {
        return Err(top_rejection(
            "current-context",
            format!("names {}, which is not in contexts", quoted(current)),
        ));
    };
    let context_rejection = |field: &str, problem: String| Rejection {
        entry: Some(format!("context {}", quoted(current))),
        field: field.into(),
        problem,
    };
    let Some((_, cluster)) = clusters.into_iter().find(|(name, _)| name == cluster_name) else {
        return Err(context_rejection(
            "cluster",
            format!("names {}, which is not in clusters", quoted(cluster_name)),
        ));
    };
    let Some((_, credentials)) = users.into_iter().find(|(name, _)| name == user_name) else {
        return Err(context_rejection(
            "user",
            format!("names {}, which is not in users", quoted(user_name)),
        ));
    };
    Ok(WorkloadKubeconfig {
        server: cluster.server,
        tls_server_name: cluster.tls_server_name,
        ca_der: cluster.ca_der,
        credentials,
    })
}

impl WorkloadKubeconfig {
    /// A kube client configuration made only of this kubeconfig's data: no proxy, no files, no programs, no
    /// environment, and only the kubeconfig's CA trusted. Deadlines are set where the client is built
    /// ([`crate::runtime::kube::clients::request_client`]): a tenant's server that never answers holds nothing.
    pub fn to_kube_config(&self) -> kube::Config {
        let mut config = kube::Config::new(self.server.clone());
        config.root_cert = Some(self.ca_der.clone());
        config.root_cert_file = None;
        config.accept_invalid_certs = false;
        config.proxy_url = None;
        config.tls_server_name = self.tls_server_name.clone();
        config.auth_info = match &self.credentials {
            Credentials::Token(token) => AuthInfo {
                token: Some(token.clone()),
                ..AuthInfo::default()
            },
            Credentials::ClientCertificate {
                certificate_data,
                key_data,
            } => AuthInfo {
                client_certificate_data: Some(certificate_data.clone()),
                client_key_data: Some(key_data.clone()),
                ..AuthInfo::default()
            },
            Credentials::Basic { username, password } => AuthInfo {
                username: Some(username.clone()),
                password: Some(password.clone()),
                ..AuthInfo::default()
            },
        };
        config
    }
}

fn read_document(value: &[u8]) -> Result<Value, Rejection> {
    let rejection = |problem: String| Rejection {
        entry: None,
        field: "value".into(),
        problem,
    };
    let text = std::str::from_utf8(value).map_err(|_| rejection("is not UTF-8 text".into()))?;
    // The parser's own message may quote the offending line, which can hold a token: only its position is kept.
    let mut documents = serde_saphyr::from_multiple_with_options::<Value>(text, parse_options()).map_err(|err| {
        let at = err
            .location()
            .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
            .unwrap_or_default();
        rejection(match budget_breach(&err) {
            Some(BudgetBreach::Aliases { .. } | BudgetBreach::Anchors { .. }) => format!(
                "uses a YAML anchor or alias (&name, *name){at}, which a workload kubeconfig may not: write each value \
                 out"
            ),
            Some(_) => format!(
                "is not a kubeconfig CAPOV reads: more than {PARSE_BUDGET_NODES} YAML values or {PARSE_BUDGET_DEPTH} \
                 levels deep{at}"
            ),
            None => format!("is not a readable kubeconfig (YAML error{at})"),
        })
    })?;
    if documents.len() != 1 {
        return Err(rejection(format!(
            "holds {} YAML documents; put the kubeconfig in exactly one",
            documents.len()
        )));
    }
    Ok(documents.remove(0))
}

/// The YAML parser's options: a budget sized for a kubeconfig, no anchors or aliases (and so no merge keys).
fn parse_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_aliases: 0,
            max_anchors: 0,
            max_nodes: PARSE_BUDGET_NODES,
            max_depth: PARSE_BUDGET_DEPTH,
            max_events: 4 * PARSE_BUDGET_NODES,
            max_total_scalar_bytes: MAX_BYTES,
            max_documents: 8,
            max_merge_keys: 0,
            max_inclusion_depth: 0,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: 0,
            max_alias_expansions_per_anchor: 0,
        },
    }
}

/// The budget limit `err` reports, if it is one.
fn budget_breach(err: &serde_saphyr::Error) -> Option<&BudgetBreach> {
    match err.without_snippet() {
        serde_saphyr::Error::Budget { breach, .. } => Some(breach),
        _ => None,
    }
}

/// Rejects the first field of `fields` that is not in `allowed`, with what to do about it.
fn check_fields(entry: Option<&str>, fields: &Map<String, Value>, allowed: &[&str]) -> Result<(), Rejection> {
    match fields.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(field) => Err(Rejection {
            entry: entry.map(String::from),
            field: short(field).to_string(),
            problem: not_allowed(field),
        }),
        None => Ok(()),
    }
}

/// One entry of `clusters`, `users` or `contexts`: its name, where it is (for messages), and its inner mapping.
type NamedEntry<'v> = (String, String, &'v Map<String, Value>);

/// The entries of `list`, each with its `inner` mapping (`cluster`, `user`, `context`).
fn named_entries<'v>(top: &'v Map<String, Value>, list: &str, inner: &str) -> Result<Vec<NamedEntry<'v>>, Rejection> {
    let entries = match top.get(list) {
        None | Some(Value::Null) => return Ok(vec![]),
        Some(Value::Array(entries)) => entries,
        Some(_) => {
            return Err(Rejection {
                entry: None,
                field: list.into(),
                problem: "must be a list".into(),
            });
        }
    };
    let mut named = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let unnamed = format!("{list}[{index}]");
        let rejection = |location: &str, field: &str, problem: String| Rejection {
            entry: Some(location.to_string()),
            field: field.into(),
            problem,
        };
        let Some(entry) = entry.as_object() else {
            return Err(rejection(
                &unnamed,
                inner,
                format!("must be a mapping with name and {inner}"),
            ));
        };
        let Some(name) = entry.get("name").and_then(Value::as_str) else {
            return Err(rejection(&unnamed, "name", "must be a string".into()));
        };
        let location = format!("{unnamed} {}", quoted(name));
        check_fields(Some(&location), entry, &["name", inner])?;
        let fields = match entry.get(inner) {
            Some(Value::Object(fields)) => fields,
            _ => return Err(rejection(&location, inner, "must be a mapping".into())),
        };
        named.push((name.to_string(), location, fields));
    }
    Ok(named)
}

struct ClusterEntry {
    server: http::Uri,
    tls_server_name: Option<String>,
    ca_der: Vec<Vec<u8>>,
}

fn cluster(location: &str, fields: &Map<String, Value>) -> Result<ClusterEntry, Rejection> {
    check_fields(Some(location), fields, CLUSTER)?;
    let rejection = |field: &str, problem: &str| Rejection {
        entry: Some(location.to_string()),
        field: field.into(),
        problem: problem.into(),
    };
    match fields.get("insecure-skip-tls-verify") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(_) => {
            return Err(rejection(
                "insecure-skip-tls-verify",
                "is not allowed: the workload apiserver's certificate is always verified; put its CA in \
                 certificate-authority-data",
            ));
        }
    }
    let server = string(location, fields, "server")?
        .ok_or_else(|| rejection("server", "is missing; give the workload apiserver's https:// URL"))?;
    let server = https_url(server).ok_or_else(|| {
        rejection(
            "server",
            "must be an https:// URL with a host (and no user name or password in it)",
        )
    })?;
    let ca = string(location, fields, "certificate-authority-data")?.ok_or_else(|| {
        rejection(
            "certificate-authority-data",
            "is missing; put the workload apiserver's CA there (base64 PEM), as in the kubeconfig Cluster API writes",
        )
    })?;
    let ca_der = pem_blocks(ca, |tag| tag == "CERTIFICATE")
        .filter(|certs| !certs.is_empty())
        .ok_or_else(|| rejection("certificate-authority-data", "must be base64 of PEM certificates"))?;
    let tls_server_name = string(location, fields, "tls-server-name")?.map(String::from);
    Ok(ClusterEntry {
        server,
        tls_server_name,
        ca_der,
    })
}

fn https_url(server: &str) -> Option<http::Uri> {
    let uri: http::Uri = server.parse().ok()?;
    let authority = uri.authority()?;
    let plain_host = !authority.as_str().contains('@') && !authority.host().is_empty();
    (uri.scheme_str() == Some("https") && plain_host).then_some(uri)
}

fn user(location: &str, fields: &Map<String, Value>) -> Result<Credentials, Rejection> {
    check_fields(Some(location), fields, USER)?;
    let rejection = |field: &str, problem: String| Rejection {
        entry: Some(location.to_string()),
        field: field.into(),
        problem,
    };
    let token = string(location, fields, "token")?;
    let certificate = string(location, fields, "client-certificate-data")?;
    let key = string(location, fields, "client-key-data")?;
    let username = string(location, fields, "username")?;
    let password = string(location, fields, "password")?;

    let forms = [
        ("token", token.is_some()),
        ("client-certificate-data", certificate.is_some() || key.is_some()),
        ("username", username.is_some() || password.is_some()),
    ];
    let mut present = forms.iter().filter(|(_, present)| *present).map(|(field, _)| *field);
    let Some(first) = present.next() else {
        return Err(rejection("user", format!("has no credentials; {INLINE_CREDENTIALS}")));
    };
    if let Some(second) = present.next() {
        return Err(rejection(
            second,
            format!("is given together with {first}; keep one kind of credentials"),
        ));
    }
    match (token, certificate, key, username, password) {
        (Some(token), ..) => {
            // A token goes into an HTTP header: anything but printable ASCII would make a broken request.
            if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(rejection(
                    "token",
                    "must be the bearer token itself: non-empty, printable ASCII, no spaces or line breaks".into(),
                ));
            }
            Ok(Credentials::Token(SecretString::from(token)))
        }
        (None, Some(certificate), Some(key), ..) => {
            pem_blocks(certificate, |tag| tag == "CERTIFICATE")
                .filter(|blocks| !blocks.is_empty())
                .ok_or_else(|| rejection("client-certificate-data", "must be base64 of a PEM certificate".into()))?;
            pem_blocks(key, |tag| tag.ends_with("PRIVATE KEY") && !tag.starts_with("ENCRYPTED"))
                .filter(|blocks| blocks.len() == 1)
                .ok_or_else(|| rejection("client-key-data", "must be base64 of one PEM private key".into()))?;
            // kube decodes these itself, with no tolerance for surrounding white space.
            Ok(Credentials::ClientCertificate {
                certificate_data: certificate.trim().to_string(),
                key_data: SecretString::from(key.trim()),
            })
        }
        (None, Some(_), None, ..) => Err(rejection(
            "client-key-data",
            "is missing; client-certificate-data needs its key".into(),
        )),
        (None, None, Some(_), ..) => Err(rejection(
            "client-certificate-data",
            "is missing; client-key-data needs its certificate".into(),
        )),
        (None, None, None, Some(username), Some(password)) => Ok(Credentials::Basic {
            username: username.to_string(),
            password: SecretString::from(password),
        }),
        (None, None, None, Some(_), None) => {
            Err(rejection("password", "is missing; username needs its password".into()))
        }
        (None, None, None, None, _) => Err(rejection("username", "is missing; password needs its username".into())),
    }
}

/// (cluster, user) of a context.
fn context(location: &str, fields: &Map<String, Value>) -> Result<(String, String), Rejection> {
    check_fields(Some(location), fields, CONTEXT)?;
    string(location, fields, "namespace")?;
    let required = |field: &str| {
        string(location, fields, field)?
            .filter(|name| !name.is_empty())
            .map(String::from)
            .ok_or_else(|| Rejection {
                entry: Some(location.to_string()),
                field: field.into(),
                problem: format!("is missing; name the {field} of this context"),
            })
    };
    Ok((required("cluster")?, required("user")?))
}

/// An optional string field; any other type is rejected (without echoing the value).
fn string<'v>(location: &str, fields: &'v Map<String, Value>, field: &str) -> Result<Option<&'v str>, Rejection> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value)),
        Some(_) => Err(Rejection {
            entry: Some(location.to_string()),
            field: field.into(),
            problem: "must be a string".into(),
        }),
    }
}

/// The DER contents of the PEM blocks in base64 `data` whose tag passes `wanted`; None if `data` is not base64
/// PEM or holds a block of another kind.
fn pem_blocks(data: &str, wanted: impl Fn(&str) -> bool) -> Option<Vec<Vec<u8>>> {
    let decoded = base64::engine::general_purpose::STANDARD.decode(data.trim()).ok()?;
    let blocks = pem::parse_many(decoded).ok()?;
    blocks
        .into_iter()
        .map(|block| wanted(block.tag()).then(|| block.into_contents()))
        .collect()
}

#[cfg(test)]
mod tests;
