//! Progress on a terminal, shared by the demo and the benchmark: an "N of M Ready" line with a bar, a screen redrawn
//! in place over the previous one, lines cut to the terminal's width. Pure but for [`width`].

use std::time::Duration;

/// `ready` of `expected` Ready, with a bar of `bar_width` cells and the seconds so far, e.g.
/// `2 of 3 Ready [######---] 41 s`.
pub fn summary(ready: usize, expected: usize, elapsed: Duration, bar_width: usize) -> String {
    let filled = (ready * bar_width).checked_div(expected).unwrap_or(0).min(bar_width);
    format!(
        "{ready} of {expected} Ready [{}{}] {} s",
        "#".repeat(filled),
        "-".repeat(bar_width - filled),
        elapsed.as_secs()
    )
}

/// What redraws `screen` over the previous one, `previous_height` lines tall, whose last line ended the output:
/// the cursor goes up to its first line, the old screen is cleared from there, the new one written.
pub fn redraw(previous_height: usize, screen: &str) -> String {
    if previous_height == 0 {
        return screen.to_string();
    }
    format!("\x1b[{previous_height}A\x1b[J{screen}")
}

/// `lines` as a screen `width` characters wide: each cut to the width (the cut marked with `…`), each ended by a
/// newline.
pub fn fit_lines(lines: &[String], width: usize) -> String {
    let mut out = String::new();
    for line in lines {
        out.push_str(&fit(line, width));
        out.push('\n');
    }
    out
}

/// `line` cut to `width` characters, the cut marked with `…`.
pub fn fit(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        return line.to_string();
    }
    let mut cut: String = line.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The width of the terminal on standard output; None when standard output is not a terminal.
pub fn width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ writes one winsize into the struct passed; a descriptor that is not a terminal makes it
    // fail without writing.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let answered = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (answered && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_bar_fills_with_ready_machines() {
        assert_eq!(summary(0, 4, Duration::from_secs(3), 8), "0 of 4 Ready [--------] 3 s");
        assert_eq!(
            summary(1, 3, Duration::from_secs(42), 20),
            "1 of 3 Ready [######--------------] 42 s"
        );
        assert_eq!(
            summary(4, 4, Duration::from_secs(90), 8),
            "4 of 4 Ready [########] 90 s"
        );
        assert_eq!(summary(0, 0, Duration::ZERO, 4), "0 of 0 Ready [----] 0 s");
    }

    #[test]
    fn redraw_goes_back_over_the_previous_screen() {
        assert_eq!(redraw(0, "a\nb\n"), "a\nb\n");
        assert_eq!(redraw(5, "a\n"), "\x1b[5A\x1b[Ja\n");
    }

    #[test]
    fn lines_are_cut_to_the_width() {
        assert_eq!(fit("short", 10), "short");
        assert_eq!(fit("exactly10!", 10), "exactly10!");
        assert_eq!(fit("one character too many", 10), "one chara…");
        assert_eq!(fit_lines(&["ab".into(), "abcdef".into()], 4), "ab\nabc…\n");
    }
}
