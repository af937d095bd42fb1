//! Authentication and authorization of metrics scrapes, as controller-runtime's secure metrics filter: the bearer
//! token must be accepted by a TokenReview, and a SubjectAccessReview for the token's user must allow the
//! non-resource request (`get` on `/metrics`). Decisions are cached by a SHA-256 of the token (never the token
//! itself): allowed for 5 minutes, denied for 30 seconds, at most [`CACHE_CAPACITY`] entries. API errors are not
//! cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::Semaphore;

/// How long an allowed decision is reused.
pub const ALLOW_TTL: Duration = Duration::from_secs(300);
/// How long a denied decision (401 or 403) is reused.
pub const DENY_TTL: Duration = Duration::from_secs(30);
/// Most cached decisions; expired ones are dropped first, then the oldest.
pub const CACHE_CAPACITY: usize = 1024;
/// Time limit of each review call.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Reviews in flight at once: a flood of scrapes with fresh tokens cannot become a flood of API requests.
const MAX_CONCURRENT_REVIEWS: usize = 8;
/// Longest wait for one of the [`MAX_CONCURRENT_REVIEWS`]: a request that gets none is answered 503 instead of
/// holding its connection (a flood with fresh tokens would otherwise queue requests without limit).
const REVIEW_SLOT_WAIT: Duration = Duration::from_secs(5);

/// The outcome for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// 200: authenticated and authorized.
    Allowed,
    /// 401: no bearer token, or the TokenReview did not authenticate it.
    Unauthenticated(String),
    /// 403: authenticated as `user`, but the SubjectAccessReview did not allow the request.
    Forbidden { user: String, reason: String },
    /// 500: the API server could not be asked.
    Error(String),
    /// 503: every review slot stayed taken for [`REVIEW_SLOT_WAIT`]; the client may try again.
    Busy,
}

impl Decision {
    /// The HTTP status this decision answers with.
    pub fn status(&self) -> http::StatusCode {
        match self {
            Decision::Allowed => http::StatusCode::OK,
            Decision::Unauthenticated(_) => http::StatusCode::UNAUTHORIZED,
            Decision::Forbidden { .. } => http::StatusCode::FORBIDDEN,
            Decision::Error(_) => http::StatusCode::INTERNAL_SERVER_ERROR,
            Decision::Busy => http::StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

type CacheKey = [u8; 32];

/// Checks bearer tokens against the API server. Clone it freely (shared cache).
#[derive(Clone)]
pub struct Authorizer {
    client: kube::Client,
    cache: Arc<Mutex<DecisionCache>>,
    reviews: Arc<Semaphore>,
    slot_wait: Duration,
}

impl Authorizer {
    /// An authorizer that sends its reviews with `client` (the operator's own service account, which needs `create`
    /// on `tokenreviews` and `subjectaccessreviews`).
    pub fn new(client: kube::Client) -> Authorizer {
        Authorizer {
            client,
            cache: Arc::new(Mutex::new(DecisionCache::default())),
            reviews: Arc::new(Semaphore::new(MAX_CONCURRENT_REVIEWS)),
            slot_wait: REVIEW_SLOT_WAIT,
        }
    }

    /// The decision for a request to `path` with `method` carrying the `Authorization` header `authorization`.
    pub async fn authorize(&self, authorization: Option<&str>, method: &str, path: &str) -> Decision {
        let Some(token) = bearer_token(authorization) else {
            return Decision::Unauthenticated("no bearer token in the Authorization header".into());
        };
        let verb = method.to_ascii_lowercase();
        let key = cache_key(token, &verb, path);
        if let Some(decision) = self.cached(&key) {
            return decision;
        }
        let decision = match tokio::time::timeout(self.slot_wait, self.reviews.acquire()).await {
            Ok(Ok(_permit)) => self.review(token, &verb, path).await,
            Ok(Err(_)) => Decision::Error("authorizer closed".into()),
            Err(_) => Decision::Busy,
        };
        let ttl = match &decision {
            Decision::Allowed => Some(ALLOW_TTL),
            Decision::Unauthenticated(_) | Decision::Forbidden { .. } => Some(DENY_TTL),
            Decision::Error(_) | Decision::Busy => None,
        };
        if let Some(ttl) = ttl {
            self.remember(key, ttl, decision.clone());
        }
        decision
    }

    async fn review(&self, token: &str, verb: &str, path: &str) -> Decision {
        let token_review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let reviewed =
            match tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &token_review)).await {
                Ok(Ok(reviewed)) => reviewed,
                Ok(Err(err)) => return Decision::Error(format!("TokenReview failed: {err}")),
                Err(_) => return Decision::Error("TokenReview timed out".into()),
            };
        let status = reviewed.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            let reason = status.error.unwrap_or_else(|| "token not authenticated".into());
            return Decision::Unauthenticated(reason);
        }
        let user = status.user.unwrap_or_default();
        let username = user.username.clone().unwrap_or_default();
        let access_review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                resource_attributes: None,
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let reviewed =
            match tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &access_review)).await {
                Ok(Ok(reviewed)) => reviewed,
                Ok(Err(err)) => return Decision::Error(format!("SubjectAccessReview failed: {err}")),
                Err(_) => return Decision::Error("SubjectAccessReview timed out".into()),
            };
        let status = reviewed.status.unwrap_or_default();
        if status.allowed {
            Decision::Allowed
        } else {
            let reason = status
                .reason
                .filter(|reason| !reason.is_empty())
                .or(status.evaluation_error)
                .unwrap_or_else(|| format!("{verb} {path} is not allowed"));
            Decision::Forbidden { user: username, reason }
        }
    }

    fn cached(&self, key: &CacheKey) -> Option<Decision> {
        self.cache.lock().ok()?.get(key, Instant::now())
    }

    fn remember(&self, key: CacheKey, ttl: Duration, decision: Decision) {
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(key, Instant::now() + ttl, decision);
        }
    }

    /// Number of cached decisions (for tests and debugging).
    pub fn cached_decisions(&self) -> usize {
        self.cache.lock().map(|cache| cache.entries.len()).unwrap_or(0)
    }
}

/// Decisions by token hash, each with its expiry, at most [`CACHE_CAPACITY`].
#[derive(Default)]
struct DecisionCache {
    entries: HashMap<CacheKey, (Instant, Decision)>,
}

impl DecisionCache {
    fn get(&self, key: &CacheKey, now: Instant) -> Option<Decision> {
        let (expires, decision) = self.entries.get(key)?;
        (now < *expires).then(|| decision.clone())
    }

    fn insert(&mut self, key: CacheKey, expires: Instant, decision: Decision) {
        if self.entries.len() >= CACHE_CAPACITY && !self.entries.contains_key(&key) {
            let now = Instant::now();
            self.entries.retain(|_, (expires, _)| *expires > now);
            while self.entries.len() >= CACHE_CAPACITY {
                let oldest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (expires, _))| *expires)
                    .map(|(key, _)| *key);
                let Some(oldest) = oldest else { break };
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(key, (expires, decision));
    }
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive).
fn bearer_token(header: Option<&str>) -> Option<&str> {
    let header = header?.trim();
    let (scheme, token) = header.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn cache_key(token: &str, verb: &str, path: &str) -> CacheKey {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in [token, verb, path] {
        context.update(&(part.len() as u64).to_be_bytes());
        context.update(part.as_bytes());
    }
    let mut key = [0u8; 32];
    key.copy_from_slice(context.finish().as_ref());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An apiserver that accepts connections and never answers.
    async fn silent_apiserver() -> kube::Client {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        kube::Client::try_from(kube::Config::new(url.parse().expect("url"))).expect("client")
    }

    /// Issue 23, item 10: with every review slot held by reviews the apiserver does not answer, a request waits a
    /// bounded time and gets 503 instead of queueing for as long as the reviews take.
    #[tokio::test]
    async fn a_request_that_gets_no_review_slot_in_time_is_answered_busy() {
        let authorizer = Authorizer {
            slot_wait: Duration::from_millis(200),
            ..Authorizer::new(silent_apiserver().await)
        };
        let held: Vec<_> = (0..MAX_CONCURRENT_REVIEWS)
            .map(|index| {
                let authorizer = authorizer.clone();
                tokio::spawn(async move {
                    authorizer
                        .authorize(Some(&format!("Bearer token-{index}")), "GET", "/metrics")
                        .await
                })
            })
            .collect();
        // The slots are taken once every held review is waiting for the silent apiserver.
        capov_testkit::eventually(Duration::from_secs(5), "every review slot taken", || async {
            (authorizer.reviews.available_permits() == 0).then_some(())
        })
        .await;
        let started = std::time::Instant::now();
        let decision = authorizer.authorize(Some("Bearer one-more"), "GET", "/metrics").await;
        assert_eq!(decision, Decision::Busy);
        assert_eq!(decision.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        assert_eq!(authorizer.cached_decisions(), 0, "a busy answer is not remembered");
        for review in held {
            review.abort();
        }
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(Some("Basic abc")), None);
        assert_eq!(bearer_token(Some("Bearer ")), None);
        assert_eq!(bearer_token(None), None);
    }

    #[test]
    fn cache_expires_and_stays_bounded() {
        let mut cache = DecisionCache::default();
        let now = Instant::now();
        let key = cache_key("token", "get", "/metrics");
        cache.insert(key, now + DENY_TTL, Decision::Unauthenticated("no".into()));
        assert_eq!(cache.get(&key, now), Some(Decision::Unauthenticated("no".into())));
        assert_eq!(cache.get(&key, now + DENY_TTL), None);
        for i in 0..CACHE_CAPACITY + 10 {
            let expires = now + ALLOW_TTL + Duration::from_secs(i as u64);
            cache.insert(
                cache_key(&format!("t{i}"), "get", "/metrics"),
                expires,
                Decision::Allowed,
            );
        }
        assert_eq!(cache.entries.len(), CACHE_CAPACITY);
        // The entries that expire first were evicted; the newest is there.
        assert_eq!(cache.get(&key, now), None);
        let newest = cache_key(&format!("t{}", CACHE_CAPACITY + 9), "get", "/metrics");
        assert_eq!(cache.get(&newest, now), Some(Decision::Allowed));
    }

    #[test]
    fn cache_keys_separate_token_verb_and_path() {
        assert_ne!(cache_key("ab", "get", "/metrics"), cache_key("a", "bget", "/metrics"));
        assert_ne!(cache_key("t", "get", "/metrics"), cache_key("t", "get", "/other"));
        assert_eq!(cache_key("t", "get", "/metrics"), cache_key("t", "get", "/metrics"));
    }
}
