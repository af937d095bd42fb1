//! The parts of a real engine's VM document that CAPOV's model does not carry, so that the simulator's VMs have
//! the size and nesting of a real engine's (about 8 KB without inlined collections, per the 4.4.10 recording in
//! `shared/reference/ovirt-samples/vm.xml`; more with `<initialization>` and follows). Lists carry them for every
//! VM, as the engine's do. A client must skip all of it without allocating much: these are the bytes a batched
//! status poll pays for each VM.

use serde_json::{Value, json};

use crate::wire::Format;

/// The elements, as the engine renders them for a server VM of a 4.4 cluster. `up` adds what only a running VM
/// shows (the guest's OS and time zone as the agent reports them; its host is in the model, `render::vm`).
fn elements(up: bool) -> Value {
    let mut value = json!({
        "bios": {"boot_menu": {"enabled": false}, "type": "q35_sea_bios"},
        "cpu_shares": 0,
        "delete_protected": false,
        "display": {
            "allow_override": false,
            "copy_paste_enabled": true,
            "disconnect_action": "LOCK_SCREEN",
            "file_transfer_enabled": true,
            "monitors": 1,
            "smartcard_enabled": false,
            "type": "vnc"
        },
        "io": {"threads": 1},
        "large_icon": {"@href": "/ovirt-engine/api/icons/b34cbd6a-a64b-4718-a0bb-f7166f6c5f55",
                       "@id": "b34cbd6a-a64b-4718-a0bb-f7166f6c5f55"},
        "migration": {"auto_converge": "inherit", "compressed": "inherit", "encrypted": "inherit"},
        "migration_downtime": -1,
        "multi_queues_enabled": true,
        "origin": "ovirt",
        "small_icon": {"@href": "/ovirt-engine/api/icons/25581ebc-c80e-4571-a088-3a05854d8e2b",
                       "@id": "25581ebc-c80e-4571-a088-3a05854d8e2b"},
        "sso": {"methods": {"method": [{"@id": "guest_agent"}]}},
        "start_paused": false,
        "stateless": false,
        "storage_error_resume_behaviour": "auto_resume",
        "time_zone": {"name": "Etc/GMT"},
        "usb": {"enabled": false},
        "virtio_scsi_multi_queues_enabled": false,
        "cpu_profile": {"@href": "/ovirt-engine/api/cpuprofiles/597667d4-042c-4631-8257-e4dcbfa3b9a8",
                        "@id": "597667d4-042c-4631-8257-e4dcbfa3b9a8"},
        "quota": {"@id": "712172d4-dc8e-4989-8a20-578506088116"},
        "next_run_configuration_exists": false,
    });
    if up {
        let extra = json!({
            "guest_operating_system": {
                "architecture": "x86_64", "codename": "", "distribution": "Red Hat Enterprise Linux CoreOS",
                "family": "Linux", "kernel": {"version": {"build": 0, "full_version": "5.14.0-284.el9.x86_64",
                    "major": 5, "minor": 14, "revision": 284}},
                "version": {"full_version": "4.14", "major": 4, "minor": 14}
            },
            "guest_time_zone": {"name": "UTC", "utc_offset": "+00:00"}
        });
        if let (Value::Object(base), Value::Object(extra)) = (&mut value, extra) {
            base.extend(extra);
        }
    }
    value
}

/// The XML of [`elements`], children of `<vm>`.
fn xml(value: &Value, out: &mut String) {
    let Value::Object(map) = value else { return };
    for (name, child) in map {
        match child {
            Value::Array(items) => {
                for item in items {
                    element(name, item, out);
                }
            }
            other => element(name, other, out),
        }
    }
}

fn element(name: &str, value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            out.push('<');
            out.push_str(name);
            for (key, attribute) in map.iter().filter(|(k, _)| k.starts_with('@')) {
                out.push_str(&format!(
                    " {}=\"{}\"",
                    &key[1..],
                    attribute.as_str().unwrap_or_default()
                ));
            }
            if map.keys().all(|k| k.starts_with('@')) {
                out.push_str("/>");
                return;
            }
            out.push('>');
            let children: serde_json::Map<String, Value> = map
                .iter()
                .filter(|(k, _)| !k.starts_with('@'))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            xml(&Value::Object(children), out);
            out.push_str(&format!("</{name}>"));
        }
        Value::String(text) => out.push_str(&format!("<{name}>{text}</{name}>")),
        other => out.push_str(&format!("<{name}>{other}</{name}>")),
    }
}

/// Adds the engine-only elements to every top-level VM of a serialised document (one VM or a list), in the
/// document's format. `up_ids`: the VMs that are running.
pub fn add(body: Vec<u8>, format: Format, up: &dyn Fn(&str) -> bool) -> Vec<u8> {
    match format {
        Format::Xml => {
            let Ok(text) = String::from_utf8(body) else {
                return Vec::new();
            };
            // Top-level VMs are the only `<vm …>` elements with content: references inside a VM (disk attachments,
            // reported devices) are empty elements.
            let mut out = String::with_capacity(text.len() + 4096);
            let mut rest = text.as_str();
            while let Some(end) = rest.find("</vm>") {
                let (head, tail) = rest.split_at(end);
                out.push_str(head);
                let id = head
                    .rfind("<vm href=")
                    .and_then(|start| head[start..].split("id=\"").nth(1))
                    .and_then(|after| after.split('"').next())
                    .unwrap_or_default();
                xml(&elements(up(id)), &mut out);
                out.push_str("</vm>");
                rest = &tail["</vm>".len()..];
            }
            out.push_str(rest);
            out.into_bytes()
        }
        Format::Json => {
            let Ok(mut value) = serde_json::from_slice::<Value>(&body) else {
                return body;
            };
            let mut extend = |vm: &mut Value| {
                let id = vm.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
                if let (Value::Object(map), Value::Object(extra)) =
                    (vm, crate::wire::engine_json(elements(up(&id)), None))
                {
                    for (key, child) in extra {
                        map.entry(key).or_insert(child);
                    }
                }
            };
            if let Some(Value::Array(vms)) = value.get_mut("vm") {
                vms.iter_mut().for_each(&mut extend);
            } else if value.get("id").is_some() {
                extend(&mut value);
            }
            value.to_string().into_bytes()
        }
    }
}
