//! Keeps each OVirtMachineTemplate's status (capacity, nodeInfo) current: every change of a template seen by its
//! watch hands the status computed from its spec (`capov_core::placement::template_capacity`) to the status writer, which skips it
//! when the object already carries it. Templates need no actor: the computation reads nothing but the spec.

use capov_crds::OVirtMachineTemplate;
use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::watcher::{self, Event};
use ractor::ActorRef;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::runtime::keys::ObjectKey;
use crate::runtime::mailbox;
use crate::runtime::status::writer::StatusWriterMsg;
use capov_core::placement::template_capacity::template_status;

/// Runs until the status writer is gone or the task is aborted; a watch error is retried by the stream's backoff.
pub(crate) fn spawn<S>(stream: S, writer: ActorRef<StatusWriterMsg>, metrics: Metrics) -> JoinHandle<()>
where
    S: futures::Stream<Item = Result<Event<OVirtMachineTemplate>, watcher::Error>> + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            let messages = match item {
                Ok(Event::Apply(template) | Event::InitApply(template)) => on_template(&metrics, &template),
                Ok(Event::Delete(template)) => key_of(&template).map(StatusWriterMsg::Forget).into_iter().collect(),
                Ok(Event::Init | Event::InitDone) => Vec::new(),
                Err(err) => {
                    tracing::debug!(error = %err, "OVirtMachineTemplate watch error; retrying with backoff");
                    Vec::new()
                }
            };
            for message in messages {
                if mailbox::cast(&metrics, &writer, message).is_err() {
                    return;
                }
            }
        }
    })
}

/// What the writer is told about one template: the status it carries now (so that an equal one is not written
/// again after a restart), then the status its spec gives.
fn on_template(metrics: &Metrics, template: &OVirtMachineTemplate) -> Vec<StatusWriterMsg> {
    let Some(key) = key_of(template) else {
        return Vec::new();
    };
    let computed = template_status(&template.spec.template.spec);
    let Ok(status) = serde_json::to_value(&computed) else {
        return Vec::new();
    };
    let mut messages = Vec::with_capacity(2);
    if let Some(current) = template.status.as_ref().and_then(|s| serde_json::to_value(s).ok()) {
        messages.push(crate::runtime::status::writer::seen(metrics, key.clone(), &current).1);
    }
    messages.push(StatusWriterMsg::Update {
        key,
        status,
        pace: crate::runtime::status::writer::Pace::Now,
    });
    messages
}

fn key_of(template: &OVirtMachineTemplate) -> Option<ObjectKey> {
    Some(ObjectKey::machine_template(
        &template.namespace()?,
        &template.name_any(),
    ))
}
