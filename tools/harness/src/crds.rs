//! Installs CAPOV's CRD chart (the CRDs and the admission policy beside them), exactly as a user gets them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;

use crate::{HarnessError, assets};

/// `chart/capov-crds/templates`, where the generated manifests are committed.
pub fn crd_chart_dir() -> PathBuf {
    assets::repo_root().join("chart/capov-crds/templates")
}

/// Applies every manifest of the CRD chart (server-side apply) and waits until each CRD is Established. Returns
/// the names of the CRDs.
pub async fn install_crds(client: &kube::Client) -> Result<Vec<String>, HarnessError> {
    apply_manifests(client, &crd_chart_dir()).await
}

/// Applies every `*.yaml` of `dir` (CRDs first, then the other objects) and waits until each CRD is Established.
pub(crate) async fn apply_manifests(client: &kube::Client, dir: &Path) -> Result<Vec<String>, HarnessError> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|err| HarnessError::io(dir, err))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    paths.sort();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("capov-harness").force();
    let mut crd_names = Vec::new();
    let mut others = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|err| HarnessError::io(&path, err))?;
        let documents: Vec<DynamicObject> = serde_saphyr::from_multiple(&text).map_err(|err| HarnessError::Crd {
            path: path.clone(),
            message: err.to_string(),
        })?;
        for document in documents {
            let kind = document.types.as_ref().map(|t| t.kind.as_str()).unwrap_or_default();
            if kind == "CustomResourceDefinition" {
                let name = document.metadata.name.clone().unwrap_or_default();
                crds.patch(&name, &params, &Patch::Apply(&document))
                    .await
                    .map_err(|err| HarnessError::Crd {
                        path: path.clone(),
                        message: err.to_string(),
                    })?;
                crd_names.push(name);
            } else {
                others.push((path.clone(), document));
            }
        }
    }
    // Policies may refer to the CRDs' types, so they come after the CRDs.
    for (path, document) in others {
        let types = document.types.clone().unwrap_or_default();
        let gvk = GroupVersionKind::try_from(&types).map_err(|err| HarnessError::Crd {
            path: path.clone(),
            message: err.to_string(),
        })?;
        let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
            .await
            .map_err(|err| HarnessError::Crd {
                path: path.clone(),
                message: err.to_string(),
            })?;
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let name = document.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&document))
            .await
            .map_err(|err| HarnessError::Crd {
                path: path.clone(),
                message: err.to_string(),
            })?;
    }
    wait_established(&crds, &crd_names).await?;
    Ok(crd_names)
}

/// The names of the CRDs the `*.yaml` manifests of `dir` define.
pub(crate) fn manifest_crd_names(dir: &Path) -> Result<Vec<String>, HarnessError> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|err| HarnessError::io(dir, err))? {
        let path = entry.map_err(|err| HarnessError::io(dir, err))?.path();
        if path.extension().is_none_or(|ext| ext != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|err| HarnessError::io(&path, err))?;
        let documents: Vec<DynamicObject> = serde_saphyr::from_multiple(&text).map_err(|err| HarnessError::Crd {
            path: path.clone(),
            message: err.to_string(),
        })?;
        names.extend(
            documents
                .into_iter()
                .filter(|d| d.types.as_ref().is_some_and(|t| t.kind == "CustomResourceDefinition"))
                .filter_map(|d| d.metadata.name),
        );
    }
    Ok(names)
}

async fn wait_established(crds: &Api<CustomResourceDefinition>, names: &[String]) -> Result<(), HarnessError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    for name in names {
        let left = deadline.saturating_duration_since(Instant::now());
        capov_testkit::until(left, || async { is_established(crds, name).await.then_some(()) })
            .await
            .map_err(|timed_out| HarnessError::TimedOut {
                what: format!("CRD {name} to be Established"),
                detail: timed_out.to_string(),
            })?;
    }
    Ok(())
}

async fn is_established(crds: &Api<CustomResourceDefinition>, name: &str) -> bool {
    crds.get_opt(name).await.ok().flatten().is_some_and(|crd| {
        crd.status
            .and_then(|status| status.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    })
}
