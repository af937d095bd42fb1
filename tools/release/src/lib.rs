//! CAPOV's clusterctl release artifacts, as Cluster API's provider contract for clusterctl wants them:
//! `metadata.yaml` (release series → contract), `infrastructure-components.yaml` (both charts rendered by helm
//! into one file with exactly one Namespace, the provider label on every object and a fully qualified image), the
//! cluster templates of `templates/`, and `ovirt-provider.yaml`.
//!
//! The artifacts are laid out as a clusterctl local repository, `<out>/infrastructure-ovirt/v<version>/`, so a
//! checkout can serve as the provider repository as it is; the files themselves are the assets of a release.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value, json};

/// clusterctl's name of CAPOV (`<type>-<name>`): the value of the provider label and the repository directory.
pub const PROVIDER_LABEL: &str = "infrastructure-ovirt";
/// The label clusterctl uses to find (and to delete or upgrade) a provider's components.
pub const PROVIDER_LABEL_KEY: &str = "cluster.x-k8s.io/provider";
/// The one Namespace of the components; clusterctl's `--target-namespace` replaces it.
pub const NAMESPACE: &str = "capov-system";
/// The manager image's repository. Fully qualified because clusterctl parses every image of the components as a
/// canonical reference and refuses `capov-manager:0.1.0`; it is the name Docker gives a locally built
/// `capov-manager:<version>` (the chart's default), so images loaded with `kind load docker-image` work unchanged.
/// Users point it at their registry with clusterctl's `images:` setting, not with a variable: clusterctl parses
/// images before substituting variables in `init --list-images` and `generate provider --describe/--raw`.
pub const IMAGE_REPOSITORY: &str = "docker.io/library/capov-manager";

/// The recommended label naming the release that wrote an object.
pub const VERSION_LABEL_KEY: &str = "app.kubernetes.io/version";

const METADATA_API_VERSION: &str = "clusterctl.cluster.x-k8s.io/v1alpha3";
/// Labels helm's charts carry that would be false once clusterctl installs the objects.
const HELM_LABELS: [&str; 2] = ["helm.sh/chart", "app.kubernetes.io/managed-by"];

/// The version being released: the workspace's.
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The directory of the current version inside a provider repository at `out`.
pub fn release_dir(out: &Path) -> PathBuf {
    version_dir(out, version())
}

/// The directory of `version` (without its `v`) inside a provider repository at `out`.
pub fn version_dir(out: &Path, version: &str) -> PathBuf {
    out.join(PROVIDER_LABEL).join(format!("v{version}"))
}

#[derive(Debug)]
pub struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

fn error(message: impl Into<String>) -> Error {
    Error(message.into())
}

/// One file of a release.
pub struct Artifact {
    pub file_name: String,
    pub content: String,
}

/// The directory holding helm: `CAPOV_HELM_DIR` or the cache of `tools/build-go-tools.sh --helm` (built on a miss).
pub fn helm_dir(root: &Path) -> Result<PathBuf, Error> {
    let script = root.join("tools/build-go-tools.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg("--helm")
        .output()
        .map_err(|err| error(format!("cannot run {}: {err}", script.display())))?;
    if !output.status.success() {
        return Err(error(format!(
            "{} --helm failed: {}",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
}

/// Every artifact of the current version, rendered from the repository at `root` with the helm binary `helm`.
pub fn artifacts(root: &Path, helm: &Path) -> Result<Vec<Artifact>, Error> {
    let metadata = read(&root.join("metadata.yaml"))?;
    render(root, root, helm, version(), metadata)
}

/// The artifacts this source would ship as the later release `next` (e.g. `0.2.0`) if nothing but the version
/// changed: both charts bumped to `next` (so the image tag and every object's `app.kubernetes.io/version` say it),
/// and metadata.yaml given a release series for `next` with the contract of the current one, as clusterctl wants
/// from a release it upgrades to (it reads the newest release's metadata.yaml, which must hold the series of the
/// installed version and of every later one). The upgrade test builds its "next version" with this.
pub fn next_release(root: &Path, helm: &Path, next: &str) -> Result<Vec<Artifact>, Error> {
    let current = parse_version(version())?;
    let (major, minor, patch) = parse_version(next)?;
    if (major, minor, patch) <= current {
        return Err(error(format!(
            "{next} is not later than the current version {}",
            version()
        )));
    }
    let staged = tempfile::tempdir().map_err(|err| error(format!("temporary directory: {err}")))?;
    for chart in ["chart/capov", "chart/capov-crds"] {
        copy_dir(&root.join(chart), &staged.path().join(chart))?;
        bump_chart(&staged.path().join(chart).join("Chart.yaml"), next)?;
    }
    let mut metadata = read(&root.join("metadata.yaml"))?;
    if contract_of(&metadata, next).is_err() {
        let contract = contract_of(&metadata, version())?;
        metadata.push_str(&format!(
            "  - major: {major}\n    minor: {minor}\n    contract: {contract}\n"
        ));
    }
    render(staged.path(), root, helm, next, metadata)
}

/// The release `version`: the charts under `charts` (whose appVersion must be `version`), the templates of `root`
/// and `metadata`.
fn render(charts: &Path, root: &Path, helm: &Path, version: &str, metadata: String) -> Result<Vec<Artifact>, Error> {
    for chart in ["chart/capov", "chart/capov-crds"] {
        check_chart_version(charts, chart, version)?;
    }
    let contract = contract_of(&metadata, version)?;
    let mut artifacts = vec![
        Artifact {
            file_name: "metadata.yaml".into(),
            content: metadata,
        },
        Artifact {
            file_name: "infrastructure-components.yaml".into(),
            content: components(charts, helm, &contract, version)?,
        },
    ];
    artifacts.extend(templates(root)?);
    Ok(artifacts)
}

/// The cluster templates of `templates/` (and ovirt-provider.yaml), checked.
fn templates(root: &Path) -> Result<Vec<Artifact>, Error> {
    let templates = root.join("templates");
    let mut names: Vec<String> = std::fs::read_dir(&templates)
        .map_err(|err| error(format!("{}: {err}", templates.display())))?
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml"))
        .collect();
    names.sort();
    if !names.iter().any(|name| name == "cluster-template.yaml") {
        return Err(error("templates/cluster-template.yaml (the default flavor) is missing"));
    }
    let mut artifacts = Vec::new();
    for name in names {
        let content = read(&templates.join(&name))?;
        check_template(&name, &content)?;
        artifacts.push(Artifact {
            file_name: name,
            content,
        });
    }
    Ok(artifacts)
}

fn parse_version(version: &str) -> Result<(u64, u64, u64), Error> {
    let parts: Vec<u64> = version
        .split('.')
        .map(|part| part.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| error(format!("{version:?} is not a version major.minor.patch")))?;
    match parts.as_slice() {
        [major, minor, patch] => Ok((*major, *minor, *patch)),
        _ => Err(error(format!("{version:?} is not a version major.minor.patch"))),
    }
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(to).map_err(|err| error(format!("{}: {err}", to.display())))?;
    let entries = std::fs::read_dir(from).map_err(|err| error(format!("{}: {err}", from.display())))?;
    for entry in entries {
        let entry = entry.map_err(|err| error(format!("{}: {err}", from.display())))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if source.is_dir() {
            copy_dir(&source, &target)?;
        } else {
            std::fs::copy(&source, &target).map_err(|err| error(format!("{}: {err}", source.display())))?;
        }
    }
    Ok(())
}

/// Sets a Chart.yaml's `version` and `appVersion` to `version`.
fn bump_chart(chart_yaml: &Path, version: &str) -> Result<(), Error> {
    let content = read(chart_yaml)?;
    let bumped: Vec<String> = content
        .lines()
        .map(|line| {
            if line.starts_with("version:") {
                format!("version: {version}")
            } else if line.starts_with("appVersion:") {
                format!("appVersion: \"{version}\"")
            } else {
                line.to_string()
            }
        })
        .collect();
    std::fs::write(chart_yaml, bumped.join("\n") + "\n")
        .map_err(|err| error(format!("{}: {err}", chart_yaml.display())))
}

/// Writes `artifacts` into the provider repository at `out` and returns the version directory. Directories of
/// other versions are removed: a generated repository holds the current version only (git keeps the others).
pub fn write(out: &Path, artifacts: &[Artifact]) -> Result<PathBuf, Error> {
    let provider_dir = out.join(PROVIDER_LABEL);
    if provider_dir.exists() {
        std::fs::remove_dir_all(&provider_dir).map_err(|err| error(format!("{}: {err}", provider_dir.display())))?;
    }
    write_version(out, version(), artifacts)
}

/// Writes `artifacts` of `version` into the provider repository at `out`, beside the versions already there (a
/// repository to upgrade from one to the other), and returns the version directory.
pub fn write_version(out: &Path, version: &str, artifacts: &[Artifact]) -> Result<PathBuf, Error> {
    let dir = version_dir(out, version);
    std::fs::create_dir_all(&dir).map_err(|err| error(format!("{}: {err}", dir.display())))?;
    for artifact in artifacts {
        let path = dir.join(&artifact.file_name);
        std::fs::write(&path, &artifact.content).map_err(|err| error(format!("{}: {err}", path.display())))?;
    }
    Ok(dir)
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|err| error(format!("{}: {err}", path.display())))
}

fn parse_documents(yaml: &str, source: &str) -> Result<Vec<Value>, Error> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(yaml).map_err(|err| error(format!("{source} is not valid YAML: {err}")))?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// The image tag comes from the chart's appVersion: it must be the version being released.
fn check_chart_version(root: &Path, chart: &str, version: &str) -> Result<(), Error> {
    let file = format!("{chart}/Chart.yaml");
    let documents = parse_documents(&read(&root.join(&file))?, &file)?;
    let app_version = documents.first().and_then(|d| d["appVersion"].as_str()).unwrap_or("");
    if app_version != version {
        return Err(error(format!(
            "{file} has appVersion {app_version:?}, but the release is {version}; bump the chart with the workspace"
        )));
    }
    Ok(())
}

/// The contract metadata.yaml declares for the release series (major.minor) of `version`. clusterctl refuses
/// a version without a series, so a missing entry is an error here already.
fn contract_of(metadata: &str, version: &str) -> Result<String, Error> {
    let documents = parse_documents(metadata, "metadata.yaml")?;
    let [metadata] = documents.as_slice() else {
        return Err(error("metadata.yaml must hold exactly one document"));
    };
    if metadata["apiVersion"] != METADATA_API_VERSION || metadata["kind"] != "Metadata" {
        return Err(error(format!(
            "metadata.yaml must be apiVersion {METADATA_API_VERSION}, kind Metadata"
        )));
    }
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap_or(u64::MAX));
    let (major, minor) = (parts.next(), parts.next());
    metadata["releaseSeries"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|series| series["major"].as_u64() == major && series["minor"].as_u64() == minor)
        .and_then(|series| series["contract"].as_str())
        .map(str::to_string)
        .ok_or_else(|| {
            error(format!(
                "metadata.yaml has no releaseSeries entry (with a contract) for version {version}"
            ))
        })
}

/// `infrastructure-components.yaml`: the Namespace, then the CRD chart, then the operator chart, as clusterctl
/// wants them.
fn components(root: &Path, helm: &Path, contract: &str, version: &str) -> Result<String, Error> {
    let crds = helm_template(helm, root, "chart/capov-crds", &[])?;
    let image = format!("manager.image={IMAGE_REPOSITORY}");
    // No ServiceMonitor: clusterctl cannot make it depend on the cluster serving monitoring.coreos.com/v1.
    let operator = helm_template(
        helm,
        root,
        "chart/capov",
        &["--set", &image, "--set", "serviceMonitor.enabled=false"],
    )?;

    let mut objects = vec![json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE},
    })];
    for (chart, rendered) in [("chart/capov-crds", &crds), ("chart/capov", &operator)] {
        // clusterctl runs the whole file through envsubst: a `$` from a chart would be read as a variable.
        if let Some(line) = rendered.lines().find(|line| line.contains('$')) {
            return Err(error(format!(
                "{chart} renders a `$`, which clusterctl would take for a variable: {line}"
            )));
        }
        objects.extend(parse_documents(rendered, chart)?);
    }

    let mut deployments = 0;
    for object in &mut objects {
        relabel(object, version)?;
        match object["kind"].as_str() {
            Some("CustomResourceDefinition") => check_contract_label(object, contract)?,
            Some("Deployment") => {
                check_manager_container(object)?;
                deployments += 1;
            }
            _ => {}
        }
    }
    if deployments != 1 {
        return Err(error(format!(
            "expected one Deployment in chart/capov, found {deployments}"
        )));
    }

    let mut out = String::from(
        "# CAPOV provider components for clusterctl, rendered from chart/capov-crds and chart/capov by\n\
         # `cargo run -p capov-release --bin release-artifacts`; do not edit.\n",
    );
    for (index, object) in objects.iter().enumerate() {
        if index > 0 {
            out.push_str("---\n");
        }
        out.push_str(&serde_saphyr::to_string(object).map_err(|err| error(format!("render YAML: {err}")))?);
    }
    Ok(out)
}

fn helm_template(helm: &Path, root: &Path, chart: &str, args: &[&str]) -> Result<String, Error> {
    // Keep helm away from the user's own configuration, repositories and caches.
    let home = tempfile::tempdir().map_err(|err| error(format!("temporary directory: {err}")))?;
    let output = Command::new(helm)
        .args(["template", "capov", chart, "--namespace", NAMESPACE])
        .args(args)
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .current_dir(root)
        .output()
        .map_err(|err| error(format!("cannot run {}: {err}", helm.display())))?;
    if !output.status.success() {
        return Err(error(format!(
            "helm template {chart} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Every object gets the provider label (clusterctl adds it on install too, but the file should say what it
/// installs) and the release's `app.kubernetes.io/version` (the CRD chart's objects lack it; it tells which
/// release last wrote a CRD); helm's own labels go.
fn relabel(object: &mut Value, version: &str) -> Result<(), Error> {
    let metadata = object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| error("a rendered object has no metadata"))?;
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| error("metadata.labels is not a map"))?;
    for label in HELM_LABELS {
        labels.remove(label);
    }
    labels.insert(PROVIDER_LABEL_KEY.into(), PROVIDER_LABEL.into());
    labels
        .entry(VERSION_LABEL_KEY)
        .or_insert_with(|| Value::String(version.into()));
    Ok(())
}

/// CAPI finds the contract an infrastructure kind implements through a label on its CRD; clusterctl (1.13+)
/// wants metadata.yaml to agree.
fn check_contract_label(crd: &Value, contract: &str) -> Result<(), Error> {
    let key = format!("cluster.x-k8s.io/{contract}");
    if crd["metadata"]["labels"][&key].is_string() {
        Ok(())
    } else {
        Err(error(format!(
            "CRD {} lacks the label {key} that metadata.yaml's contract {contract} implies",
            crd["metadata"]["name"]
        )))
    }
}

/// clusterctl's contract names the controller's container `manager`.
fn check_manager_container(deployment: &Value) -> Result<(), Error> {
    let containers = deployment["spec"]["template"]["spec"]["containers"].as_array();
    if containers.is_some_and(|containers| containers.iter().any(|c| c["name"] == "manager")) {
        Ok(())
    } else {
        Err(error(
            "the Deployment has no container named manager, which clusterctl's contract requires",
        ))
    }
}

/// A template must parse as Kubernetes objects, and none may carry the provider label: clusterctl delete and
/// upgrade remove every object with that label, which must never hit a user's objects.
fn check_template(name: &str, content: &str) -> Result<(), Error> {
    let documents = parse_documents(content, &format!("templates/{name}"))?;
    if documents.is_empty() {
        return Err(error(format!("templates/{name} holds no object")));
    }
    for document in &documents {
        if !document["apiVersion"].is_string() || !document["kind"].is_string() {
            return Err(error(format!("templates/{name}: an object lacks apiVersion or kind")));
        }
        if !document["metadata"]["labels"][PROVIDER_LABEL_KEY].is_null() {
            return Err(error(format!(
                "templates/{name}: {} carries {PROVIDER_LABEL_KEY}; clusterctl delete would remove it",
                document["kind"]
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_comes_from_the_series_of_this_version() {
        let metadata = format!(
            "apiVersion: {METADATA_API_VERSION}\nkind: Metadata\nreleaseSeries:\n  - major: 0\n    minor: 0\n    \
             contract: v1beta1\n  - major: 0\n    minor: 1\n    contract: v1beta2\n"
        );
        assert_eq!(contract_of(&metadata, "0.1.0").unwrap(), "v1beta2");

        let other_series = metadata.replace("minor: 1", "minor: 2");
        let err = contract_of(&other_series, "0.1.0").unwrap_err();
        assert!(err.to_string().contains("no releaseSeries entry"), "{err}");

        let wrong_api = metadata.replace(METADATA_API_VERSION, "clusterctl.cluster.x-k8s.io/v1alpha2");
        assert!(contract_of(&wrong_api, "0.1.0").is_err());
    }

    #[test]
    fn crds_must_carry_the_contract_label() {
        let crd = json!({"metadata": {"name": "x", "labels": {"cluster.x-k8s.io/v1beta2": "v1beta1"}}});
        assert!(check_contract_label(&crd, "v1beta2").is_ok());
        assert!(check_contract_label(&crd, "v1beta3").is_err());
    }

    #[test]
    fn templates_must_not_carry_the_provider_label() {
        let labelled = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  labels:\n    \
                        cluster.x-k8s.io/provider: infrastructure-ovirt\n";
        let err = check_template("t.yaml", labelled).unwrap_err();
        assert!(err.to_string().contains("clusterctl delete would remove it"), "{err}");
        assert!(check_template("t.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n").is_ok());
        assert!(check_template("t.yaml", "kind: Secret\n").is_err());
    }

    #[test]
    fn relabel_adds_the_provider_label_and_drops_helms() {
        let mut object = json!({"metadata": {"labels": {"helm.sh/chart": "capov-0.1.0",
                                                       "app.kubernetes.io/managed-by": "Helm", "keep": "me"}}});
        relabel(&mut object, "0.1.0").unwrap();
        assert_eq!(
            object["metadata"]["labels"],
            json!({"keep": "me", "cluster.x-k8s.io/provider": "infrastructure-ovirt",
                   "app.kubernetes.io/version": "0.1.0"})
        );
        let mut bare = json!({"metadata": {"name": "n"}});
        relabel(&mut bare, "0.2.0").unwrap();
        assert_eq!(
            bare["metadata"]["labels"],
            json!({"cluster.x-k8s.io/provider": "infrastructure-ovirt", "app.kubernetes.io/version": "0.2.0"})
        );
    }

    #[test]
    fn bump_chart_sets_both_versions_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let chart = dir.path().join("Chart.yaml");
        std::fs::write(
            &chart,
            "apiVersion: v2\nname: capov\nversion: 0.1.0\nappVersion: \"0.1.0\"\nkubeVersion: x\n",
        )
        .unwrap();
        bump_chart(&chart, "0.2.0").unwrap();
        assert_eq!(
            std::fs::read_to_string(&chart).unwrap(),
            "apiVersion: v2\nname: capov\nversion: 0.2.0\nappVersion: \"0.2.0\"\nkubeVersion: x\n"
        );
    }

    #[test]
    fn versions_parse_as_major_minor_patch() {
        assert_eq!(parse_version("0.2.0").unwrap(), (0, 2, 0));
        assert!(parse_version("0.2").is_err());
        assert!(parse_version("v0.2.0").is_err());
    }
}
