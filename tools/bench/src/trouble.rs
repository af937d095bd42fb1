//! Apiserver trouble for the benchmark: the harness's `ApiserverProxy` in front of the management cluster's
//! kube-apiserver, which only the operator talks to (the benchmark's own watch and writes go to the apiserver
//! directly). Until every machine is Ready it adds latency to every request, answers `504 Gateway Timeout` to a share
//! of them as an overloaded apiserver's timeout filter does, and holds another share past the operator's client
//! deadlines before answering 504; once half the machines are Ready it can restart the apiserver (SIGKILL, a few
//! seconds down, the same etcd), after which the operator's watches list everything again.

use std::time::Duration;

use capov_harness::{ApiserverProxy, ControlPlane, Trouble};

use crate::Error;

// What the apiserver does to the operator's requests (all off by default: no proxy at all).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TroubleArgs {
    /// Answer `504 Gateway Timeout` (the apiserver's Timeout Status) to this share of the operator's requests,
    /// e.g. 0.05; they never reach the apiserver.
    #[arg(long, default_value_t = 0.0)]
    pub apiserver_504_share: f64,
    /// Hold this share of the operator's requests for `--apiserver-delay-seconds` (past the operator's read
    /// timeout and request deadline), then answer 504; they never reach the apiserver.
    #[arg(long, default_value_t = 0.0)]
    pub apiserver_delay_share: f64,
    #[arg(long, default_value_t = 75)]
    pub apiserver_delay_seconds: u64,
    /// Milliseconds added to every request of the operator before it is passed on (a slow apiserver).
    #[arg(long, default_value_t = 0)]
    pub apiserver_latency_ms: u64,
    /// Restart kube-apiserver once half the machines are Ready (SIGKILL, `--apiserver-down-seconds` down).
    #[arg(long)]
    pub apiserver_restart: bool,
    #[arg(long, default_value_t = 10)]
    pub apiserver_down_seconds: u64,
}

impl TroubleArgs {
    /// Whether the operator needs the proxy at all.
    pub fn any(&self) -> bool {
        self.apiserver_504_share > 0.0
            || self.apiserver_delay_share > 0.0
            || self.apiserver_latency_ms > 0
            || self.apiserver_restart
    }

    /// One line for the report's header.
    pub fn describe(&self) -> String {
        if !self.any() {
            return "none".into();
        }
        let mut parts = Vec::new();
        if self.apiserver_latency_ms > 0 {
            parts.push(format!("+{} ms on every request", self.apiserver_latency_ms));
        }
        if self.apiserver_504_share > 0.0 {
            parts.push(format!("504 to {:.1} %", self.apiserver_504_share * 100.0));
        }
        if self.apiserver_delay_share > 0.0 {
            parts.push(format!(
                "{:.1} % held {} s then 504",
                self.apiserver_delay_share * 100.0,
                self.apiserver_delay_seconds
            ));
        }
        if self.apiserver_restart {
            parts.push(format!(
                "apiserver restarted at half Ready ({} s down)",
                self.apiserver_down_seconds
            ));
        }
        format!("{} (until all Ready)", parts.join(", "))
    }
}

impl TroubleArgs {
    /// The proxy's trouble while it is on.
    pub fn trouble(&self) -> Trouble {
        Trouble {
            latency: Duration::from_millis(self.apiserver_latency_ms),
            share_504: self.apiserver_504_share,
            share_held: self.apiserver_delay_share,
            held_for: Duration::from_secs(self.apiserver_delay_seconds),
            ..Trouble::NONE
        }
    }

    /// The proxy in front of `plane`, with this trouble on; None when no trouble is asked for.
    pub async fn proxy(&self, plane: &ControlPlane) -> Result<Option<ApiserverProxy>, Error> {
        if !self.any() {
            return Ok(None);
        }
        let proxy = ApiserverProxy::start(
            plane.url(),
            plane.ca_pem(),
            &plane.kubeconfig_yaml()?,
            &std::env::temp_dir(),
        )
        .await?;
        proxy.set(self.trouble());
        Ok(Some(proxy))
    }
}

/// Restarts kube-apiserver once `ready` reaches half of `machines` (once per run), sampling the operator's memory
/// meanwhile through `sample` so the restart leaves no gap in the samples.
#[derive(Default)]
pub struct ApiserverRestart {
    pub done: bool,
    /// The apiserver's status write counters just before the restart reset them.
    pub writes_before: Option<crate::WriteRequests>,
    /// When the apiserver went down and when it answered again, in seconds since the operator started.
    pub window: Option<(f64, f64)>,
}

impl ApiserverRestart {
    pub fn due(&self, args: &TroubleArgs, ready: usize, machines: usize) -> bool {
        args.apiserver_restart && !self.done && ready * 2 >= machines
    }

    pub async fn run<F: FnMut()>(
        &mut self,
        args: &TroubleArgs,
        plane: &mut capov_harness::ControlPlane,
        client: &kube::Client,
        t0: std::time::Instant,
        mut sample: F,
    ) -> Result<(), Error> {
        self.done = true;
        let down_at = t0.elapsed().as_secs_f64();
        self.writes_before = Some(crate::status_write_requests(client).await?);
        crate::say("restarting kube-apiserver (SIGKILL)");
        let restart = plane.restart_apiserver(Duration::from_secs(args.apiserver_down_seconds));
        let mut restart = std::pin::pin!(restart);
        loop {
            tokio::select! {
                result = &mut restart => break result?,
                () = tokio::time::sleep(Duration::from_secs(1)) => sample(),
            }
        }
        crate::say("kube-apiserver is back");
        self.window = Some((down_at, t0.elapsed().as_secs_f64()));
        Ok(())
    }
}
