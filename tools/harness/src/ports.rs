use std::net::TcpListener;

/// A TCP port on 127.0.0.1 that was free a moment ago. Another process may still take it before it is used; the
/// control plane retries its start with new ports when that happens.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|err| panic!("no free loopback port: {err}"))
}
