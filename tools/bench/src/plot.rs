//! The run as a picture: machines Ready over time, engine requests per second and the operator's resident memory,
//! three panels over one time axis, written as SVG next to the report (no plotting library: a few lines and
//! labels). Pure but for [`write`].

use std::fmt::Write as _;
use std::path::Path;

/// One sample of the run (the benchmark takes one a second).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub seconds: f64,
    pub ready: usize,
    /// Engine requests since the operator's start.
    pub requests: u64,
    pub rss_kib: u64,
}

const WIDTH: f64 = 900.0;
const PANEL_HEIGHT: f64 = 170.0;
const GAP: f64 = 40.0;
const TOP: f64 = 50.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
/// Requests per second are averaged over this many seconds, so that one-second samples do not zigzag.
const RATE_WINDOW_SECONDS: f64 = 5.0;
/// At most this many points per line; longer runs are thinned evenly.
const MAX_POINTS: usize = 1500;

/// Engine requests per second at each point, over the [`RATE_WINDOW_SECONDS`] before it.
pub fn request_rates(points: &[Point]) -> Vec<f64> {
    let mut start = 0;
    points
        .iter()
        .map(|point| {
            while start < points.len() && point.seconds - points[start].seconds > RATE_WINDOW_SECONDS {
                start += 1;
            }
            let first = &points[start];
            let span = point.seconds - first.seconds;
            if span <= 0.0 {
                0.0
            } else {
                point.requests.saturating_sub(first.requests) as f64 / span
            }
        })
        .collect()
}

/// The SVG document of a run; `title` names it (machines, timings, flags).
pub fn svg(points: &[Point], title: &str) -> String {
    let points = thinned(points);
    let end = points.last().map_or(1.0, |point| point.seconds).max(1.0);
    let rates = request_rates(&points);
    let panels: [(&str, Vec<f64>, &str); 3] = [
        (
            "machines Ready",
            points.iter().map(|point| point.ready as f64).collect(),
            "#2e7d32",
        ),
        ("engine requests/s", rates, "#1565c0"),
        (
            "operator RSS (MiB)",
            points.iter().map(|point| point.rss_kib as f64 / 1024.0).collect(),
            "#c62828",
        ),
    ];
    let height = TOP + 3.0 * PANEL_HEIGHT + 2.0 * GAP + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="24" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for (index, (label, values, color)) in panels.iter().enumerate() {
        let top = TOP + index as f64 * (PANEL_HEIGHT + GAP);
        panel(&mut out, top, end, label, values, &points, color);
    }
    let bottom = TOP + 3.0 * PANEL_HEIGHT + 2.0 * GAP;
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">seconds since the operator started</text>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        bottom + 34.0
    );
    out.push_str("</svg>\n");
    out
}

/// One panel: frame, grid and value labels, time labels, the line.
fn panel(out: &mut String, top: f64, end: f64, label: &str, values: &[f64], points: &[Point], color: &str) {
    let plot_width = WIDTH - LEFT - RIGHT;
    let max = nice_ceiling(values.iter().copied().fold(0.0, f64::max));
    let y = |value: f64| top + PANEL_HEIGHT - value / max * PANEL_HEIGHT;
    let x = |seconds: f64| LEFT + seconds / end * plot_width;
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{top}" width="{plot_width}" height="{PANEL_HEIGHT}" fill="none" stroke="#999"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" font-weight="bold">{label}</text>"#,
        LEFT + 6.0,
        top - 6.0
    );
    for step in 0..=4 {
        let value = max * f64::from(step) / 4.0;
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_width,
            LEFT - 6.0,
            y(value) + 4.0,
            number(value),
            y = y(value),
        );
    }
    for seconds in time_ticks(end) {
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{}" stroke="#eee"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            top + PANEL_HEIGHT,
            top + PANEL_HEIGHT + 15.0,
            number(seconds),
            x = x(seconds),
        );
    }
    if points.is_empty() {
        return;
    }
    let mut line = String::new();
    for (point, value) in points.iter().zip(values) {
        let _ = write!(line, "{:.1},{:.1} ", x(point.seconds), y(*value));
    }
    let _ = writeln!(
        out,
        r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#,
        line.trim_end()
    );
}

/// At most [`MAX_POINTS`] of `points`, evenly spread, the last one kept.
fn thinned(points: &[Point]) -> Vec<Point> {
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let step = points.len().div_ceil(MAX_POINTS);
    let mut kept: Vec<Point> = points.iter().step_by(step).copied().collect();
    if let Some(last) = points.last()
        && kept.last() != Some(last)
    {
        kept.push(*last);
    }
    kept
}

/// Round times from 0 to `end` seconds, at most seven.
fn time_ticks(end: f64) -> Vec<f64> {
    const STEPS: [f64; 14] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
    ];
    let step = STEPS
        .iter()
        .copied()
        .find(|step| end / step <= 6.0)
        .unwrap_or_else(|| (end / 6.0).ceil());
    (0..)
        .map(|index| f64::from(index) * step)
        .take_while(|seconds| *seconds <= end + 1e-9)
        .collect()
}

/// The smallest of 1, 2, 5 × 10^k at or above `value` (1 for nothing).
fn nice_ceiling(value: f64) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|factor| factor * magnitude)
        .find(|ceiling| *ceiling >= value)
        .unwrap_or(10.0 * magnitude)
}

/// A label: whole numbers without decimals, others with one.
fn number(value: f64) -> String {
    if (value - value.round()).abs() < 1e-9 {
        format!("{}", value.round())
    } else {
        format!("{value:.1}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Writes the SVG of a run to `path`.
pub fn write(path: &Path, points: &[Point], title: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, svg(points, title))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Vec<Point> {
        (0..=100u32)
            .map(|second| Point {
                seconds: f64::from(second),
                ready: (second as usize).saturating_sub(20).min(50),
                requests: u64::from(second) * 10,
                rss_kib: 40_960 + u64::from(second) * 100,
            })
            .collect()
    }

    #[test]
    fn rates_average_over_the_window() {
        let rates = request_rates(&run());
        assert_eq!(rates[0], 0.0);
        assert!(rates[1..].iter().all(|rate| (rate - 10.0).abs() < 1e-9), "{rates:?}");
        let burst = [
            Point {
                seconds: 0.0,
                ready: 0,
                requests: 0,
                rss_kib: 0,
            },
            Point {
                seconds: 1.0,
                ready: 0,
                requests: 50,
                rss_kib: 0,
            },
            Point {
                seconds: 10.0,
                ready: 0,
                requests: 50,
                rss_kib: 0,
            },
        ];
        assert_eq!(request_rates(&burst), [0.0, 50.0, 0.0]);
    }

    #[test]
    fn three_panels_with_their_lines_and_scales() {
        let text = svg(&run(), "capov-bench: 50 machines <fast>");
        assert!(text.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""), "{text}");
        assert!(text.trim_end().ends_with("</svg>"));
        assert_eq!(text.matches("<polyline").count(), 3);
        for label in [
            "machines Ready",
            "engine requests/s",
            "operator RSS (MiB)",
            "capov-bench: 50 machines &lt;fast&gt;",
        ] {
            assert!(text.contains(label), "{label}");
        }
        // Scales end at a round number above the largest value (50 Ready, 10 requests/s, 49.8 MiB); time is
        // labelled every 30 s of the 100.
        for top in [">50</text>", ">10</text>", ">30</text>", ">90</text>"] {
            assert!(text.contains(top), "{top}");
        }
        // Every point of every line lies inside the picture.
        for line in text.lines().filter(|line| line.starts_with("<polyline")) {
            let points = line.split("points=\"").nth(1).unwrap().trim_end_matches("\"/>");
            for pair in points.split(' ') {
                let (x, y) = pair.split_once(',').unwrap();
                let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
                assert!(
                    (LEFT..=WIDTH - RIGHT + 0.1).contains(&x)
                        && (TOP..=TOP + 3.0 * PANEL_HEIGHT + 2.0 * GAP).contains(&y),
                    "{pair}"
                );
            }
        }
    }

    #[test]
    fn an_empty_run_still_makes_a_picture() {
        let text = svg(&[], "nothing");
        assert_eq!(text.matches("<polyline").count(), 0);
        assert!(text.contains("machines Ready"));
    }

    #[test]
    fn long_runs_are_thinned_to_the_limit() {
        let points: Vec<Point> = (0..10_000)
            .map(|second| Point {
                seconds: f64::from(second),
                ready: 0,
                requests: 0,
                rss_kib: 0,
            })
            .collect();
        let kept = thinned(&points);
        assert!(kept.len() <= MAX_POINTS + 1, "{}", kept.len());
        assert_eq!(kept.last(), points.last());
    }

    #[test]
    fn time_labels_fall_on_round_seconds() {
        assert_eq!(time_ticks(29.6), [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]);
        assert_eq!(time_ticks(1321.0), [0.0, 300.0, 600.0, 900.0, 1200.0]);
        assert_eq!(time_ticks(1.0), [0.0, 1.0]);
    }

    #[test]
    fn scales_end_on_round_numbers() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(7.0), 10.0);
        assert_eq!(nice_ceiling(13.0), 20.0);
        assert_eq!(nice_ceiling(200.0), 200.0);
        assert_eq!(nice_ceiling(201.0), 500.0);
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(250.0), "250");
    }
}
