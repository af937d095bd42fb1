//! One test per accepted and per rejected form of a workload kubeconfig.

use base64::Engine as _;
use secrecy::ExposeSecret;

use super::*;

const TOKEN: &str = "s3cr3t-workload-token";
const SERVER: &str = "https://10.0.1.100:6443";

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A certificate and its private key, both PEM.
fn pair() -> (String, String) {
    let generated = rcgen::generate_simple_self_signed(vec!["workload".to_string()]).expect("certificate");
    (generated.cert.pem(), generated.signing_key.serialize_pem())
}

fn ca_data() -> String {
    b64(&pair().0)
}

/// `fields` as the body of a mapping nested under `- name: …\n  kind:`.
fn body(fields: &[(&str, String)]) -> String {
    fields.iter().map(|(k, v)| format!("    {k}: {v}\n")).collect()
}

fn cluster_fields() -> Vec<(&'static str, String)> {
    vec![("server", SERVER.into()), ("certificate-authority-data", ca_data())]
}

fn token_user() -> Vec<(&'static str, String)> {
    vec![("token", TOKEN.into())]
}

/// The shape Cluster API writes: one cluster, one user, one context, current-context set.
fn kubeconfig(cluster: &[(&str, String)], user: &[(&str, String)]) -> String {
    format!(
        "apiVersion: v1\nkind: Config\npreferences: {{}}\ncurrent-context: admin@workload\nclusters:\n- name: \
         workload\n  cluster:\n{}contexts:\n- name: admin@workload\n  context:\n    cluster: workload\n    user: \
         admin\nusers:\n- name: admin\n  user:\n{}",
        body(cluster),
        body(user)
    )
}

fn with(mut fields: Vec<(&'static str, String)>, extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    fields.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    fields
}

fn rejected(yaml: &str) -> Rejection {
    let rejection = parse(yaml.as_bytes()).expect_err("must be rejected");
    let message = rejection.to_string();
    assert!(!message.contains(TOKEN), "the token leaked: {message}");
    rejection
}

fn assert_rejects(yaml: &str, entry: &str, field: &str) -> Rejection {
    let rejection = rejected(yaml);
    assert_eq!(rejection.field, field, "{rejection}");
    assert_eq!(rejection.entry.as_deref(), Some(entry), "{rejection}");
    assert!(
        rejection.to_string().contains(&format!("{field:?}")),
        "the message names the field: {rejection}"
    );
    rejection
}

// ---- accepted ----

#[test]
fn a_token_kubeconfig_builds_a_config_of_only_its_data() {
    let parsed = parse(kubeconfig(&cluster_fields(), &token_user()).as_bytes()).expect("accepted");
    let config = parsed.to_kube_config();
    assert_eq!(config.cluster_url.to_string(), format!("{SERVER}/"));
    assert_eq!(
        config.root_cert.as_ref().map(Vec::len),
        Some(1),
        "only the kubeconfig's CA"
    );
    assert!(config.root_cert_file.is_none());
    assert!(config.proxy_url.is_none(), "no proxy, whatever HTTPS_PROXY says");
    assert!(!config.accept_invalid_certs);
    assert!(config.headers.is_empty());
    let auth = &config.auth_info;
    assert_eq!(auth.token.as_ref().map(|t| t.expose_secret()), Some(TOKEN));
    assert!(auth.token_file.is_none() && auth.exec.is_none() && auth.auth_provider.is_none());
    assert!(auth.client_certificate.is_none() && auth.client_key.is_none());
    assert!(auth.impersonate.is_none());
    assert!(!format!("{parsed:?}").contains(TOKEN), "Debug hides the token");
}

#[tokio::test]
async fn a_client_certificate_kubeconfig_makes_a_working_client_config() {
    let (certificate, key) = pair();
    let user = vec![
        ("client-certificate-data", b64(&certificate)),
        ("client-key-data", b64(&key)),
    ];
    let parsed = parse(kubeconfig(&cluster_fields(), &user).as_bytes()).expect("accepted");
    let config = parsed.to_kube_config();
    assert_eq!(config.auth_info.client_certificate_data, Some(b64(&certificate)));
    assert!(config.auth_info.token.is_none());
    // kube itself accepts the certificate, key and CA (no connection is made here).
    kube::Client::try_from(config).expect("client");
}

#[test]
fn username_and_password_are_accepted() {
    let user = vec![("username", "admin".into()), ("password", "pw".into())];
    let config = parse(kubeconfig(&cluster_fields(), &user).as_bytes())
        .expect("accepted")
        .to_kube_config();
    assert_eq!(config.auth_info.username.as_deref(), Some("admin"));
    assert_eq!(
        config.auth_info.password.as_ref().map(|p| p.expose_secret()),
        Some("pw")
    );
}

#[test]
fn tls_server_name_namespace_and_insecure_false_are_accepted() {
    let cluster = with(
        cluster_fields(),
        &[
            ("tls-server-name", "api.workload"),
            ("insecure-skip-tls-verify", "false"),
        ],
    );
    let yaml = kubeconfig(&cluster, &token_user()).replace("    user: admin\n", "    user: admin\n    namespace: x\n");
    let config = parse(yaml.as_bytes()).expect("accepted").to_kube_config();
    assert_eq!(config.tls_server_name.as_deref(), Some("api.workload"));
    assert!(!config.accept_invalid_certs);
}

#[test]
fn the_current_context_picks_among_several_entries() {
    // users is the last list of the document: appending adds a user.
    let yaml = kubeconfig(&cluster_fields(), &token_user())
        .replace("current-context: admin@workload", "current-context: other@workload")
        .replace(
            "contexts:\n",
            "contexts:\n- name: other@workload\n  context:\n    cluster: workload\n    user: other\n",
        )
        + "- name: other\n  user:\n    username: u\n    password: p\n";
    let config = parse(yaml.as_bytes()).expect("accepted").to_kube_config();
    assert_eq!(config.auth_info.username.as_deref(), Some("u"));
    assert!(config.auth_info.token.is_none());
}

// ---- rejected: fields that read files, run programs or redirect traffic ----

#[test]
fn token_file_is_rejected() {
    let user = with(
        token_user(),
        &[("tokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token")],
    );
    let rejection = assert_rejects(
        &kubeconfig(&cluster_fields(), &user),
        r#"users[0] "admin""#,
        "tokenFile",
    );
    assert!(rejection.problem.contains("\"token\""), "says what to use: {rejection}");
    assert!(!rejection.to_string().contains("/var/run"), "{rejection}");
}

#[test]
fn token_file_alone_is_rejected() {
    let user = vec![(
        "tokenFile",
        "/var/run/secrets/kubernetes.io/serviceaccount/token".to_string(),
    )];
    assert_rejects(
        &kubeconfig(&cluster_fields(), &user),
        r#"users[0] "admin""#,
        "tokenFile",
    );
}

#[test]
fn token_file_in_kebab_case_is_rejected() {
    let user = with(token_user(), &[("token-file", "/etc/token")]);
    assert_rejects(
        &kubeconfig(&cluster_fields(), &user),
        r#"users[0] "admin""#,
        "token-file",
    );
}

#[test]
fn exec_plugins_are_rejected() {
    let user = vec![(
        "exec",
        "{apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id]}".to_string(),
    )];
    let rejection = assert_rejects(&kubeconfig(&cluster_fields(), &user), r#"users[0] "admin""#, "exec");
    assert!(rejection.problem.contains("run a program"), "{rejection}");
}

#[test]
fn auth_providers_are_rejected() {
    let user = vec![(
        "auth-provider",
        "{name: gcp, config: {cmd-path: /bin/sh, cmd-args: -c id}}".to_string(),
    )];
    assert_rejects(
        &kubeconfig(&cluster_fields(), &user),
        r#"users[0] "admin""#,
        "auth-provider",
    );
}

#[test]
fn client_certificate_and_key_paths_are_rejected() {
    for field in ["client-certificate", "client-key"] {
        let user = with(token_user(), &[(field, "/etc/kubernetes/pki/admin.pem")]);
        let rejection = assert_rejects(&kubeconfig(&cluster_fields(), &user), r#"users[0] "admin""#, field);
        assert!(rejection.problem.contains(&format!("{field}-data")), "{rejection}");
    }
}

#[test]
fn a_certificate_authority_path_is_rejected() {
    let cluster = with(
        cluster_fields(),
        &[(
            "certificate-authority",
            "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
        )],
    );
    assert_rejects(
        &kubeconfig(&cluster, &token_user()),
        r#"clusters[0] "workload""#,
        "certificate-authority",
    );
}

#[test]
fn a_proxy_url_is_rejected() {
    let cluster = with(cluster_fields(), &[("proxy-url", "http://127.0.0.1:3128")]);
    assert_rejects(
        &kubeconfig(&cluster, &token_user()),
        r#"clusters[0] "workload""#,
        "proxy-url",
    );
}

#[test]
fn insecure_skip_tls_verify_true_is_rejected() {
    let cluster = with(cluster_fields(), &[("insecure-skip-tls-verify", "true")]);
    let rejection = assert_rejects(
        &kubeconfig(&cluster, &token_user()),
        r#"clusters[0] "workload""#,
        "insecure-skip-tls-verify",
    );
    assert!(rejection.problem.contains("certificate-authority-data"), "{rejection}");
}

#[test]
fn impersonation_is_rejected() {
    let user = with(token_user(), &[("as", "system:admin")]);
    assert_rejects(&kubeconfig(&cluster_fields(), &user), r#"users[0] "admin""#, "as");
}

#[test]
fn unknown_fields_are_rejected_at_every_level() {
    let cluster = with(cluster_fields(), &[("extensions", "[]")]);
    assert_rejects(
        &kubeconfig(&cluster, &token_user()),
        r#"clusters[0] "workload""#,
        "extensions",
    );
    let top = format!("{}extensions: []\n", kubeconfig(&cluster_fields(), &token_user()));
    let rejection = rejected(&top);
    assert_eq!((rejection.entry, rejection.field.as_str()), (None, "extensions"));
}

#[test]
fn a_hostile_entry_outside_the_current_context_is_rejected_too() {
    let yaml = format!(
        "{}- name: unused\n  user:\n    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
        kubeconfig(&cluster_fields(), &token_user())
    );
    assert_rejects(&yaml, r#"users[1] "unused""#, "tokenFile");
}

// ---- rejected: incomplete or malformed data ----

#[test]
fn a_server_must_be_https_with_a_plain_host() {
    for server in [
        "http://10.0.1.100:6443",
        "https://user:pw@10.0.1.100",
        "10.0.1.100:6443",
        "",
    ] {
        let cluster = vec![
            ("server", format!("{server:?}")),
            ("certificate-authority-data", ca_data()),
        ];
        assert_rejects(
            &kubeconfig(&cluster, &token_user()),
            r#"clusters[0] "workload""#,
            "server",
        );
    }
    let cluster = vec![("certificate-authority-data", ca_data())];
    assert_rejects(
        &kubeconfig(&cluster, &token_user()),
        r#"clusters[0] "workload""#,
        "server",
    );
}

#[test]
fn the_ca_is_required_and_must_be_pem_certificates() {
    let (_, key) = pair();
    for ca in [
        None,
        Some("not base64!".to_string()),
        Some(b64("no pem here")),
        Some(b64(&key)),
    ] {
        let mut cluster = vec![("server", SERVER.to_string())];
        cluster.extend(ca.map(|ca| ("certificate-authority-data", ca)));
        assert_rejects(
            &kubeconfig(&cluster, &token_user()),
            r#"clusters[0] "workload""#,
            "certificate-authority-data",
        );
    }
}

#[test]
fn a_certificate_needs_its_key_and_the_reverse() {
    let (certificate, key) = pair();
    let user = vec![("client-certificate-data", b64(&certificate))];
    assert_rejects(
        &kubeconfig(&cluster_fields(), &user),
        r#"users[0] "admin""#,
        "client-key-data",
    );
    let user = vec![("client-key-data", b64(&key))];
    assert_rejects(
        &kubeconfig(&cluster_fields(), &user),
        r#"users[0] "admin""#,
        "client-certificate-data",
    );
    let user = vec![
        ("client-certificate-data", b64(&certificate)),
        ("client-key-data", b64(&certificate)),
    ];
    let rejection = assert_rejects(
        &kubeconfig(&cluster_fields(), &user),
        r#"users[0] "admin""#,
        "client-key-data",
    );
    assert!(!rejection.to_string().contains(&b64(&key)));
}

#[test]
fn one_kind_of_credentials_at_a_time() {
    let (certificate, key) = pair();
    let user = with(
        token_user(),
        &[
            ("client-certificate-data", &b64(&certificate)),
            ("client-key-data", &b64(&key)),
        ],
    );
    assert_rejects(
        &kubeconfig(&cluster_fields(), &user),
        r#"users[0] "admin""#,
        "client-certificate-data",
    );
    assert_rejects(
        &kubeconfig(&cluster_fields(), &[("username", "admin".into())]),
        r#"users[0] "admin""#,
        "password",
    );
}

#[test]
fn a_user_without_credentials_is_rejected() {
    let yaml = kubeconfig(&cluster_fields(), &[]).replace("  user:\n", "  user: {}\n");
    let rejection = assert_rejects(&yaml, r#"users[0] "admin""#, "user");
    assert!(rejection.problem.contains("client-certificate-data"), "{rejection}");
}

#[test]
fn a_malformed_token_is_rejected_without_echoing_it() {
    for token in [
        format!("\"{TOKEN}\\nX-Injected: 1\""),
        "\"\"".to_string(),
        "12345".to_string(),
    ] {
        let user = vec![("token", token)];
        let rejection = assert_rejects(&kubeconfig(&cluster_fields(), &user), r#"users[0] "admin""#, "token");
        assert!(!rejection.to_string().contains("12345"), "{rejection}");
    }
}

#[test]
fn invalid_yaml_reports_only_a_position() {
    let yaml = format!("users:\n- name: admin\n  user:\n    token: {TOKEN}\n   bad: [\n");
    let rejection = rejected(&yaml);
    assert_eq!((rejection.entry.as_deref(), rejection.field.as_str()), (None, "value"));
    assert!(rejection.problem.contains("line"), "{rejection}");
    assert!(
        rejected(&format!("{}\u{0}", kubeconfig(&cluster_fields(), &token_user())))
            .problem
            .contains("YAML")
    );
    let rejection = parse(&[0xff, 0xfe, 0x00]).expect_err("not UTF-8");
    assert_eq!(rejection.field, "value");
}

#[test]
fn exactly_one_yaml_document_is_read() {
    let one = kubeconfig(&cluster_fields(), &token_user());
    let rejection = rejected(&format!("{one}---\n{one}"));
    assert!(rejection.problem.contains("2 YAML documents"), "{rejection}");
    assert!(rejected("").problem.contains("0 YAML documents"));
    assert!(rejected("- a\n- b\n").problem.contains("mapping"));
}

#[test]
fn the_current_context_and_its_references_must_exist() {
    let yaml = kubeconfig(&cluster_fields(), &token_user());
    let rejection = rejected(&yaml.replace("current-context: admin@workload\n", ""));
    assert_eq!(rejection.field, "current-context");
    let rejection = rejected(&yaml.replace("current-context: admin@workload", "current-context: nope"));
    assert!(rejection.problem.contains("\"nope\""), "{rejection}");
    let rejection = rejected(&yaml.replace("    user: admin\n", "    user: ghost\n"));
    assert_eq!(
        (rejection.entry.as_deref(), rejection.field.as_str()),
        (Some("context \"admin@workload\""), "user")
    );
    let rejection = rejected(&yaml.replace("    cluster: workload\n", "    cluster: ghost\n"));
    assert_eq!(rejection.field, "cluster");
}

#[test]
fn entry_and_field_names_are_escaped_and_cut_short() {
    let long = "x".repeat(500);
    let yaml =
        kubeconfig(&cluster_fields(), &token_user()).replace("- name: admin\n", &format!("- name: \"{long}\\n\"\n"));
    let yaml = yaml.replace("    user: admin\n", &format!("    user: \"{long}\\n\"\n"));
    let user = with(token_user(), &[("exec", "{}")]);
    let yaml = yaml.replace(&body(&token_user()), &body(&user));
    let rejection = rejected(&yaml);
    let message = rejection.to_string();
    assert!(message.len() < 400, "{message}");
    assert!(!message.contains('\n'), "{message:?}");
}

// ---- what a parse may cost ----

/// A "billion laughs" under `preferences`: `levels` levels of ten aliases each.
fn alias_bomb(levels: usize) -> String {
    let mut preferences = format!("preferences:\n  l0: &a0 [{}]\n", ["x"; 10].join(","));
    for level in 1..levels {
        let aliases = vec![format!("*a{}", level - 1); 10].join(",");
        preferences.push_str(&format!("  l{level}: &a{level} [{aliases}]\n"));
    }
    kubeconfig(&cluster_fields(), &token_user()).replace("preferences: {}\n", &preferences)
}

#[test]
fn a_kubeconfig_past_the_size_cap_is_rejected_with_its_size_and_the_cap() {
    let padding = format!("preferences:\n  pad: \"{}\"\n", "p".repeat(MAX_BYTES));
    let fat = kubeconfig(&cluster_fields(), &token_user()).replace("preferences: {}\n", &padding);
    let rejection = rejected(&fat);
    assert_eq!((rejection.entry.as_deref(), rejection.field.as_str()), (None, "value"));
    let message = rejection.to_string();
    assert!(
        message.contains(&format!("is {} bytes, more than the 65536", fat.len())),
        "{message}"
    );
    assert_eq!(too_large(fat.len()), rejection);
    // Just under the cap, the same kubeconfig is read.
    let room = MAX_BYTES - kubeconfig(&cluster_fields(), &token_user()).len() - 40;
    let padding = format!("preferences:\n  pad: \"{}\"\n", "p".repeat(room));
    let fits = kubeconfig(&cluster_fields(), &token_user()).replace("preferences: {}\n", &padding);
    assert!(fits.len() <= MAX_BYTES);
    parse(fits.as_bytes()).expect("a kubeconfig under the cap");
}

#[test]
fn anchors_and_aliases_are_rejected_before_they_expand() {
    let started = std::time::Instant::now();
    for levels in [1, 6, 12] {
        let rejection = rejected(&alias_bomb(levels));
        assert_eq!(rejection.field, "value", "{rejection}");
        assert!(
            rejection.to_string().contains("uses a YAML anchor or alias"),
            "{levels}: {rejection}"
        );
    }
    // An alias alone, of an anchor that names a harmless value.
    let alias = kubeconfig(&cluster_fields(), &token_user()).replace("preferences: {}\n", "preferences: &p {}\n")
        + "extensions: *p\n";
    let rejection = rejected(&alias);
    assert!(rejection.to_string().contains("anchor or alias"), "{rejection}");
    // Refused at the first anchor: no expansion ran (at the default budget the 6-level bomb took seconds).
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_kubeconfig_of_too_many_values_is_rejected_by_the_budget() {
    let many = format!("preferences:\n  many: [{}]\n", vec!["1"; PARSE_BUDGET_NODES].join(","));
    let rejection = rejected(&kubeconfig(&cluster_fields(), &token_user()).replace("preferences: {}\n", &many));
    assert!(
        rejection
            .to_string()
            .contains(&format!("more than {PARSE_BUDGET_NODES} YAML values")),
        "{rejection}"
    );
    let deep = format!("preferences:\n  deep: {}{}\n", "[".repeat(40), "]".repeat(40));
    let rejection = rejected(&kubeconfig(&cluster_fields(), &token_user()).replace("preferences: {}\n", &deep));
    assert!(rejection.to_string().contains("levels deep"), "{rejection}");
}
