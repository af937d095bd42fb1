//! Many large answers read at once never hold more than the process-wide budget together: the simulator sends each
//! 6 MiB of its body and then stalls, so every read holds what it got until its deadline, and the reads past the
//! budget are stopped. Its own test binary, since the budget is the process's: another test reading beside it would
//! change what this one sees.

mod common;

use capov_ovirt::{Error, MAX_BODY_BYTES_IN_FLIGHT, reason};
use capov_ovirt_sim::BodyFault;
use std::time::Duration;

const READS: usize = 12;
/// What the simulator sends of each answer before it stalls.
const HELD: u64 = 6 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_answers_read_at_once_stay_within_the_process_budget() {
    let sim = common::simulator().await;
    // A short request deadline: the stalled reads end there.
    let config = common::config(&sim).with_timeouts(Duration::from_secs(5), Duration::from_secs(3));
    let client = capov_ovirt::Client::new(config).expect("client");
    sim.control().seed_vms("seeded-", 3, None).expect("seed VMs");
    // Logged in and connected before the reads start together.
    assert_eq!(client.vms().await.expect("a real answer").len(), 3);
    sim.control()
        .set_body_fault(Some(BodyFault::Stalled { bytes: HELD }), Some("GET"), Some("/api/vms"));

    let reads = (0..READS).map(|_| {
        let client = client.clone();
        tokio::spawn(async move { client.vms().await })
    });
    // Spawned all at once (the iterator is lazy), awaited afterwards.
    let reads: Vec<_> = reads.collect();
    let mut stopped_by_budget = 0;
    let mut timed_out = 0;
    for read in reads {
        match read.await.expect("read task") {
            Err(err @ Error::AnswersTooLarge { .. }) => {
                assert_eq!(err.reason(), reason::UNEXPECTED_BODY);
                assert_eq!(err.label(), "answers_too_large");
                stopped_by_budget += 1;
            }
            Err(err) if err.is_transient() => timed_out += 1,
            other => panic!("expected the budget or the deadline to end the read, got {other:?}"),
        }
    }
    // Each read holds a buffer of 8 MiB for its 6 MiB (buffers double): four fill the 32 MiB budget, so at least
    // eight of the twelve are stopped. Without the budget all twelve would hold theirs until the deadline, 96 MiB.
    let peak = common::peak_rss();
    println!(
        "{READS} answers stalled after {} MiB at once: {stopped_by_budget} stopped by the \
         {MAX_BODY_BYTES_IN_FLIGHT}-byte budget, {timed_out} ended at their deadline; peak RSS {:.1} MiB",
        HELD >> 20,
        peak as f64 / 1048576.0
    );
    assert!(
        stopped_by_budget >= READS - 4,
        "only {stopped_by_budget} reads met the budget"
    );
    assert!(peak < 90 << 20, "peak resident memory {peak} bytes");

    sim.control().set_body_fault(None, None, None);
    assert_eq!(client.vms().await.expect("a real answer again").len(), 3);
}
