//! What a start hands the guest: the initialization the VM's OS type supports, and the payload as the engine
//! rewrites it.
//!
//! * The OS decides (`packaging/conf/osinfo-defaults.properties`, `vmInitType`): `rhcos_*` use Ignition
//!   (`ignition_2.3.0`), `windows_*` Sysprep, every other OS inherits cloud-init from `other`. A start asking for
//!   cloud-init or Ignition gets it only when the OS type uses it (`RunVmCommand`: `isCloudInit`/`isIgnition`);
//!   otherwise the start still succeeds and the guest gets nothing.
//! * cloud-init user-data (`vdsbroker/CloudInitHandler.getUserData`): `#cloud-config`, then the engine's own keys
//!   as YAML (`disable_root: false`, `output`, a `runcmd` rewriting the datasource list, `chpasswd: {expire:
//!   false}`, `ssh_pwauth: true`), then `custom_script` appended as is. The host name goes into meta-data, not
//!   user-data. (The engine dumps a Java HashMap, so its key order is the map's; the simulator writes them sorted.)
//! * Ignition (`vdsbroker/IgnitionHandler.handle`): `custom_script` (or `{}`) parsed as JSON; `ignition.version`
//!   added (2.3.0) when missing (the engine puts it first; the simulator's JSON keys come out sorted); with a host name and no `/etc/hostname` file, a file
//!   `{"filesystem":"root","path":"/etc/hostname","mode":420,"contents":{"source":"data:,NAME"}}` appended to
//!   `storage.files`. A script that is not a JSON object makes the engine fail building the payload.

use crate::state::{Delivered, InitNetwork};

/// The initialization an OS type supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitType {
    CloudInit,
    Ignition,
    Sysprep,
}

/// The osinfo `vmInitType` of an OS type.
pub fn init_type(os_type: &str) -> InitType {
    if os_type.starts_with("rhcos") || os_type.starts_with("fcos") {
        InitType::Ignition
    } else if os_type.starts_with("windows") {
        InitType::Sysprep
    } else {
        InitType::CloudInit
    }
}

/// The Ignition spec version osinfo gives `rhcos_x64`.
pub const IGNITION_VERSION: &str = "2.3.0";

/// The payload a start asking for cloud-init (`use_cloud_init`) or Ignition (`use_ignition`) delivers to a VM of
/// `os_type`, or None when the OS does not use what was asked. `Err` when the engine cannot build it (Ignition
/// with a script that is not a JSON object). Both kinds get the initialization's network settings as the config
/// drive's `network_data.json` (`super::init_network`).
pub fn deliver(
    os_type: &str,
    (use_cloud_init, use_ignition): (bool, bool),
    custom_script: Option<&str>,
    host_name: Option<&str>,
    network: &InitNetwork,
) -> Result<Option<Delivered>, String> {
    match init_type(os_type) {
        InitType::CloudInit if use_cloud_init => Ok(Some(Delivered {
            kind: "cloud-init".into(),
            user_data: cloud_init_user_data(custom_script),
            meta_data: meta_data(host_name),
            network_data: super::init_network::network_data(network),
        })),
        InitType::Ignition if use_ignition => Ok(Some(Delivered {
            kind: "ignition".into(),
            user_data: ignition_user_data(custom_script, host_name)?,
            meta_data: meta_data(host_name),
            network_data: super::init_network::network_data(network),
        })),
        _ => Ok(None),
    }
}

/// A fresh instance id on every start, so that cloud-init processes the data again (the engine's comment).
fn meta_data(host_name: Option<&str>) -> serde_json::Value {
    let mut meta = serde_json::json!({
        "uuid": crate::ids::new_id(),
        "meta": {"dsmode": "local", "essential": "false", "role": "server"},
        "launch_index": "0",
        "availability_zone": "nova",
    });
    if let Some(name) = host_name.filter(|n| !n.is_empty()) {
        meta["hostname"] = name.into();
        meta["name"] = name.into();
    }
    meta
}

fn cloud_init_user_data(custom_script: Option<&str>) -> String {
    let engine_keys = "chpasswd:\n  expire: false\ndisable_root: false\noutput:\n  all: '>> /var/log/cloud-init-output.log'\n\
         runcmd:\n- 'sed -i ''/^datasource_list: /d'' /etc/cloud/cloud.cfg; echo ''datasource_list: [\"NoCloud\", \
         \"ConfigDrive\"]'' >> /etc/cloud/cloud.cfg'\nssh_pwauth: true\n";
    format!("#cloud-config\n{engine_keys}{}", custom_script.unwrap_or_default())
}

fn ignition_user_data(custom_script: Option<&str>, host_name: Option<&str>) -> Result<String, String> {
    use serde_json::{Map, Value, json};
    let script = custom_script.filter(|s| !s.trim().is_empty()).unwrap_or("{}");
    let Value::Object(mut config) = serde_json::from_str::<Value>(script).map_err(|e| e.to_string())? else {
        return Err("the Ignition config is not a JSON object".into());
    };
    let has_version = config
        .get("ignition")
        .and_then(Value::as_object)
        .is_some_and(|i| i.contains_key("version"));
    if !has_version {
        let mut ignition: Map<String, Value> = config
            .remove("ignition")
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        ignition.insert("version".into(), json!(IGNITION_VERSION));
        config.insert("ignition".into(), Value::Object(ignition));
    }
    if let Some(name) = host_name.filter(|n| !n.is_empty()) {
        let files_text = config
            .get("storage")
            .and_then(|s| s.get("files"))
            .map(Value::to_string)
            .unwrap_or_default();
        if !files_text.contains("\"path\":\"/etc/hostname\"") {
            let file = json!({"filesystem": "root", "path": "/etc/hostname", "mode": 420,
                              "contents": {"source": format!("data:,{name}")}});
            let storage = config.entry("storage").or_insert_with(|| json!({}));
            if let Value::Object(storage) = storage {
                match storage.entry("files").or_insert_with(|| json!([])) {
                    Value::Array(files) => files.push(file),
                    other => *other = json!([file]),
                }
            }
        }
    }
    Ok(Value::Object(config).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_os_type_decides_what_a_start_delivers() {
        assert!(
            deliver("other", (true, false), Some("x"), None, &InitNetwork::default())
                .unwrap()
                .is_some()
        );
        assert_eq!(
            deliver(
                "rhcos_x64",
                (true, false),
                Some("#cloud-config"),
                None,
                &InitNetwork::default()
            ),
            Ok(None)
        );
        assert_eq!(
            deliver("other", (false, true), Some("{}"), None, &InitNetwork::default()),
            Ok(None)
        );
        assert_eq!(
            deliver(
                "windows_2019x64",
                (true, true),
                Some("{}"),
                None,
                &InitNetwork::default()
            ),
            Ok(None)
        );
        assert_eq!(
            deliver("rhcos_x64", (false, true), Some("{}"), None, &InitNetwork::default())
                .unwrap()
                .map(|d| d.kind),
            Some("ignition".to_string())
        );
    }

    #[test]
    fn cloud_init_user_data_gets_the_engines_header_and_keys_before_the_script() {
        let script = "## template: jinja\n#cloud-config\nruncmd:\n- kubeadm join\n";
        let data = deliver(
            "rhel_8x64",
            (true, false),
            Some(script),
            Some("m1"),
            &InitNetwork::default(),
        )
        .unwrap()
        .unwrap();
        assert!(
            data.user_data.starts_with("#cloud-config\nchpasswd:"),
            "{}",
            data.user_data
        );
        assert!(data.user_data.contains("ssh_pwauth: true\n"));
        assert!(data.user_data.ends_with(script), "the script is appended as is");
        assert!(
            !data.user_data.starts_with("## template: jinja"),
            "the jinja header is no longer first"
        );
    }

    #[test]
    fn ignition_gets_a_version_and_a_hostname_file() {
        let data = deliver(
            "rhcos_x64",
            (false, true),
            Some(r#"{"passwd":{}}"#),
            Some("m1"),
            &InitNetwork::default(),
        )
        .unwrap()
        .unwrap();
        let json: serde_json::Value = serde_json::from_str(&data.user_data).unwrap();
        assert_eq!(json["ignition"]["version"], IGNITION_VERSION);
        assert_eq!(json["storage"]["files"][0]["path"], "/etc/hostname");
        assert_eq!(json["storage"]["files"][0]["contents"]["source"], "data:,m1");
        assert_eq!(data.meta_data["hostname"], "m1");
        assert_eq!(data.meta_data["name"], "m1");
        // A version and a hostname file of its own are kept.
        let own = r#"{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/etc/hostname"}]}}"#;
        let data = deliver(
            "rhcos_x64",
            (false, true),
            Some(own),
            Some("m1"),
            &InitNetwork::default(),
        )
        .unwrap()
        .unwrap();
        let json: serde_json::Value = serde_json::from_str(&data.user_data).unwrap();
        assert_eq!(json["ignition"]["version"], "3.1.0");
        assert_eq!(json["storage"]["files"].as_array().map(Vec::len), Some(1));
        assert!(
            deliver(
                "rhcos_x64",
                (false, true),
                Some("#cloud-config"),
                None,
                &InitNetwork::default()
            )
            .is_err()
        );
    }
}
