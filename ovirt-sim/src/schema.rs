//! Request bodies checked against the engine's API model, as the engine's JAXB reader checks them.
//!
//! The engine unmarshals request XML with a validation handler that fails on every error event
//! (`restapi/xml/JAXBValidationEventHandler.java`), and an element the generated schema does not expect at that place
//! is such an event; the resulting `IOException` becomes 400 with the fault "Request syntactically incorrect." and a
//! usage link (`restapi/resource/validation/IOExceptionMapper.java`, `UsageFinder.java`). Booleans and integers go
//! through the model's own parsers (only `true`/`false` for booleans); a bad value is 400 "Invalid value".
//!
//! The allowed elements come from `ovirt-sim/model/ovirt-api-model-derived.json` (the API model's types, their base
//! types and the parameters of every action), never from CAPOV's client types. `<action>` is one generated type
//! holding the parameters of every action method of every service, so a parameter of another action is accepted
//! (and ignored) just as the engine accepts it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;

use serde_json::Value;

use crate::state::EngineVersion;

const MODEL_JSON: &str = include_str!("../model/ovirt-api-model-derived.json");

/// Members that exist only from a given engine version: (type, member, first version).
/// `use_ignition`: added to `VmService.start` for oVirt 4.4.0 (Ignition support came with 4.4).
/// `auto_pinning_policy` on VMs and templates: API model 4.4.32, first in engine 4.4.8 (4.4.8.3 took model 4.4.34).
/// `cpu_pinning_policy` (model 4.5.2) and `mediated_devices` (model 4.5.4): engine 4.5.0.
const SINCE: &[(&str, &str, EngineVersion)] = &[
    ("Action", "use_ignition", EngineVersion::new(4, 4, 0)),
    ("Vm", "auto_pinning_policy", EngineVersion::new(4, 4, 8)),
    ("Template", "auto_pinning_policy", EngineVersion::new(4, 4, 8)),
    ("InstanceType", "auto_pinning_policy", EngineVersion::new(4, 4, 8)),
    ("Vm", "cpu_pinning_policy", EngineVersion::new(4, 5, 0)),
    ("Template", "cpu_pinning_policy", EngineVersion::new(4, 5, 0)),
    ("InstanceType", "cpu_pinning_policy", EngineVersion::new(4, 5, 0)),
    ("Vm", "mediated_devices", EngineVersion::new(4, 5, 0)),
    ("Template", "mediated_devices", EngineVersion::new(4, 5, 0)),
];

/// Elements every `BaseResource` carries besides the model's members (`api.xsd`: `actions`, `link`, `creation_status`).
const BASE_RESOURCE_ELEMENTS: &[&str] = &["actions", "link", "creation_status"];

/// What a member holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Text,
    Boolean,
    Integer,
    Decimal,
    /// An enum's wire value (checked by the engine after parsing, with another error; not modelled).
    Enum,
    Struct(String),
    /// A type the model summary does not describe (e.g. `Fault`, `Job` inside `<action>`): not checked further.
    Opaque,
}

#[derive(Debug, Clone)]
struct Member {
    kind: Kind,
    list: bool,
}

#[derive(Debug, Default)]
struct TypeDef {
    element: String,
    base: Option<String>,
    members: BTreeMap<String, Member>,
}

/// The model summary, indexed.
pub struct Model {
    types: HashMap<String, TypeDef>,
    /// Action parameters: name → kind (the union over every action method).
    action: BTreeMap<String, Member>,
}

fn kind_of(type_name: &str, enums: &HashSet<String>, types: &serde_json::Map<String, Value>) -> Kind {
    match type_name {
        "string" | "date" => Kind::Text,
        "boolean" => Kind::Boolean,
        "integer" => Kind::Integer,
        "decimal" => Kind::Decimal,
        other if enums.contains(other) => Kind::Enum,
        other if types.contains_key(other) => Kind::Struct(other.to_string()),
        _ => Kind::Opaque,
    }
}

impl Model {
    fn parse(text: &str) -> Result<Self, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let empty = serde_json::Map::new();
        let json_types = root["types"].as_object().unwrap_or(&empty);
        let enums: HashSet<String> = root["enums"].as_object().unwrap_or(&empty).keys().cloned().collect();
        let member = |m: &Value| -> Option<(String, Member)> {
            let name = m["name"].as_str()?.to_string();
            let kind = kind_of(m["type"].as_str()?, &enums, json_types);
            let list = m["list"].as_bool().unwrap_or(false);
            Some((name, Member { kind, list }))
        };
        let mut types = HashMap::new();
        for (name, def) in json_types {
            let mut members = BTreeMap::new();
            for list in ["attributes", "links"] {
                for m in def[list].as_array().into_iter().flatten() {
                    if let Some((n, mem)) = member(m) {
                        members.insert(n, mem);
                    }
                }
            }
            types.insert(
                name.clone(),
                TypeDef {
                    element: def["xml_element"].as_str().unwrap_or_default().to_string(),
                    base: def["base"].as_str().map(str::to_string),
                    members,
                },
            );
        }
        let mut action = BTreeMap::new();
        for service in root["services"].as_object().unwrap_or(&empty).values() {
            for method in service["methods"].as_object().unwrap_or(&empty).values() {
                let is_action = method["http"]
                    .as_str()
                    .is_some_and(|h| h.starts_with("POST <service-path>/"));
                if !is_action {
                    continue;
                }
                for p in method["parameters"].as_array().into_iter().flatten() {
                    if p["in"].as_bool() != Some(true) {
                        continue;
                    }
                    if let Some((n, mem)) = member(p) {
                        // One name, several types across services: the generated element takes the widest; do not
                        // guess which, check nothing below it.
                        action
                            .entry(n)
                            .and_modify(|known: &mut Member| {
                                if known.kind != mem.kind {
                                    known.kind = Kind::Opaque;
                                }
                            })
                            .or_insert(mem);
                    }
                }
            }
        }
        // The action's own result elements (generated alongside the parameters).
        for (name, kind) in [
            ("status", Kind::Text),
            ("fault", Kind::Opaque),
            ("job", Kind::Opaque),
            ("grace_period", Kind::Opaque),
        ] {
            action.entry(name.to_string()).or_insert(Member { kind, list: false });
        }
        Ok(Self { types, action })
    }

    /// The model, parsed once.
    pub fn get() -> &'static Model {
        static MODEL: OnceLock<Model> = OnceLock::new();
        MODEL.get_or_init(|| Model::parse(MODEL_JSON).expect("the embedded API model is valid JSON"))
    }

    /// The member `name` of struct `type_name` or one of its base types.
    fn member(&self, type_name: &str, name: &str) -> Option<&Member> {
        let mut current = Some(type_name);
        while let Some(t) = current {
            let def = self.types.get(t)?;
            if let Some(m) = def.members.get(name) {
                return Some(m);
            }
            current = def.base.as_deref();
        }
        None
    }

    fn is_resource(&self, type_name: &str) -> bool {
        let mut current = Some(type_name);
        while let Some(t) = current {
            if t == "Identified" {
                return true;
            }
            current = self.types.get(t).and_then(|d| d.base.as_deref());
        }
        false
    }

    fn element_of(&self, type_name: &str) -> Option<&str> {
        self.types.get(type_name).map(|d| d.element.as_str())
    }
}

/// Why a body was refused, as the engine words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// Unknown or misplaced element, wrong root, not XML: "Request syntactically incorrect."; `at` is the path of
    /// the offending element (for the simulator's log, the engine does not say).
    Syntax { at: String },
    /// A boolean or integer the model's parsers refuse: "Invalid value"; the detail names the value.
    InvalidValue { detail: String },
}

/// One parsed XML element (attributes are not checked: the engine ignores unknown ones).
#[derive(Debug, Default)]
struct Node {
    name: String,
    text: String,
    children: Vec<Node>,
}

fn parse_xml(body: &[u8]) -> Result<Node, String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(body);
    let mut stack: Vec<Node> = Vec::new();
    let mut buf = Vec::new();
    loop {
        let event = reader.read_event_into(&mut buf).map_err(|e| e.to_string())?;
        match event {
            Event::Start(start) => {
                let name = AsRef::<str>::as_ref(&start.local_name()).to_string();
                stack.push(Node {
                    name,
                    ..Node::default()
                });
            }
            Event::Empty(start) => {
                let node = Node {
                    name: AsRef::<str>::as_ref(&start.local_name()).to_string(),
                    ..Node::default()
                };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(node),
                    None => return Ok(node),
                }
            }
            Event::Text(text) => {
                if let Some(top) = stack.last_mut() {
                    // Entity references arrive as their own events (below), so the text needs no unescaping.
                    top.text.push_str(AsRef::<str>::as_ref(&text));
                }
            }
            Event::CData(data) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(AsRef::<str>::as_ref(&data));
                }
            }
            Event::GeneralRef(r) => {
                if let Some(top) = stack.last_mut() {
                    let name = AsRef::<str>::as_ref(&r).to_string();
                    let resolved = quick_xml::escape::resolve_predefined_entity(&name)
                        .map(str::to_string)
                        .or_else(|| r.resolve_char_ref().ok().flatten().map(String::from))
                        .ok_or_else(|| format!("unknown entity &{name};"))?;
                    top.text.push_str(&resolved);
                }
            }
            Event::End(_) => {
                let node = stack.pop().ok_or("unbalanced end tag")?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(node),
                    None => return Ok(node),
                }
            }
            Event::Eof => return Err("no root element".into()),
            _ => {}
        }
        buf.clear();
    }
}

/// Checks `body` as the XML of struct `root_type` (e.g. `Vm`), or `Action` for an action, on an engine of `version`.
pub fn check(body: &[u8], root_type: &str, version: EngineVersion) -> Result<(), Rejection> {
    let model = Model::get();
    let node = parse_xml(body).map_err(|e| Rejection::Syntax {
        at: format!("not XML: {e}"),
    })?;
    let checker = Checker { model, version };
    if root_type == "Action" {
        if node.name != "action" {
            return Err(Rejection::Syntax { at: node.name });
        }
        return checker.action(&node);
    }
    if model.element_of(root_type) != Some(node.name.as_str()) {
        return Err(Rejection::Syntax { at: node.name });
    }
    checker.structure(&node, root_type, &node.name)
}

struct Checker<'a> {
    model: &'a Model,
    version: EngineVersion,
}

impl Checker<'_> {
    fn exists(&self, type_name: &str, member: &str) -> bool {
        SINCE
            .iter()
            .filter(|(t, m, _)| *t == type_name && *m == member)
            .all(|(_, _, since)| self.version >= *since)
    }

    fn action(&self, node: &Node) -> Result<(), Rejection> {
        for child in &node.children {
            let at = format!("action/{}", child.name);
            match self.model.action.get(&child.name) {
                Some(member) if self.exists("Action", &child.name) => self.member(child, member, &at)?,
                _ => return Err(Rejection::Syntax { at }),
            }
        }
        Ok(())
    }

    fn structure(&self, node: &Node, type_name: &str, path: &str) -> Result<(), Rejection> {
        let resource = self.model.is_resource(type_name);
        for child in &node.children {
            let at = format!("{path}/{}", child.name);
            if resource && BASE_RESOURCE_ELEMENTS.contains(&child.name.as_str()) {
                continue;
            }
            match self.model.member(type_name, &child.name) {
                Some(member) if self.exists(type_name, &child.name) => self.member(child, member, &at)?,
                _ => return Err(Rejection::Syntax { at }),
            }
        }
        Ok(())
    }

    fn member(&self, node: &Node, member: &Member, path: &str) -> Result<(), Rejection> {
        if !member.list {
            return self.value(node, &member.kind, path);
        }
        // A list is a wrapper named after the member holding one element per item.
        if !node.text.trim().is_empty() {
            return Err(Rejection::Syntax { at: path.to_string() });
        }
        let item_name = match &member.kind {
            Kind::Struct(t) => self.model.element_of(t).map(str::to_string),
            _ => None,
        };
        for item in &node.children {
            let at = format!("{path}/{}", item.name);
            if let Some(expected) = &item_name
                && &item.name != expected
            {
                return Err(Rejection::Syntax { at });
            }
            self.value(item, &member.kind, &at)?;
        }
        Ok(())
    }

    fn value(&self, node: &Node, kind: &Kind, path: &str) -> Result<(), Rejection> {
        let scalar = |node: &Node| {
            if node.children.is_empty() {
                Ok(node.text.trim().to_string())
            } else {
                Err(Rejection::Syntax {
                    at: format!("{path}/{}", node.children[0].name),
                })
            }
        };
        match kind {
            Kind::Opaque => Ok(()),
            Kind::Struct(t) => {
                if !node.text.trim().is_empty() {
                    return Err(Rejection::Syntax { at: path.to_string() });
                }
                self.structure(node, t, path)
            }
            Kind::Text | Kind::Enum => scalar(node).map(drop),
            Kind::Boolean => {
                let text = scalar(node)?;
                match text.as_str() {
                    "true" | "false" => Ok(()),
                    _ => Err(Rejection::InvalidValue {
                        detail: format!("Value \"{text}\" isn't a valid boolean, it should be \"true\" or \"false\""),
                    }),
                }
            }
            Kind::Integer => {
                let text = scalar(node)?;
                text.parse::<i128>().map(drop).map_err(|_| Rejection::InvalidValue {
                    detail: format!("Value \"{text}\" isn't a valid integer"),
                })
            }
            Kind::Decimal => {
                let text = scalar(node)?;
                text.parse::<f64>().map(drop).map_err(|_| Rejection::InvalidValue {
                    detail: format!("Value \"{text}\" isn't a valid decimal"),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V44: EngineVersion = EngineVersion::new(4, 4, 10);
    const V43: EngineVersion = EngineVersion::new(4, 3, 10);

    fn syntax(body: &str, root: &str) -> bool {
        matches!(check(body.as_bytes(), root, V44), Err(Rejection::Syntax { .. }))
    }

    #[test]
    fn the_model_loads_with_its_core_types() {
        let model = Model::get();
        for t in [
            "Vm",
            "VmBase",
            "Identified",
            "Nic",
            "Disk",
            "DiskAttachment",
            "Initialization",
        ] {
            assert!(model.types.contains_key(t), "{t} missing");
        }
        assert!(model.action.contains_key("use_cloud_init"));
        assert!(model.action.contains_key("force"));
    }

    #[test]
    fn a_vm_add_with_known_elements_passes() {
        let body = r#"<vm><name>m1</name><description>x</description><cluster id="c"/><template><name>t</name></template>
            <memory>1073741824</memory><cpu><topology><sockets>1</sockets><cores>2</cores><threads>1</threads></topology></cpu>
            <initialization><custom_script>#cloud-config &amp; more</custom_script></initialization>
            <disk_attachments><disk_attachment><disk id="d"><format>cow</format><sparse>true</sparse>
            <storage_domains><storage_domain id="s"/></storage_domains></disk></disk_attachment></disk_attachments>
            <nics><nic><name>nic1</name><vnic_profile id="p"/></nic></nics></vm>"#;
        assert_eq!(check(body.as_bytes(), "Vm", V44), Ok(()));
    }

    #[test]
    fn unknown_or_misplaced_elements_are_syntax_errors() {
        assert!(syntax("<vm><name>a</name><colour>red</colour></vm>", "Vm"));
        // `sockets` belongs to the topology, not to the cpu.
        assert!(syntax("<vm><cpu><sockets>1</sockets></cpu></vm>", "Vm"));
        // A list item under the wrong name.
        assert!(syntax("<vm><nics><network>x</network></nics></vm>", "Vm"));
        // Wrong root.
        assert!(syntax("<nic><name>a</name></nic>", "Vm"));
        // A scalar with children.
        assert!(syntax("<vm><name><first>a</first></name></vm>", "Vm"));
        // Not XML at all.
        assert!(syntax("name=a", "Vm"));
    }

    #[test]
    fn booleans_and_integers_use_the_models_parsers() {
        assert!(matches!(
            check(b"<vm><stateless>yes</stateless></vm>", "Vm", V44),
            Err(Rejection::InvalidValue { .. })
        ));
        assert!(matches!(
            check(b"<vm><memory>1G</memory></vm>", "Vm", V44),
            Err(Rejection::InvalidValue { .. })
        ));
    }

    #[test]
    fn actions_accept_every_action_parameter_and_gate_use_ignition_by_version() {
        let start = b"<action><use_cloud_init>true</use_cloud_init></action>";
        assert_eq!(check(start, "Action", V43), Ok(()));
        let ignition = b"<action><use_ignition>true</use_ignition></action>";
        assert_eq!(check(ignition, "Action", V44), Ok(()));
        assert!(matches!(
            check(ignition, "Action", V43),
            Err(Rejection::Syntax { at }) if at == "action/use_ignition"
        ));
        assert!(matches!(
            check(b"<action><use_magic>true</use_magic></action>", "Action", V44),
            Err(Rejection::Syntax { .. })
        ));
        assert_eq!(check(b"<action><force>true</force></action>", "Action", V44), Ok(()));
    }
}
