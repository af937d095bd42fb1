//! Installs CAPOV's CRDs from the CRD chart, exactly as a user would get them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

use crate::{HarnessError, assets};

/// `chart/capov-crds/templates`, where the generated CRD manifests are committed.
pub fn crd_chart_dir() -> PathBuf {
    assets::repo_root().join("chart/capov-crds/templates")
}

/// Applies every CRD of the chart (server-side apply) and waits until each is Established.
pub async fn install_crds(client: &kube::Client) -> Result<Vec<String>, HarnessError> {
    let dir = crd_chart_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|err| HarnessError::io(&dir, err))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    paths.sort();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|err| HarnessError::io(&path, err))?;
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).map_err(|err| HarnessError::Crd {
            path: path.clone(),
            message: err.to_string(),
        })?;
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &PatchParams::apply("capov-harness").force(), &Patch::Apply(&crd))
            .await
            .map_err(|err| HarnessError::Crd {
                path: path.clone(),
                message: err.to_string(),
            })?;
        names.push(name);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for name in &names {
        loop {
            let established = api.get_opt(name).await.ok().flatten().is_some_and(|crd| {
                crd.status
                    .and_then(|status| status.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if established {
                break;
            }
            if Instant::now() > deadline {
                return Err(HarnessError::Crd {
                    path: name.into(),
                    message: "not Established within 60s".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(names)
}
