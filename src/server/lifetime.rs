//! How long a connection may live, counted in requests rather than bytes: a client that sends a byte every few
//! seconds is busy for [`crate::idle`], but it is not asking anything. A connection must begin a request soon after
//! it is accepted (TLS handshake included), may wait only so long between requests, serves a bounded number of them,
//! and ends at a fixed age, whatever it sends.
//!
//! Pure: [`next`] says what the connection's driver does now, from what the connection did and the clock.

use std::time::Duration;

use tokio::time::Instant;

/// The life of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// From accepting the connection to the first request head complete (the TLS handshake, the HTTP/2 preface and
    /// the request's headers included); else the connection is dropped.
    pub first_request: Duration,
    /// With no request in progress, the next one must begin within this; else the connection is closed.
    pub between_requests: Duration,
    /// Closed (gracefully: a request in progress finishes) once this old.
    pub max_age: Duration,
    /// Closed (gracefully) once this many requests have begun; the last is answered with `Connection: close`.
    pub max_requests: u32,
    /// Once closing, a request in progress may take this long before the connection is dropped.
    pub drain: Duration,
}

/// Once closing with no request in progress, how long the last answer and the close (HTTP/2: GOAWAY) may take to
/// leave before the connection is dropped.
pub const LINGER: Duration = Duration::from_secs(2);

/// What the connection has done so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Activity {
    /// Requests begun (their heads complete).
    pub begun: u32,
    /// Requests begun and not yet answered.
    pub in_flight: u32,
    /// When the last request was answered; the accept time before the first.
    pub idle_since: Instant,
}

impl Activity {
    pub fn new(accepted: Instant) -> Activity {
        Activity {
            begun: 0,
            in_flight: 0,
            idle_since: accepted,
        }
    }
}

/// Why a connection is closed or dropped (logged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    NoRequest,
    Idle,
    MaxAge,
    MaxRequests,
    Stopping,
    Drained,
}

impl Why {
    pub fn as_str(self) -> &'static str {
        match self {
            Why::NoRequest => "no request began in time",
            Why::Idle => "no next request in time",
            Why::MaxAge => "maximum age reached",
            Why::MaxRequests => "maximum number of requests reached",
            Why::Stopping => "the server is stopping",
            Why::Drained => "closing took too long",
        }
    }
}

/// What the driver of a connection does now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Serve on; look again at this instant (or sooner, when a request begins or ends).
    Wait(Instant),
    /// Begin a graceful close: HTTP/1 finishes the request in progress and closes, HTTP/2 sends GOAWAY.
    Close(Why),
    /// Drop the connection now.
    Drop(Why),
}

/// The next step for a connection accepted at `accepted`, with `activity`, closing since `closing` (when it is).
pub fn next(
    limits: &ConnectionLimits,
    accepted: Instant,
    activity: &Activity,
    closing: Option<Instant>,
    now: Instant,
) -> Next {
    if let Some(since) = closing {
        let until = if activity.in_flight > 0 {
            since + limits.drain
        } else {
            since.max(activity.idle_since) + LINGER
        };
        return if now >= until {
            Next::Drop(Why::Drained)
        } else {
            Next::Wait(until)
        };
    }
    if activity.begun >= limits.max_requests {
        return Next::Close(Why::MaxRequests);
    }
    let old = accepted + limits.max_age;
    if now >= old {
        return Next::Close(Why::MaxAge);
    }
    if activity.in_flight > 0 {
        return Next::Wait(old);
    }
    if activity.begun == 0 {
        // Nothing was asked, so nothing to finish: a slow or silent client is simply dropped.
        let until = accepted + limits.first_request;
        return if now >= until {
            Next::Drop(Why::NoRequest)
        } else {
            Next::Wait(until.min(old))
        };
    }
    let until = activity.idle_since + limits.between_requests;
    if now >= until {
        Next::Close(Why::Idle)
    } else {
        Next::Wait(until.min(old))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            first_request: Duration::from_secs(10),
            between_requests: Duration::from_secs(30),
            max_age: Duration::from_secs(60),
            max_requests: 3,
            drain: Duration::from_secs(25),
        }
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_connection_that_asks_nothing_is_dropped_at_the_first_request_deadline_whatever_it_sends() {
        let t0 = Instant::now();
        let quiet = Activity::new(t0);
        assert_eq!(
            next(&limits(), t0, &quiet, None, t0 + secs(3)),
            Next::Wait(t0 + secs(10))
        );
        assert_eq!(
            next(&limits(), t0, &quiet, None, t0 + secs(10)),
            Next::Drop(Why::NoRequest)
        );
    }

    #[test]
    fn between_requests_the_connection_may_wait_only_so_long() {
        let t0 = Instant::now();
        let answered = Activity {
            begun: 1,
            in_flight: 0,
            idle_since: t0 + secs(5),
        };
        assert_eq!(
            next(&limits(), t0, &answered, None, t0 + secs(6)),
            Next::Wait(t0 + secs(35))
        );
        assert_eq!(
            next(&limits(), t0, &answered, None, t0 + secs(35)),
            Next::Close(Why::Idle)
        );
        // A request in progress is not idle, for as long as the connection may live.
        let busy = Activity {
            in_flight: 1,
            ..answered
        };
        assert_eq!(
            next(&limits(), t0, &busy, None, t0 + secs(50)),
            Next::Wait(t0 + secs(60))
        );
    }

    #[test]
    fn a_busy_connection_closes_at_its_maximum_age_and_its_request_may_finish_within_the_drain() {
        let t0 = Instant::now();
        let busy = Activity {
            begun: 2,
            in_flight: 1,
            idle_since: t0 + secs(40),
        };
        assert_eq!(
            next(&limits(), t0, &busy, None, t0 + secs(60)),
            Next::Close(Why::MaxAge)
        );
        let closing = Some(t0 + secs(60));
        assert_eq!(
            next(&limits(), t0, &busy, closing, t0 + secs(70)),
            Next::Wait(t0 + secs(85))
        );
        assert_eq!(
            next(&limits(), t0, &busy, closing, t0 + secs(85)),
            Next::Drop(Why::Drained)
        );
        // Answered meanwhile: the answer has LINGER to leave.
        let answered = Activity {
            in_flight: 0,
            idle_since: t0 + secs(62),
            ..busy
        };
        assert_eq!(
            next(&limits(), t0, &answered, closing, t0 + secs(63)),
            Next::Wait(t0 + secs(62) + LINGER)
        );
    }

    #[test]
    fn the_last_allowed_request_closes_the_connection_once_it_begins() {
        let t0 = Instant::now();
        let third = Activity {
            begun: 3,
            in_flight: 1,
            idle_since: t0,
        };
        assert_eq!(
            next(&limits(), t0, &third, None, t0 + secs(1)),
            Next::Close(Why::MaxRequests)
        );
        let second = Activity { begun: 2, ..third };
        assert_eq!(
            next(&limits(), t0, &second, None, t0 + secs(1)),
            Next::Wait(t0 + secs(60))
        );
    }

    #[test]
    fn no_deadline_lies_beyond_the_maximum_age() {
        let t0 = Instant::now();
        let short = ConnectionLimits {
            max_age: secs(5),
            ..limits()
        };
        assert_eq!(next(&short, t0, &Activity::new(t0), None, t0), Next::Wait(t0 + secs(5)));
        let answered = Activity {
            begun: 1,
            in_flight: 0,
            idle_since: t0 + secs(1),
        };
        assert_eq!(
            next(&short, t0, &answered, None, t0 + secs(2)),
            Next::Wait(t0 + secs(5))
        );
    }
}
