//! The wire format of every model type, pinned: what each type encodes to (XML and JSON) when fully populated, when
//! populated with every list empty, and when empty, and what the engine's documents decode into. The expected texts
//! were written by the model as it was when the per-field `skip_serializing_if` attributes were replaced by a
//! struct-level rule (`tests/fixtures/wire/`), so any change to what goes on the wire, or to what a missing element
//! decodes to, shows here as a difference.
//!
//! Regenerate on purpose only (a wire change that is meant): `CAPOV_BLESS_WIRE=1 cargo test -p capov-ovirt-model
//! --test wire`, then review the diff.

use std::cell::Cell;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use capov_ovirt_model::model::*;
use capov_ovirt_model::xml::{from_xml, to_xml};
use serde::Serialize;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

/// A deserializer that makes a value with every field set: every `Option` is `Some`, every list holds
/// `list_len` items, every text is `<field>-<n>` and every number `n` (a counter, so no two leaves are alike).
/// Built from serde's description of each type, it reaches every field without naming one, new fields included.
struct Fill<'a> {
    field: &'static str,
    list_len: usize,
    depth: usize,
    counter: &'a Cell<u64>,
}

/// The model has no recursive types; this only stops a future one from overflowing the stack.
const MAX_DEPTH: usize = 32;

type FillError = de::value::Error;

impl<'a> Fill<'a> {
    fn next(&self) -> u64 {
        let n = self.counter.get() + 1;
        self.counter.set(n);
        n
    }

    fn child(&self, field: &'static str) -> Fill<'a> {
        Fill {
            field,
            list_len: self.list_len,
            depth: self.depth + 1,
            counter: self.counter,
        }
    }

    fn deeper(&self) -> Result<(), FillError> {
        if self.depth > MAX_DEPTH {
            Err(de::Error::custom(format!(
                "types nest deeper than {MAX_DEPTH} at {}",
                self.field
            )))
        } else {
            Ok(())
        }
    }
}

macro_rules! fill_numbers {
    ($($method:ident => $visit:ident as $ty:ty),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
            visitor.$visit(self.next() as $ty)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Fill<'_> {
    type Error = FillError;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, FillError> {
        Err(de::Error::custom(format!("no filler for the type of {}", self.field)))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        visitor.visit_bool(self.next() % 2 == 1)
    }

    fill_numbers!(
        deserialize_u8 => visit_u8 as u8,
        deserialize_u16 => visit_u16 as u16,
        deserialize_u32 => visit_u32 as u32,
        deserialize_u64 => visit_u64 as u64,
        deserialize_i8 => visit_i8 as i8,
        deserialize_i16 => visit_i16 as i16,
        deserialize_i32 => visit_i32 as i32,
        deserialize_i64 => visit_i64 as i64,
    );

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        visitor.visit_f32(self.next() as f32 + 0.5)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        visitor.visit_f64(self.next() as f64 + 0.5)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        visitor.visit_char('c')
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        self.deserialize_string(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        let name = self.field.trim_start_matches('@');
        visitor.visit_string(format!("{name}-{}", self.next()))
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, FillError> {
        self.deserialize_any(_visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, FillError> {
        self.deserialize_any(_visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        visitor.visit_some(self)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, FillError> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, FillError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        self.deeper()?;
        let remaining = self.list_len;
        visitor.visit_seq(FillSeq { fill: self, remaining })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, FillError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, FillError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, FillError> {
        self.deeper()?;
        visitor.visit_map(FillFields {
            fill: self,
            fields,
            next: 0,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, FillError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        visitor.visit_str(self.field)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FillError> {
        visitor.visit_unit()
    }
}

struct FillSeq<'a> {
    fill: Fill<'a>,
    remaining: usize,
}

impl<'de> SeqAccess<'de> for FillSeq<'_> {
    type Error = FillError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, FillError> {
        if self.remaining == 0 {
            return Ok(None);
        }
        self.remaining -= 1;
        seed.deserialize(self.fill.child(self.fill.field)).map(Some)
    }
}

struct FillFields<'a> {
    fill: Fill<'a>,
    fields: &'static [&'static str],
    next: usize,
}

impl<'de> MapAccess<'de> for FillFields<'_> {
    type Error = FillError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, FillError> {
        match self.fields.get(self.next) {
            Some(field) => seed.deserialize((*field).into_deserializer()).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, FillError> {
        let field = self.fields[self.next];
        self.next += 1;
        seed.deserialize(self.fill.child(field))
    }
}

fn filled<T: DeserializeOwned>(list_len: usize) -> T {
    let counter = Cell::new(0);
    let fill = Fill {
        field: "root",
        list_len,
        depth: 0,
        counter: &counter,
    };
    T::deserialize(fill).unwrap_or_else(|err| panic!("filling {}: {err}", std::any::type_name::<T>()))
}

/// The wire texts of one type: each variant encoded to XML and to JSON, and decoded back to the same value.
fn wire_texts<T>() -> String
where
    T: Serialize + DeserializeOwned + Default + PartialEq + std::fmt::Debug,
{
    let mut out = String::new();
    for (variant, value) in [
        ("full", filled::<T>(2)),
        ("lists empty", filled::<T>(0)),
        ("empty", T::default()),
    ] {
        let xml = to_xml(&value).unwrap_or_else(|err| panic!("{variant}: {err}"));
        let json = serde_json::to_string(&value).unwrap();
        writeln!(out, "== {variant}: XML\n{xml}\n== {variant}: JSON\n{json}").unwrap();
        // Unset fields must decode back to None / empty: the texts leave them out.
        assert_eq!(
            from_xml::<T>(xml.as_bytes()).as_ref(),
            Ok(&value),
            "{variant}: XML round trip"
        );
        assert_eq!(
            serde_json::from_str::<T>(&json).unwrap(),
            value,
            "{variant}: JSON round trip"
        );
    }
    // A document without any element is the empty value.
    assert_eq!(
        serde_json::from_str::<T>("{}").unwrap(),
        T::default(),
        "{{}} decodes to the default"
    );
    out
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Compares `actual` with the fixture `name`, or writes it under `CAPOV_BLESS_WIRE=1`.
fn check(name: &str, actual: &str, mismatches: &mut Vec<String>) {
    let path = fixtures_dir().join(name);
    if std::env::var_os("CAPOV_BLESS_WIRE").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        mismatches.push(format!(
            "{name}: first difference on line {}:\n  expected: {:?}\n  actual:   {:?}",
            line + 1,
            expected.lines().nth(line).unwrap_or("<end>"),
            actual.lines().nth(line).unwrap_or("<end>")
        ));
    }
}

macro_rules! pin_wire {
    ($mismatches:ident: $($ty:ident),* $(,)?) => {
        $(check(&format!("wire/{}.txt", stringify!($ty)), &wire_texts::<$ty>(), &mut $mismatches);)*
    };
}

/// Every model type encodes exactly as it did, in all three shapes, and decodes back.
#[test]
fn every_model_type_keeps_its_wire_format() {
    let mut mismatches = Vec::new();
    pin_wire!(mismatches:
        // api
        Api, ProductInfo, SpecialObjects, ApiSummary, SummaryCount,
        // common
        Link, Actions, Ref, Fault, Action, Version, Mac, HostRefs,
        // devices
        DeviceIdentity, MdevType, MdevTypes, HostDevice, HostDevices, Property, Properties, VmMediatedDevice,
        VmMediatedDevices, Core, Cores, NumaNodeCpu, NumaNodePin, NumaNodePins, VirtualNumaNode, VirtualNumaNodes,
        InstanceType, InstanceTypes,
        // disk
        StorageDomainRefs, Disk, Disks, DiskAttachment, DiskAttachments,
        // inventory
        Cluster, Clusters, DataCenter, DataCenters, StorageConnection, DataCenterRefs, StorageDomain, StorageDomains,
        Network, Networks, PassThrough, VnicProfile, VnicProfiles, TemplateVersion, Template, Templates, Tag, Tags,
        DiskProfile, DiskProfiles,
        // placement
        VmSummary, Host, Hosts, AffinityRule, VmRefs, AffinityLabelRefs, AffinityGroup, AffinityGroups,
        AffinityLabel, AffinityLabels,
        // vm
        CpuTopology, Cpu, VcpuPin, VcpuPins, CpuTune, HighAvailability, StorageDomainLease, CustomProperty,
        CustomProperties, MemoryPolicy, PlacementPolicy, OperatingSystem, Initialization, NicConfiguration,
        NicConfigurations, Vm, Vms, VmStatusEntry, VmStatusEntries, VmFacts, VmFactsList, Nic, Nics, Ip, Ips,
        ReportedDevice, ReportedDevices,
    );
    assert!(
        mismatches.is_empty(),
        "the wire format changed:\n{}",
        mismatches.join("\n")
    );
}

/// The captured engine samples: `shared/reference/ovirt-samples` beside the clone or a folder above it (as
/// `capov-testkit` finds them; this crate does not depend on it).
fn reference_samples_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    workspace
        .ancestors()
        .skip(1)
        .map(|dir| dir.join("shared/reference/ovirt-samples"))
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| panic!("no shared/reference/ovirt-samples beside {}", workspace.display()))
}

fn decoded<T: DeserializeOwned + std::fmt::Debug>(path: &Path) -> String {
    let body = std::fs::read(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    let value: T = from_xml(&body).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    format!("{value:#?}\n")
}

/// The captured samples are reference data kept outside the project: only a fingerprint of what they decode into is
/// pinned (FNV-1a, stable across Rust releases unlike std's hasher).
fn fingerprint(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x} ({} bytes of Debug output)\n", text.len())
}

/// What the engine's documents (the project's fixtures and the captured samples) decode into stays the same: every
/// element present lands in its field, every one missing leaves it None or empty.
#[test]
fn engine_documents_decode_as_before() {
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ovirt/tests/fixtures");
    let captured = reference_samples_dir();
    let mut mismatches = Vec::new();
    macro_rules! pin_decoding {
        ($($dir:ident / $file:literal => $ty:ty),* $(,)?) => {
            $({
                let text = decoded::<$ty>(&$dir.join($file));
                let text = if stringify!($dir) == "captured" { fingerprint(&text) } else { text };
                let name = format!("decoded/{}/{}.{}.txt", stringify!($dir), $file, stringify!($ty));
                check(&name, &text, &mut mismatches);
            })*
        };
    }
    pin_decoding!(
        project / "action_failed.xml" => Action,
        project / "api.xml" => Api,
        project / "disk.xml" => Disk,
        project / "fault.xml" => Fault,
        project / "host_devices.xml" => HostDevices,
        project / "instance_types.xml" => InstanceTypes,
        project / "reporteddevices.xml" => ReportedDevices,
        project / "storagedomains.xml" => StorageDomains,
        project / "templates_versions.xml" => Templates,
        project / "vm.xml" => Vm,
        project / "vm.xml" => VmFacts,
        project / "vm.xml" => VmStatusEntry,
        project / "vm_diskattachments.xml" => DiskAttachments,
        project / "vm_mediated_devices.xml" => VmMediatedDevices,
        project / "vm_nics.xml" => Nics,
        project / "vm_workload.xml" => Vm,
        project / "vnicprofiles.xml" => VnicProfiles,
        captured / "api.xml" => Api,
        captured / "disk.xml" => Disk,
        captured / "fault.xml" => Fault,
        captured / "storagedomains.xml" => StorageDomains,
        captured / "vm.xml" => Vm,
        captured / "vm.xml" => VmFacts,
        captured / "vm_diskattachments.xml" => DiskAttachments,
        captured / "vm_nics.xml" => Nics,
        captured / "vnicprofiles.xml" => VnicProfiles,
    );
    assert!(mismatches.is_empty(), "decoding changed:\n{}", mismatches.join("\n"));
}

/// Every struct of the model leaves its unset fields out by the struct-level rule, so a new `Option` field needs no
/// attribute of its own, and a new struct cannot forget the rule unnoticed.
#[test]
fn every_model_struct_skips_its_none_fields() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/model");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let source = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = source.lines().map(str::trim).collect();
        for (index, line) in lines.iter().enumerate() {
            // The macros' structs (`collection!`) hold a single list and no `Option`.
            let derives_serialize = line.starts_with("#[derive(") && line.contains("Serialize");
            if derives_serialize
                && !path.ends_with("macros.rs")
                && lines[..index].last() != Some(&"#[skip_serializing_none]")
            {
                missing.push(format!("{}:{}", path.display(), index + 1));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "structs without #[skip_serializing_none]: {missing:?}"
    );
}
