#![no_main]
//! Every engine body decoder must return Ok or Err for any input, never panic.

use capov_ovirt::model::*;
use capov_ovirt::xml::from_xml;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = from_xml::<Api>(data);
    let _ = from_xml::<Vm>(data);
    let _ = from_xml::<Vms>(data);
    let _ = from_xml::<Disk>(data);
    let _ = from_xml::<DiskAttachments>(data);
    let _ = from_xml::<Nics>(data);
    let _ = from_xml::<ReportedDevices>(data);
    let _ = from_xml::<StorageDomains>(data);
    let _ = from_xml::<VnicProfiles>(data);
    let _ = from_xml::<Templates>(data);
    let _ = from_xml::<Fault>(data);
    let _ = from_xml::<Action>(data);
});
