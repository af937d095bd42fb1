//! Answers the client must refuse with a typed error instead of misreading them or buffering them whole: oversized
//! bodies (with and without a Content-Length), a foreign root element, an HTML page, a truncated document. Each is
//! produced by the simulator's body faults.

mod common;

use capov_ovirt::xml::MAX_DECODED_ITEM_BYTES;
use capov_ovirt::{Error, MAX_BODY_BYTES, reason};
use capov_ovirt_sim::BodyFault;

/// 300 MB: far above the cap, and above what the test process could hold without it showing in its peak memory.
const HUGE: u64 = 300_000_000;

/// A simulator with three VMs, so that real answers are not empty, and a client for it.
async fn setup() -> (capov_ovirt_sim::SimulatorHandle, capov_ovirt::Client) {
    let (sim, client) = common::setup().await;
    sim.control().seed_vms("seeded-", 3, None).expect("seed VMs");
    (sim, client)
}

#[tokio::test]
async fn an_oversized_streamed_answer_is_refused_at_the_cap_and_never_held_whole() {
    let (sim, client) = setup().await;
    let oversized = BodyFault::Oversized {
        bytes: HUGE,
        announce_length: false,
    };
    sim.control()
        .set_body_fault(Some(oversized), Some("GET"), Some("/api/vms"));

    let err = client.vms().await.expect_err("a 300 MB answer is refused");
    match &err {
        Error::BodyTooLarge { what, limit } => {
            assert_eq!(*limit, MAX_BODY_BYTES);
            assert_eq!(what, "GET /ovirt-engine/api/vms");
        }
        other => panic!("expected BodyTooLarge, got {other:?}"),
    }
    assert_eq!(err.reason(), reason::UNEXPECTED_BODY);
    assert_eq!(err.label(), "body_too_large");
    assert!(
        !err.is_transient(),
        "the same request gets the same answer: reported, not retried quietly"
    );

    // The simulator makes each chunk only when the connection takes it, so what it made is what the client read
    // plus what the sockets buffer: the client stopped at the cap instead of reading 300 MB.
    let streamed = sim.control().streamed_bytes();
    assert!(
        streamed >= MAX_BODY_BYTES as u64,
        "the client read past the cap before refusing: {streamed} bytes made"
    );
    assert!(
        streamed <= MAX_BODY_BYTES as u64 + (16 << 20),
        "{streamed} bytes were made for a client that should stop at {MAX_BODY_BYTES}"
    );
    // Neither side held the answer: the whole test process never came near 300 MB.
    let peak = common::peak_rss();
    assert!(peak < 200 << 20, "peak resident memory {peak} bytes");

    // The connection was dropped, not poisoned: the next call gets a real answer.
    sim.control().set_body_fault(None, None, None);
    assert_eq!(client.vms().await.expect("a real answer again").len(), 3);
}

#[tokio::test]
async fn an_announced_oversized_answer_is_refused_before_reading_its_body() {
    let (sim, client) = setup().await;
    let oversized = BodyFault::Oversized {
        bytes: HUGE,
        announce_length: true,
    };
    sim.control()
        .set_body_fault(Some(oversized), Some("GET"), Some("/api/vms"));
    let err = client.vms().await.expect_err("refused");
    assert!(
        matches!(err, Error::BodyTooLarge { limit, .. } if limit == MAX_BODY_BYTES),
        "{err:?}"
    );
    // Refused on the Content-Length alone: only what the sockets buffered before the client hung up was made.
    let streamed = sim.control().streamed_bytes();
    assert!(streamed < MAX_BODY_BYTES as u64, "{streamed} bytes made");
}

#[tokio::test]
async fn an_answer_of_millions_of_empty_elements_is_refused_by_what_it_decodes_into() {
    let (sim, client) = setup().await;
    // 5 MB on the wire, under the byte cap (and small enough to be read beside the other tests' oversized answers
    // within the process's in-flight budget); decoded whole, a million VMs of 1.4 KB each would be 1.4 GB.
    let count = 1_000_000;
    let empty = BodyFault::EmptyElements {
        root: "vms".into(),
        child: "vm".into(),
        count,
    };
    sim.control().set_body_fault(Some(empty), Some("GET"), Some("/api/vms"));

    let err = client.vms().await.expect_err("millions of empty VMs are refused");
    match &err {
        Error::TooManyItems { what, detail } => {
            assert_eq!(what, "GET /vms");
            assert!(detail.contains(&MAX_DECODED_ITEM_BYTES.to_string()), "{detail}");
        }
        other => panic!("expected TooManyItems, got {other:?}"),
    }
    assert_eq!(err.reason(), reason::UNEXPECTED_BODY);
    assert_eq!(err.label(), "too_many_items");
    assert!(!err.is_transient(), "the same request gets the same answer");
    // The batched search asks again in halves, down to one VM, and still refuses rather than decoding it.
    let err = client
        .vm_statuses(&["a", "b", "c"])
        .await
        .expect_err("still refused alone");
    assert!(matches!(err, Error::TooManyItems { .. }), "{err:?}");
    let peak = common::peak_rss();
    eprintln!("peak resident memory: {:.1} MiB", peak as f64 / f64::from(1 << 20));
    assert!(peak < 200 << 20, "peak resident memory {peak} bytes");

    sim.control().set_body_fault(None, None, None);
    assert_eq!(client.vms().await.expect("a real answer again").len(), 3);
}

#[tokio::test]
async fn a_foreign_root_element_is_a_typed_error_not_an_empty_list() {
    let (sim, client) = setup().await;
    let vm_id = client.vms().await.expect("vms")[0].id.clone().expect("id");
    let foreign = BodyFault::ForeignRoot { root: "fault".into() };
    sim.control()
        .set_body_fault(Some(foreign), Some("GET"), Some("/api/vms"));

    let err = client.vms().await.expect_err("a <fault> is not a list of VMs");
    match &err {
        Error::UnexpectedRoot { what, expected, found } => {
            assert_eq!((*expected, found.as_str()), ("vms", "fault"));
            assert_eq!(what, "GET /vms");
        }
        other => panic!("expected UnexpectedRoot, got {other:?}"),
    }
    assert_eq!(err.reason(), reason::UNEXPECTED_BODY);
    assert_eq!(err.label(), "unexpected_root");
    let err = client.vm(&vm_id).await.expect_err("a <fault> is not a VM");
    assert!(
        matches!(&err, Error::UnexpectedRoot { expected: "vm", found, .. } if found == "fault"),
        "{err:?}"
    );
    // A search that finds nothing is still an empty list, and a name search still finds nothing.
    sim.control().set_body_fault(None, None, None);
    assert_eq!(
        client.search_vms("name=nothing-like-this").await.expect("search"),
        vec![]
    );
}

#[tokio::test]
async fn an_html_page_is_a_typed_error() {
    let (sim, client) = setup().await;
    sim.control()
        .set_body_fault(Some(BodyFault::Html), Some("GET"), Some("/api/vms"));
    let err = client
        .find_vm_by_name("worker")
        .await
        .expect_err("a sign-in page is not an answer");
    assert!(
        matches!(&err, Error::UnexpectedRoot { expected: "vms", found, .. } if found == "html"),
        "{err:?}"
    );
    assert!(!err.to_string().contains("Sign in"), "the body is never quoted: {err}");
}

#[tokio::test]
async fn a_truncated_answer_is_a_typed_error() {
    let (sim, client) = setup().await;
    assert_eq!(
        client.vms().await.expect("vms").len(),
        3,
        "the inventory has VMs to cut"
    );
    sim.control()
        .set_body_fault(Some(BodyFault::Truncated), Some("GET"), Some("/api/vms"));
    let err = client.vms().await.expect_err("half a document is refused");
    assert!(matches!(err, Error::UnexpectedBody(_)), "{err:?}");
    assert_eq!(err.reason(), reason::UNEXPECTED_BODY);
}
