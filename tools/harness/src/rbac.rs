//! Service accounts as the tests use them to call the API server or the metrics endpoint: a token of a new account,
//! ClusterRoles bound to it, and a wait until the authorizer applies a binding.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};

use crate::HarnessError;

/// How long a new binding may take to reach the authorizer.
const BINDING_DELAY: Duration = Duration::from_secs(30);

fn kube_error(err: kube::Error) -> HarnessError {
    HarnessError::Kube(err.to_string())
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

/// Creates the service account `namespace/name` and returns a token of it (a JWT signed by that API server, valid
/// for an hour).
pub async fn service_account_token(client: &kube::Client, namespace: &str, name: &str) -> Result<String, HarnessError> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let account = ServiceAccount {
        metadata: named(name),
        ..Default::default()
    };
    accounts
        .create(&PostParams::default(), &account)
        .await
        .map_err(kube_error)?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let answer = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(kube_error)?;
    answer
        .status
        .and_then(|status| status.token)
        .ok_or_else(|| HarnessError::Kube(format!("no token in the TokenRequest of {namespace}/{name}")))
}

/// A new service account `namespace/account` allowed to GET `/metrics` by a ClusterRole of its own with the rule of
/// the chart's `capov-metrics-reader`: its token, once the authorizer applies the binding.
pub async fn metrics_reader_token(
    client: &kube::Client,
    namespace: &str,
    account: &str,
) -> Result<String, HarnessError> {
    let token = service_account_token(client, namespace, account).await?;
    let role = format!("{namespace}-{account}-metrics-reader");
    grant(client, &role, namespace, account, metrics_reader_rules()).await?;
    wait_allowed(client, namespace, account, "/metrics").await?;
    Ok(token)
}

/// The rule of the chart's `capov-metrics-reader` ClusterRole: GET on `/metrics`.
fn metrics_reader_rules() -> Vec<PolicyRule> {
    vec![PolicyRule {
        non_resource_urls: Some(vec!["/metrics".into()]),
        verbs: vec!["get".into()],
        ..Default::default()
    }]
}

/// A ClusterRole `name` with `rules`, bound to the service account `namespace/account` by the ClusterRoleBinding
/// `name`.
pub async fn grant(
    client: &kube::Client,
    name: &str,
    namespace: &str,
    account: &str,
    rules: Vec<PolicyRule>,
) -> Result<(), HarnessError> {
    let role = ClusterRole {
        metadata: named(name),
        rules: Some(rules),
        ..Default::default()
    };
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .map_err(kube_error)?;
    bind_cluster_role(client, name, name, namespace, account).await
}

/// Binds the ClusterRole `role` to the service account `namespace/account`, by the ClusterRoleBinding `binding`.
pub async fn bind_cluster_role(
    client: &kube::Client,
    binding: &str,
    role: &str,
    namespace: &str,
    account: &str,
) -> Result<(), HarnessError> {
    let binding = ClusterRoleBinding {
        metadata: named(binding),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(namespace.into()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .map_err(kube_error)?;
    Ok(())
}

/// Waits until RBAC lets the service account `namespace/account` GET the non-resource `path`. Bindings reach the
/// authorizer's cache a moment after they are created, and an endpoint that caches denials (CAPOV's `/metrics`)
/// would remember an answer asked for too early.
pub async fn wait_allowed(
    client: &kube::Client,
    namespace: &str,
    account: &str,
    path: &str,
) -> Result<(), HarnessError> {
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{namespace}:{account}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
            ]),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.into()),
                verb: Some("get".into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    capov_testkit::until(BINDING_DELAY, || async {
        let reviewed = reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|err| err.to_string())?;
        match reviewed.status {
            Some(status) if status.allowed => Ok(()),
            status => Err(format!("{status:?}")),
        }
    })
    .await
    .map_err(|timed_out| HarnessError::TimedOut {
        what: format!("RBAC to allow {namespace}/{account} to GET {path}"),
        detail: timed_out.to_string(),
    })
}
