//! What a provider actor that failed is started again from: the OVirtProvider as the apiserver has it now. The
//! supervisor once replayed the object it had cached when the actor failed; a narrowing of `spec.allowedNamespaces`
//! or a deletion that landed during the restart delay was then undone (issue 23).

use capov_crds::OVirtProvider;
use capov_crds::labels::WATCH_FILTER_LABEL;
use kube::ResourceExt;
use kube::api::Api;

use crate::runtime::kube::slim;
use crate::runtime::shared::Shared;

/// The provider `name` as it is now, when it is still there and still this operator's (`--watch-filter`).
pub async fn current(shared: &Shared, name: &str) -> Result<Option<OVirtProvider>, kube::Error> {
    let providers: Api<OVirtProvider> = Api::all(shared.client.clone());
    let Some(mut provider) = providers.get_opt(name).await? else {
        return Ok(None);
    };
    let watched = match &shared.settings.watch_filter {
        Some(value) => provider.labels().get(WATCH_FILTER_LABEL) == Some(value),
        None => true,
    };
    slim::crd(&mut provider);
    Ok(watched.then_some(provider))
}
