//! The initialization's network settings on the wire: the XML the client sends for static addresses, what the
//! engine (simulator) keeps, shows and delivers of it, what the guest then reports, and the engine's refusals.

mod common;

use std::time::Duration;

use capov_ovirt::model::{
    BootProtocol, Initialization, Ip, NicConfiguration, NicConfigurations, Ref, Vm, VmStatus, VmType,
};
use capov_ovirt::xml::to_xml;
use capov_ovirt::{Client, StartOptions};
use capov_ovirt_sim::Protocol;
use capov_testkit::eventually;

const WAIT: Duration = Duration::from_secs(20);

fn address(address: &str, netmask: &str, gateway: &str) -> Option<Ip> {
    Some(Ip {
        address: Some(address.into()),
        netmask: Some(netmask.into()),
        gateway: Some(gateway.into()),
        version: None,
    })
}

/// eth0 static IPv4 + IPv6, DNS over both families; `on_boot` as given.
fn static_initialization(on_boot: bool) -> Initialization {
    Initialization {
        custom_script: Some("#cloud-config\n".into()),
        host_name: Some("static-0".into()),
        dns_servers: Some("10.0.0.2 fd00::2".into()),
        dns_search: Some("example.com".into()),
        nic_configurations: Some(NicConfigurations {
            items: vec![NicConfiguration {
                name: Some("eth0".into()),
                ip: address("192.0.2.5", "255.255.255.0", "192.0.2.1"),
                boot_protocol: Some(BootProtocol::Static),
                ipv6: address("2001:db8::5", "64", "2001:db8::1"),
                ipv6_boot_protocol: Some(BootProtocol::Static),
                on_boot: Some(on_boot),
            }],
        }),
    }
}

async fn new_vm(client: &Client, name: &str, initialization: Initialization) -> Vm {
    let cluster = client.find_cluster_by_name("Default").await.unwrap().expect("Default");
    let template = client
        .find_templates_by_name("ubuntu-22.04", Some("Default"))
        .await
        .unwrap()
        .remove(0);
    Vm {
        name: Some(name.into()),
        cluster: Some(Ref::id(cluster.id.unwrap())),
        template: Some(Ref::id(template.id.unwrap())),
        kind: Some(VmType::Server),
        initialization: Some(initialization),
        ..Vm::default()
    }
}

#[test]
fn static_addresses_go_out_in_the_api_models_shape() {
    let xml = to_xml(&static_initialization(true)).expect("xml");
    for part in [
        "<dns_servers>10.0.0.2 fd00::2</dns_servers><dns_search>example.com</dns_search>",
        "<nic_configurations><nic_configuration><name>eth0</name>",
        "<ip><address>192.0.2.5</address><netmask>255.255.255.0</netmask><gateway>192.0.2.1</gateway></ip>\
         <boot_protocol>static</boot_protocol>",
        "<ipv6><address>2001:db8::5</address><netmask>64</netmask><gateway>2001:db8::1</gateway></ipv6>\
         <ipv6_boot_protocol>static</ipv6_boot_protocol><on_boot>true</on_boot></nic_configuration>",
    ] {
        assert!(xml.contains(part), "{part} not in {xml}");
    }
}

#[tokio::test]
async fn the_engine_keeps_shows_and_delivers_static_addresses_and_the_guest_takes_them() {
    let (sim, client) = common::setup().await;
    let vm = new_vm(&client, "static-0", static_initialization(true)).await;
    let id = client.add_vm(&vm, false).await.expect("add").id.expect("id");
    let kept = sim.control().vm(&id).expect("vm").init_network;
    let nic = &kept.nics.as_ref().expect("nic configurations")[0];
    assert_eq!((nic.ipv4, nic.ip.as_deref()), (Protocol::Static, Some("192.0.2.5")));
    assert_eq!((nic.ipv6, nic.ipv6_prefix), (Protocol::Static, Some(64)));
    assert_eq!(kept.dns_servers.as_deref(), Some("10.0.0.2 fd00::2"));

    let shown = client
        .vm(&id)
        .await
        .expect("get")
        .initialization
        .expect("initialization");
    let shown_nic = &shown.nic_configurations.expect("shown").items[0];
    assert_eq!(shown_nic.ipv6.as_ref().and_then(|ip| ip.netmask.as_deref()), Some("64"));
    assert_eq!(shown_nic.boot_protocol, Some(BootProtocol::Static));

    eventually(WAIT, "the VM down", || async {
        (client.vm(&id).await.ok()?.status == Some(VmStatus::Down)).then_some(())
    })
    .await;
    let options = StartOptions {
        use_cloud_init: true,
        use_ignition: false,
    };
    client.start_vm(&id, options).await.expect("start");
    let delivered = sim.control().delivered_payload(&id).expect("delivered");
    let data = delivered.network_data.expect("network_data.json");
    assert_eq!(data["networks"][0]["ip_address"], "192.0.2.5");
    assert_eq!(data["networks"][1]["ip_address"], "2001:db8::5");
    assert_eq!(data["links"][0]["name"], "eth0");

    // The guest configured what it got: its agent reports the static addresses on eth0, no DHCP lease.
    let reported = eventually(WAIT, "eth0's reported addresses", || async {
        let devices = client.reported_devices(&id).await.ok()?;
        let eth0 = devices.into_iter().find(|d| d.name.as_deref() == Some("eth0"))?;
        let ips: Vec<String> = eth0.ips?.items.into_iter().filter_map(|ip| ip.address).collect();
        Some(ips)
    })
    .await;
    let ipv4: Vec<&String> = reported.iter().filter(|ip| !ip.contains(':')).collect();
    assert_eq!(ipv4, ["192.0.2.5"], "only the static IPv4, no DHCP lease: {reported:?}");
    assert!(reported.contains(&"2001:db8::5".to_string()), "{reported:?}");
}

#[tokio::test]
async fn nic_configurations_the_engine_refuses_come_back_with_its_texts() {
    let (sim, client) = common::setup().await;
    let vm = new_vm(&client, "not-on-boot", static_initialization(false)).await;
    let err = client.add_vm(&vm, false).await.expect_err("on_boot false");
    let text = err.to_string();
    assert!(
        text.contains("Cannot add VM. Start On Boot selection in cloud-init configuration is invalid."),
        "{text}"
    );
    let mut missing = static_initialization(true);
    if let Some(nics) = missing.nic_configurations.as_mut() {
        nics.items[0].ip = None;
    }
    let vm = new_vm(&client, "no-address", missing).await;
    let err = client.add_vm(&vm, false).await.expect_err("static without address");
    assert!(
        err.to_string()
            .contains("Cannot add VM. Static IPv4 address is missing in cloud-init configuration."),
        "{err}"
    );
    assert_eq!(sim.control().vm_count(), 0, "a refused add created a VM");
}
