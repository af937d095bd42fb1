//! Bootstrap data that reaches the guest intact through the engine's initialization (docs/decisions.md,
//! "Bootstrap data through oVirt's cloud-init and Ignition").
//!
//! What the engine does with `initialization.custom_script` (ovirt-engine, docs/simulator-fidelity.md):
//!
//! * It delivers cloud-init only to VMs whose OS type uses cloud-init and Ignition only to Ignition OS types
//!   (osinfo `vmInitType`: `rhcos_*` Ignition, `windows_*` Sysprep, every other OS cloud-init). Otherwise the start
//!   still succeeds and the guest gets nothing: a node that never joins. [`check_format_fits`] refuses that before
//!   a VM is created.
//! * cloud-init: the user-data is `#cloud-config`, the engine's own keys (`chpasswd: {expire: false}`,
//!   `disable_root: false`, `output`, a `runcmd`, `ssh_pwauth: true`) and then the custom script as is. CAPI's
//!   kubeadm data starts with `## template: jinja`; behind the engine's lines cloud-init no longer sees that header,
//!   so `{{ ds.meta_data.local_hostname }}` reaches kubeadm unrendered. [`cloud_config_for_engine`] renders the host
//!   name variables itself (the engine gives the guest the host name CAPOV sets), drops the header, refuses any other
//!   jinja, and restores the keys the engine switches on; its keys come after the engine's, and cloud-init's YAML
//!   loader keeps the last of duplicate keys, so the data's own `runcmd` (and CAPOV's `ssh_pwauth`) win.
//! * Ignition: the engine stamps `ignition.version` 2.3.0 when none is given (which Ignition 2.x, spec 3 only,
//!   refuses) and appends an `/etc/hostname` file in the spec-2 form (`filesystem: root`) unless one is there.
//!   [`ignition_for_engine`] requires a version and, for spec 3, adds the host name file in the spec-3 form.
//!
//! Bootstrap data is a Secret: nothing here puts any of it into a message, only line numbers and the names of the
//! jinja variables CAPOV knows.

use crate::conditions::reasons;

/// How the bootstrap data reaches the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootstrapFormat {
    CloudConfig,
    Ignition,
}

/// The guest initialization an OS type gets from the engine (osinfo `vmInitType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuestInit {
    CloudInit,
    Ignition,
    Sysprep,
}

/// The engine's default OS type (`other`, cloud-init) when a template shows none.
pub const DEFAULT_OS_TYPE: &str = "other";

/// What the engine's osinfo gives an OS type: `rhcos_x64` (and other CoreOS types) boot with Ignition, the Windows
/// types with Sysprep, everything else inherits cloud-init from `other`.
pub fn guest_init(os_type: &str) -> GuestInit {
    let os = os_type.trim().to_ascii_lowercase();
    if os.starts_with("rhcos") || os.starts_with("fcos") {
        GuestInit::Ignition
    } else if os.starts_with("windows") {
        GuestInit::Sysprep
    } else {
        GuestInit::CloudInit
    }
}

/// Why CAPOV will not hand bootstrap data to the engine: a MachineCreated reason and an actionable message (that
/// never quotes the data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    fn unsupported(message: String) -> Refusal {
        Refusal {
            reason: reasons::UNSUPPORTED_BOOTSTRAP_DATA,
            message,
        }
    }
}

/// Ok when the engine delivers `format` to VMs of template `template` with OS type `os_type` (None: the template
/// shows none, the engine's default `other`). Checked before a VM is created.
pub fn check_format_fits(format: BootstrapFormat, template: &str, os_type: Option<&str>) -> Result<(), Refusal> {
    let fix = match format {
        BootstrapFormat::CloudConfig => {
            "No VM was created; use a template whose OS type runs cloud-init (e.g. other_linux, rhel_9x64) in \
             spec.template, or bootstrap data in the ignition format (KubeadmConfig spec.format: ignition) if the \
             template's image runs Ignition"
        }
        BootstrapFormat::Ignition => {
            "No VM was created; use a template whose OS type runs Ignition (rhcos_x64) in spec.template, set that OS \
             type on the template in oVirt if its image runs Ignition, or use cloud-config bootstrap data"
        }
    };
    check(format, &format!("template {template:?}"), os_type, fix)
}

/// The same check for an existing VM before its first start (its OS type may have been changed since it was
/// created, or it was created by an earlier CAPOV). A VM document without an OS type (a trimmed answer; the engine
/// always shows one) passes: its template was checked when the VM was created.
pub fn check_vm_fits(format: BootstrapFormat, vm_name: &str, os_type: Option<&str>) -> Result<(), Refusal> {
    let Some(os_type) = os_type.map(str::trim).filter(|os| !os.is_empty()) else {
        return Ok(());
    };
    let os_type = Some(os_type);
    let fix = "The VM was not started; set an OS type that fits on the VM in oVirt (cloud-init: e.g. other_linux; \
               Ignition: rhcos_x64) if its image runs that, or delete this OVirtMachine (its VM is removed with it)";
    check(format, &format!("VM {vm_name:?}"), os_type, fix)
}

fn check(format: BootstrapFormat, what: &str, os_type: Option<&str>, fix: &str) -> Result<(), Refusal> {
    let os_type = os_type
        .map(str::trim)
        .filter(|os| !os.is_empty())
        .unwrap_or(DEFAULT_OS_TYPE);
    let init = guest_init(os_type);
    let fits = matches!(
        (format, init),
        (BootstrapFormat::CloudConfig, GuestInit::CloudInit) | (BootstrapFormat::Ignition, GuestInit::Ignition)
    );
    if fits {
        return Ok(());
    }
    let data = match format {
        BootstrapFormat::CloudConfig => "cloud-config",
        BootstrapFormat::Ignition => "ignition",
    };
    let delivers = match init {
        GuestInit::CloudInit => "cloud-init",
        GuestInit::Ignition => "Ignition",
        GuestInit::Sysprep => "Sysprep (neither cloud-init nor Ignition)",
    };
    Err(Refusal {
        reason: reasons::BOOTSTRAP_FORMAT_MISMATCH,
        message: format!(
            "the bootstrap data is {data}, but {what} has OS type {os_type:?}, for which oVirt delivers only \
             {delivers}: the VM would start without its bootstrap data and never join. {fix}"
        ),
    })
}

/// The jinja expressions CAPOV renders itself: the guest's host name as cloud-init's instance data names it
/// (`ds.meta_data` of oVirt's config drive, `v1`, and the top-level alias of `v1`).
pub const HOST_NAME_VARIABLES: &[&str] = &[
    "ds.meta_data.local_hostname",
    "ds.meta_data.hostname",
    "ds.meta_data.name",
    "v1.local_hostname",
    "local_hostname",
];

/// The keys the engine puts before the custom script that CAPOV sets back, when the data does not set them:
/// `disable_root: false` and `ssh_pwauth: true` would open root and password logins on every node.
const RESTORED_KEYS: &[(&str, &str)] = &[("disable_root", "true"), ("ssh_pwauth", "false")];

/// cloud-init user-data types other than cloud-config: the engine's `#cloud-config` prefix turns them into broken
/// YAML, so they cannot reach the guest.
const OTHER_USER_DATA_TYPES: &[&str] = &[
    "#cloud-config-archive",
    "#cloud-config-jsonp",
    "#!",
    "#include",
    "#cloud-boothook",
    "#part-handler",
    "#upstart-job",
    "content-type:",
    "mime-version:",
];

/// The custom script CAPOV sends for cloud-config bootstrap data, so that what the engine makes of it (its
/// `#cloud-config` and keys first) is the configuration the data meant, for a guest named `host_name`.
pub fn cloud_config_for_engine(data: &str, host_name: &str) -> Result<String, Refusal> {
    let data = data.strip_prefix('\u{feff}').unwrap_or(data);
    let (first, rest) = data.split_once('\n').unwrap_or((data, ""));
    let jinja = first.trim_end().to_ascii_lowercase().starts_with("## template: jinja");
    let body = if jinja {
        render_host_name(rest, host_name)?
    } else {
        data.replace("\r\n", "\n")
    };
    let first_content = body
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if let Some(kind) = OTHER_USER_DATA_TYPES
        .iter()
        .find(|kind| first_content.starts_with(**kind))
    {
        return Err(Refusal::unsupported(format!(
            "the bootstrap data is cloud-init user-data of another type than cloud-config (it starts with {kind:?}): \
             oVirt always delivers cloud-config (it puts its own #cloud-config and keys first), so this data cannot \
             reach the guest; use #cloud-config data"
        )));
    }
    let keys = top_level_keys(&body)?;
    let mut script = body;
    if !script.is_empty() && !script.ends_with('\n') {
        script.push('\n');
    }
    let restored: Vec<_> = RESTORED_KEYS
        .iter()
        .filter(|(key, _)| !keys.iter().any(|k| k == key))
        .collect();
    if !restored.is_empty() {
        script.push_str("# CAPOV: oVirt puts disable_root: false and ssh_pwauth: true before this data; set back\n");
        for (key, value) in restored {
            script.push_str(&format!("{key}: {value}\n"));
        }
    }
    Ok(script)
}

/// Renders the host name variables of a jinja cloud-config (without its header line); any other jinja construct
/// is refused, since nothing in the guest will render it.
fn render_host_name(template: &str, host_name: &str) -> Result<String, Refusal> {
    let template = template.replace("\r\n", "\n");
    let mut out = String::with_capacity(template.len());
    let mut rest = template.as_str();
    while let Some(start) = rest.find(['{']) {
        let after = &rest[start + 1..];
        // Counted only for a refusal: data full of braces (embedded JSON) must not cost a scan per brace.
        let line_no = || {
            let offset = template.len() - rest.len() + start;
            template[..offset].matches('\n').count() + 2 // +1 for 1-based, +1 for the dropped header
        };
        match after.chars().next() {
            Some('{') => {
                let Some(end) = after[1..].find("}}") else {
                    return Err(unrenderable(line_no(), None));
                };
                let expression = after[1..1 + end].trim();
                if !HOST_NAME_VARIABLES.contains(&expression) {
                    return Err(unrenderable(line_no(), Some(expression)));
                }
                out.push_str(&rest[..start]);
                out.push_str(host_name);
                rest = &after[1 + end + 2..];
            }
            Some('%') | Some('#') => return Err(unrenderable(line_no(), None)),
            _ => {
                out.push_str(&rest[..=start]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn unrenderable(line: usize, expression: Option<&str>) -> Refusal {
    // Only a plain variable name is quoted: anything else could carry bootstrap content.
    let what = match expression {
        Some(e) if e.len() <= 64 && e.chars().all(|c| c.is_ascii_alphanumeric() || "._".contains(c)) => {
            format!("the jinja variable {e:?}")
        }
        _ => "a jinja construct".to_string(),
    };
    Refusal::unsupported(format!(
        "the bootstrap data (## template: jinja) uses {what} at line {line}: oVirt puts its own #cloud-config first, \
         so cloud-init in the guest renders no jinja; CAPOV renders only the host name ({}) and refuses the rest. \
         Use only these variables in the bootstrap data",
        HOST_NAME_VARIABLES.join(", ")
    ))
}

/// The keys of the top-level block mapping, or a refusal when the data is not one: the engine appends it to its
/// own block mapping, which only another block mapping continues (no flow style, no second document).
fn top_level_keys(body: &str) -> Result<Vec<String>, Refusal> {
    let mut keys = Vec::new();
    for (index, line) in body.lines().enumerate() {
        let refuse = |what: &str| {
            Refusal::unsupported(format!(
                "the bootstrap data's line {} {what}: oVirt appends the data to its own cloud-config mapping, which \
                 only a block mapping of top-level keys can continue; write the cloud-config as one block mapping",
                index + 1
            ))
        };
        if line.is_empty() || line.starts_with([' ', '\t', '#']) {
            continue;
        }
        if line.starts_with("---") || line.starts_with("...") {
            return Err(refuse("starts a new YAML document"));
        }
        // `key:` followed by a sequence at column 0 (CABPK writes `write_files:` so) continues that key.
        if line.starts_with('-') && !line.starts_with("---") && !keys.is_empty() {
            continue;
        }
        if line.starts_with(['{', '[', '-']) {
            return Err(refuse("is not a top-level key"));
        }
        let key = line
            .split_once(':')
            .map(|(key, _)| key.trim().trim_matches(['"', '\'']))
            .filter(|key| !key.is_empty());
        match key {
            Some(key) => keys.push(key.to_string()),
            None => return Err(refuse("is not a top-level key")),
        }
    }
    Ok(keys)
}

/// The custom script CAPOV sends for Ignition bootstrap data of a guest named `host_name`.
pub fn ignition_for_engine(data: &str, host_name: &str) -> Result<String, Refusal> {
    use serde_json::{Value, json};
    let Ok(Value::Object(mut config)) = serde_json::from_str::<Value>(data) else {
        return Err(Refusal::unsupported(
            "the Ignition bootstrap data is not a JSON object: oVirt cannot build the guest's payload from it"
                .to_string(),
        ));
    };
    let Some(version) = config
        .get("ignition")
        .and_then(|i| i.get("version"))
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return Err(Refusal::unsupported(
            "the Ignition bootstrap data has no ignition.version: oVirt would stamp 2.3.0 on it, which Ignition 2.x \
             (spec 3) refuses; set the config's version"
                .to_string(),
        ));
    };
    // The engine adds an /etc/hostname file unless one is there; for spec 3 CAPOV adds it in the spec-3 form
    // (`overwrite`, no `filesystem`), which the engine then leaves alone.
    let has_host_name_file = config
        .get("storage")
        .and_then(|s| s.get("files"))
        .and_then(Value::as_array)
        .is_some_and(|files| {
            files
                .iter()
                .any(|f| f.get("path").and_then(Value::as_str) == Some("/etc/hostname"))
        });
    if version.starts_with("3.") && !has_host_name_file && !host_name.is_empty() {
        let file = json!({"path": "/etc/hostname", "mode": 420, "overwrite": true,
                          "contents": {"source": format!("data:,{host_name}")}});
        let storage = config.entry("storage").or_insert_with(|| json!({}));
        let Value::Object(storage) = storage else {
            return Err(Refusal::unsupported(
                "the Ignition bootstrap data's storage is not a JSON object".to_string(),
            ));
        };
        match storage.entry("files").or_insert_with(|| json!([])) {
            Value::Array(files) => files.push(file),
            _ => {
                return Err(Refusal::unsupported(
                    "the Ignition bootstrap data's storage.files is not a JSON array".to_string(),
                ));
            }
        }
    }
    Ok(Value::Object(config).to_string())
}

/// The custom script for bootstrap data of `format`.
pub fn for_engine(format: BootstrapFormat, data: &str, host_name: &str) -> Result<String, Refusal> {
    match format {
        BootstrapFormat::CloudConfig => cloud_config_for_engine(data, host_name),
        BootstrapFormat::Ignition => ignition_for_engine(data, host_name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CAPI kubeadm bootstrap data as CABPK writes it for a worker (trimmed).
    const KUBEADM: &str = "## template: jinja\n#cloud-config\n\nwrite_files:\n-   path: /run/kubeadm/kubeadm-join-config.yaml\n    owner: root:root\n    permissions: '0640'\n    content: |\n      ---\n      apiVersion: kubeadm.k8s.io/v1beta4\n      kind: JoinConfiguration\n      nodeRegistration:\n        name: '{{ ds.meta_data.local_hostname }}'\n        kubeletExtraArgs:\n        - name: provider-id\n          value: 'ovirt://{{v1.local_hostname}}'\n\nruncmd:\n  - kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete\n";

    #[test]
    fn the_os_type_decides_which_format_fits() {
        let ok = |f, os| check_format_fits(f, "t", os).is_ok();
        assert!(ok(BootstrapFormat::CloudConfig, Some("other_linux")));
        assert!(
            ok(BootstrapFormat::CloudConfig, None),
            "no OS type = the engine's default, other"
        );
        assert!(ok(BootstrapFormat::Ignition, Some("rhcos_x64")));
        assert!(!ok(BootstrapFormat::CloudConfig, Some("rhcos_x64")));
        assert!(!ok(BootstrapFormat::Ignition, Some("rhel_9x64")));
        assert!(!ok(BootstrapFormat::CloudConfig, Some("windows_2019x64")));
    }

    #[test]
    fn a_mismatch_names_the_template_its_os_type_the_format_and_the_fix() {
        let refusal = check_format_fits(BootstrapFormat::CloudConfig, "rhcos-4.14", Some("rhcos_x64")).unwrap_err();
        assert_eq!(refusal.reason, reasons::BOOTSTRAP_FORMAT_MISMATCH);
        for part in [
            "cloud-config",
            "\"rhcos-4.14\"",
            "\"rhcos_x64\"",
            "only Ignition",
            "spec.template",
            "No VM",
        ] {
            assert!(refusal.message.contains(part), "{part}: {}", refusal.message);
        }
        let refusal = check_format_fits(BootstrapFormat::Ignition, "ubuntu", Some("other_linux")).unwrap_err();
        assert!(refusal.message.contains("only cloud-init") && refusal.message.contains("rhcos_x64"));
        let refusal = check_vm_fits(BootstrapFormat::CloudConfig, "w-0", Some("rhcos_x64")).unwrap_err();
        assert!(refusal.message.contains("VM \"w-0\"") && refusal.message.contains("not started"));
        assert!(check_vm_fits(BootstrapFormat::Ignition, "w-0", Some("rhcos_x64")).is_ok());
        assert!(
            check_vm_fits(BootstrapFormat::Ignition, "w-0", None).is_ok(),
            "not shown: not refused"
        );
    }

    #[test]
    fn kubeadm_data_loses_its_jinja_header_and_gets_the_host_name() {
        let script = cloud_config_for_engine(KUBEADM, "worker-0").unwrap();
        assert!(script.starts_with("#cloud-config\n"), "{script}");
        assert!(script.contains("name: 'worker-0'\n"));
        assert!(script.contains("value: 'ovirt://worker-0'\n"));
        assert!(!script.contains("{{") && !script.contains("template: jinja"));
        assert!(script.ends_with("disable_root: true\nssh_pwauth: false\n"), "{script}");
        assert!(script.contains("runcmd:\n  - kubeadm join"));
    }

    #[test]
    fn keys_the_data_sets_itself_are_not_added_again() {
        let script = cloud_config_for_engine("#cloud-config\nssh_pwauth: true\ndisable_root: false\n", "m").unwrap();
        assert_eq!(script, "#cloud-config\nssh_pwauth: true\ndisable_root: false\n");
        let script = cloud_config_for_engine("#cloud-config\nruncmd: [ls]", "m").unwrap();
        assert_eq!(
            script,
            "#cloud-config\nruncmd: [ls]\n# CAPOV: oVirt puts disable_root: false and ssh_pwauth: true before this data; set back\ndisable_root: true\nssh_pwauth: false\n"
        );
    }

    #[test]
    fn data_without_the_header_is_not_rendered() {
        let script = cloud_config_for_engine("#cloud-config\nbootcmd: ['echo {{ x }}']\n", "m").unwrap();
        assert!(script.contains("echo {{ x }}"));
    }

    #[test]
    fn other_jinja_is_refused_without_quoting_the_data() {
        for (data, names) in [
            (
                "## template: jinja\n#cloud-config\na: '{{ v1.region }}'\n",
                Some("\"v1.region\""),
            ),
            (
                "## template: jinja\n#cloud-config\n{% if x %}\na: 1\n{% endif %}\n",
                None,
            ),
            (
                "## template: jinja\n#cloud-config\na: '{{ secret-token-abc | upper }}'\n",
                None,
            ),
            ("## template: jinja\n#cloud-config\na: '{{ unclosed\n", None),
        ] {
            let refusal = cloud_config_for_engine(data, "m").unwrap_err();
            assert_eq!(refusal.reason, reasons::UNSUPPORTED_BOOTSTRAP_DATA);
            assert!(refusal.message.contains("line 3"), "{}", refusal.message);
            assert!(!refusal.message.contains("secret-token"), "{}", refusal.message);
            if let Some(name) = names {
                assert!(refusal.message.contains(name), "{}", refusal.message);
            }
        }
        // A lone brace is no jinja.
        assert!(cloud_config_for_engine("## template: jinja\n#cloud-config\na: '{ x }'\n", "m").is_ok());
    }

    #[test]
    fn user_data_that_the_engines_prefix_breaks_is_refused() {
        for data in [
            "#!/bin/sh\necho hi\n",
            "Content-Type: multipart/mixed; boundary=x\n",
            "#include\nhttp://x\n",
            "#cloud-config-archive\n- type: x\n",
            "## template: jinja\n#!/bin/bash\nhostname {{ v1.local_hostname }}\n",
            "#cloud-config\n{runcmd: [ls]}\n",
            "#cloud-config\na: 1\n---\nb: 2\n",
            "#cloud-config\n- a\n",
        ] {
            let refusal = cloud_config_for_engine(data, "m").unwrap_err();
            assert_eq!(refusal.reason, reasons::UNSUPPORTED_BOOTSTRAP_DATA, "{data}");
        }
    }

    #[test]
    fn ignition_needs_a_version_and_gets_a_spec_3_host_name_file() {
        let config = ignition_for_engine(r#"{"ignition":{"version":"3.4.0"}}"#, "m1").unwrap();
        let json: serde_json::Value = serde_json::from_str(&config).unwrap();
        let file = &json["storage"]["files"][0];
        assert_eq!(file["path"], "/etc/hostname");
        assert_eq!(file["contents"]["source"], "data:,m1");
        assert_eq!(file["overwrite"], true);
        assert!(file.get("filesystem").is_none());
        // The data's own host name file stays the only one; spec 2 is left to the engine.
        let own = r#"{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/hostname"}]}}"#;
        assert_eq!(ignition_for_engine(own, "m1").unwrap(), own);
        let spec2 = r#"{"ignition":{"version":"2.3.0"}}"#;
        assert_eq!(ignition_for_engine(spec2, "m1").unwrap(), spec2);
        for bad in [
            "#cloud-config",
            "[]",
            "{}",
            r#"{"ignition":{}}"#,
            r#"{"ignition":{"version":"3.4.0"},"storage":[]}"#,
        ] {
            let refusal = ignition_for_engine(bad, "m1").unwrap_err();
            assert_eq!(refusal.reason, reasons::UNSUPPORTED_BOOTSTRAP_DATA, "{bad}");
        }
    }
}
