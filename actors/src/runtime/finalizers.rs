//! Adding and removing CAPOV's finalizers with a JSON patch that fails when someone else changed the list meanwhile.
//! Another controller writing the object at the same moment (CAPI core adds labels and owners to a new
//! OVirtMachine) is expected: the patch is retried on the freshly read object a few times before giving up.

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

const ATTEMPTS: usize = 3;

/// Adds `finalizer` unless present. Returns the object as written, or as read when a patch found the list changed
/// and the read shows the finalizer there already (a write whose answer was lost did add it); None when the object
/// given had it. A caller that acts on the object again must go on from the returned one: the one it gave is stale,
/// and deciding on it again would add the finalizer again, forever if its cache is stale too.
pub async fn ensure<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut object = object.clone();
    for attempt in 1..=ATTEMPTS {
        let current = object.finalizers().to_vec();
        if current.iter().any(|f| f == finalizer) {
            return Ok((attempt > 1).then_some(object));
        }
        let mut wanted = current.clone();
        wanted.push(finalizer.to_string());
        match write(api, &object, current, wanted).await {
            Err(err) if attempt < ATTEMPTS && is_stale(&err) => object = api.get(&object.name_any()).await?,
            other => return other.map(Some),
        }
    }
    Ok(None)
}

/// [`ensure`], and in the same patch the annotation `key: value` unless the object carries `key` already (whatever
/// its value). The patch applies only to the object as read (its resourceVersion), so a value someone wrote
/// meanwhile is never replaced.
pub async fn ensure_with_annotation<K>(
    api: &Api<K>,
    object: &K,
    finalizer: &str,
    (key, value): (&str, &str),
) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut object = object.clone();
    for attempt in 1..=ATTEMPTS {
        let has_finalizer = object.finalizers().iter().any(|f| f == finalizer);
        let annotations = object.meta().annotations.as_ref();
        let has_annotation = annotations.is_some_and(|a| a.contains_key(key));
        if has_finalizer && has_annotation {
            return Ok(None);
        }
        let mut operations = vec![json!({"op": "test", "path": "/metadata/resourceVersion",
                                          "value": object.resource_version()})];
        if !has_finalizer {
            let mut wanted = object.finalizers().to_vec();
            wanted.push(finalizer.to_string());
            operations.push(json!({"op": "add", "path": "/metadata/finalizers", "value": wanted}));
        }
        if !has_annotation {
            operations.push(match annotations {
                None => json!({"op": "add", "path": "/metadata/annotations", "value": {key: value}}),
                Some(_) => json!({"op": "add", "path": format!("/metadata/annotations/{}", pointer_token(key)),
                                  "value": value}),
            });
        }
        let patch: json_patch::Patch = serde_json::from_value(json!(operations)).map_err(kube::Error::SerdeError)?;
        match api
            .patch(&object.name_any(), &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
        {
            Err(err) if attempt < ATTEMPTS && is_stale(&err) => object = api.get(&object.name_any()).await?,
            other => return other.map(Some),
        }
    }
    Ok(None)
}

/// A key as one JSON-pointer token (RFC 6901: `~` → `~0`, `/` → `~1`).
fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Removes `finalizer` if present. Returns the object as written, None when no write was needed or it is gone.
pub async fn remove<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<Option<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut object = object.clone();
    for attempt in 1..=ATTEMPTS {
        let current = object.finalizers().to_vec();
        if !current.iter().any(|f| f == finalizer) {
            return Ok(None);
        }
        let wanted: Vec<String> = current.iter().filter(|f| *f != finalizer).cloned().collect();
        match write(api, &object, current, wanted).await {
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(None),
            Err(err) if attempt < ATTEMPTS && is_stale(&err) => match api.get_opt(&object.name_any()).await? {
                Some(latest) => object = latest,
                None => return Ok(None),
            },
            other => return other.map(Some),
        }
    }
    Ok(None)
}

/// A failed `test` operation (the object changed since it was read) comes back as 422 Invalid; 409 is a plain
/// conflict.
fn is_stale(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 409 || status.code == 422)
}

/// One attempt: sets the finalizers to `wanted` if they are still `current` on the server. Only the list is
/// compared, not the resourceVersion: a new OVirtMachine is written by others at once (CAPI core's owner reference,
/// CAPOV's own status), and a test of the resourceVersion failed on those about every other time, costing a read and
/// a second patch. Public for the tests against a real apiserver.
pub async fn write<K>(api: &Api<K>, object: &K, current: Vec<String>, wanted: Vec<String>) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch: json_patch::Patch =
        serde_json::from_value(json!(list_patch(current, wanted))).map_err(kube::Error::SerdeError)?;
    api.patch(&object.name_any(), &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
}

/// The JSON patch that replaces the finalizers `current` by `wanted`. An object without finalizers has no
/// `metadata.finalizers` at all (the apiserver omits an empty list); the apiserver's JSON patch passes a `test` of
/// null on a missing member and fails it on a present one, so that case too applies only while nobody added one.
fn list_patch(current: Vec<String>, wanted: Vec<String>) -> serde_json::Value {
    let expected = match current.is_empty() {
        true => serde_json::Value::Null,
        false => json!(current),
    };
    json!([
        {"op": "test", "path": "/metadata/finalizers", "value": expected},
        {"op": "add", "path": "/metadata/finalizers", "value": wanted}
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_without_finalizers_is_tested_for_none_not_for_its_resource_version() {
        let patch = list_patch(vec![], vec!["a".into()]);
        assert_eq!(
            patch,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["a"]}
            ])
        );
    }

    #[test]
    fn an_object_with_finalizers_is_tested_for_exactly_that_list() {
        let patch = list_patch(vec!["a".into()], vec!["a".into(), "b".into()]);
        assert_eq!(
            patch[0],
            json!({"op": "test", "path": "/metadata/finalizers", "value": ["a"]})
        );
        assert_eq!(patch[1]["value"], json!(["a", "b"]));
    }
}
