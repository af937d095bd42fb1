//! The benchmark's progress while the machines come up: on a terminal a few lines redrawn in place each second
//! ("N of M Ready" with a bar, VMs, engine requests and their rate, the operator's memory); elsewhere the same as
//! one plain line every 15 s. The rendering is pure (`lines`, `plain`); [`Progress`] only decides when to print.

use std::time::{Duration, Instant};

use capov_testkit::terminal;

/// What the benchmark knows at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Moment {
    pub elapsed: Duration,
    pub ready: usize,
    pub vms: usize,
    pub vms_up: usize,
    /// Engine requests since the operator's start.
    pub requests: u64,
    /// Engine requests per second over the last few seconds.
    pub requests_per_second: f64,
    pub rss_mib: u64,
}

/// The screen for a terminal `width` characters wide.
pub fn lines(moment: &Moment, expected: usize, width: usize) -> String {
    let lines = [
        terminal::summary(moment.ready, expected, moment.elapsed, 30),
        format!(
            "VMs {} ({} up) · engine {} requests, {:.1}/s now · operator RSS {} MiB",
            moment.vms, moment.vms_up, moment.requests, moment.requests_per_second, moment.rss_mib
        ),
    ];
    terminal::fit_lines(&lines, width)
}

/// The plain line of one moment.
pub fn plain(moment: &Moment, expected: usize) -> String {
    format!(
        "{:>6.0}s: {} of {expected} Ready, {} VMs ({} up), {} engine requests ({:.1}/s), operator RSS {} MiB",
        moment.elapsed.as_secs_f64(),
        moment.ready,
        moment.vms,
        moment.vms_up,
        moment.requests,
        moment.requests_per_second,
        moment.rss_mib
    )
}

/// Prints the progress: redrawn each second on a terminal, a plain line every 15 s elsewhere.
pub struct Progress {
    width: Option<usize>,
    expected: usize,
    last: Option<Instant>,
    height: usize,
    /// Engine requests a few seconds back, for the rate.
    window: std::collections::VecDeque<(Instant, u64)>,
}

impl Progress {
    const PLAIN_EVERY: Duration = Duration::from_secs(15);
    const LIVE_EVERY: Duration = Duration::from_secs(1);
    const RATE_WINDOW: Duration = Duration::from_secs(5);

    pub fn new(expected: usize) -> Progress {
        Progress {
            width: terminal::width(),
            expected,
            last: None,
            height: 0,
            window: Default::default(),
        }
    }

    /// The requests per second over the last few seconds, given the count now.
    pub fn rate(&mut self, requests: u64) -> f64 {
        let now = Instant::now();
        self.window.push_back((now, requests));
        while self
            .window
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > Self::RATE_WINDOW)
        {
            self.window.pop_front();
        }
        match self.window.front() {
            Some((at, first)) if now.duration_since(*at) >= Duration::from_millis(500) => {
                requests.saturating_sub(*first) as f64 / now.duration_since(*at).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    /// Whether a new moment is due.
    pub fn due(&self) -> bool {
        let every = if self.width.is_some() {
            Self::LIVE_EVERY
        } else {
            Self::PLAIN_EVERY
        };
        self.last.is_none_or(|last| last.elapsed() >= every)
    }

    pub fn show(&mut self, moment: &Moment) {
        use std::io::Write as _;
        self.last = Some(Instant::now());
        match self.width {
            Some(width) => {
                let screen = lines(moment, self.expected, width);
                print!("{}", terminal::redraw(self.height, &screen));
                let _ = std::io::stdout().flush();
                self.height = screen.lines().count();
            }
            None => println!("==> {}", plain(moment, self.expected)),
        }
    }

    /// Something else is printed next: the next screen starts below it instead of over it.
    pub fn release(&mut self) {
        self.height = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moment() -> Moment {
        Moment {
            elapsed: Duration::from_secs(312),
            ready: 412,
            vms: 800,
            vms_up: 530,
            requests: 4120,
            requests_per_second: 12.06,
            rss_mib: 98,
        }
    }

    #[test]
    fn the_screen_shows_n_of_m_ready_and_the_engine_and_memory() {
        let screen = lines(&moment(), 1000, 120);
        assert_eq!(
            screen,
            "412 of 1000 Ready [############------------------] 312 s\n\
             VMs 800 (530 up) · engine 4120 requests, 12.1/s now · operator RSS 98 MiB\n"
        );
        let narrow = lines(&moment(), 1000, 30);
        assert!(narrow.lines().all(|line| line.chars().count() <= 30), "{narrow}");
    }

    #[test]
    fn the_plain_line_holds_the_same() {
        assert_eq!(
            plain(&moment(), 1000),
            "   312s: 412 of 1000 Ready, 800 VMs (530 up), 4120 engine requests (12.1/s), operator RSS 98 MiB"
        );
    }
}
