//! Requests as the tests make them to the HTTP servers under test (probes, metrics).

/// GET `url`, with `token` as its bearer token when given: the status and the body. Fails the test when nothing
/// answers.
pub async fn get(client: &reqwest::Client, url: &str, token: Option<&str>) -> (u16, String) {
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap_or_else(|err| panic!("GET {url}: {err:?}"));
    let status = response.status().as_u16();
    (
        status,
        response.text().await.unwrap_or_else(|err| panic!("GET {url}: {err}")),
    )
}
