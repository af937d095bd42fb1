//! A client of the engine simulator's REST API as the simulator tests drive it: logged in through the engine's SSO
//! (as CAPOV's client does), sending requests by hand so that a test sees each status and body as they come.

use capov_ovirt_sim::{Simulator, SimulatorHandle};
use reqwest::Method;

const XML: &str = "application/xml";

/// A simulator and an SSO access token of one of its users.
pub struct Session {
    pub sim: SimulatorHandle,
    pub http: reqwest::Client,
    pub token: String,
}

impl Session {
    /// A plain-HTTP simulator with the default inventory, logged in as its default user `admin@internal`.
    pub async fn new() -> Session {
        let sim = Simulator::builder()
            .plain_http()
            .start()
            .await
            .expect("simulator starts");
        Session::login(sim, "admin@internal", "admin").await
    }

    /// Logs in to `sim` (serving plain HTTP) as `user`.
    pub async fn login(sim: SimulatorHandle, user: &str, password: &str) -> Session {
        let http = reqwest::Client::new();
        let answer: serde_json::Value = http
            .post(format!("{}/ovirt-engine/sso/oauth/token", sim.base_url()))
            .header("Accept", "application/json")
            .form(&[
                ("grant_type", "password"),
                ("scope", "ovirt-app-api"),
                ("username", user),
                ("password", password),
            ])
            .send()
            .await
            .expect("SSO token request")
            .json()
            .await
            .expect("SSO answer in JSON");
        let token = answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token for {user}: {answer}"))
            .to_string();
        Session { sim, http, token }
    }

    /// `method` on `path` below the API root, asking for `accept`; the status and the body.
    pub async fn send_accepting(&self, method: Method, path: &str, accept: &str, body: Option<&str>) -> (u16, String) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.sim.api_url()))
            .bearer_auth(&self.token)
            .header("Accept", accept);
        if let Some(body) = body {
            request = request.header("Content-Type", XML).body(body.to_string());
        }
        let response = request.send().await.unwrap_or_else(|err| panic!("{path}: {err}"));
        let status = response.status().as_u16();
        (
            status,
            response.text().await.unwrap_or_else(|err| panic!("{path}: {err}")),
        )
    }

    /// [`Session::send_accepting`] XML, what CAPOV asks for.
    pub async fn send(&self, method: Method, path: &str, body: Option<&str>) -> (u16, String) {
        self.send_accepting(method, path, XML, body).await
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        self.send(Method::GET, path, None).await
    }

    /// The body of a GET that must succeed.
    pub async fn get_ok(&self, path: &str) -> String {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    pub async fn get_json(&self, path: &str) -> (u16, String) {
        self.send_accepting(Method::GET, path, "application/json", None).await
    }

    pub async fn post(&self, path: &str, body: &str) -> (u16, String) {
        self.send(Method::POST, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> (u16, String) {
        self.send(Method::DELETE, path, None).await
    }

    /// Puts a VM `<prefix>0` made from `template` into the engine directly; its id.
    pub fn seed_vm(&self, prefix: &str, template: &str) -> String {
        let control = self.sim.control();
        control.seed_vms(prefix, 1, Some(template)).expect("seed a VM");
        control.id_of("vm", &format!("{prefix}0")).expect("the seeded VM")
    }
}
