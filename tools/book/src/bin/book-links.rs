//! `book-links DIR`: checks every relative link and `#anchor` of the HTML book in DIR (mdBook's output); exits 1
//! and names each broken one.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: book-links DIR   (DIR: the built book, e.g. docs/book/book)");
        return ExitCode::from(2);
    };
    match capov_book::check(&dir) {
        Ok(report) if report.broken.is_empty() => {
            println!(
                "book-links: {} pages, {} links and anchors checked, none broken",
                report.pages, report.links
            );
            ExitCode::SUCCESS
        }
        Ok(report) => {
            for broken in &report.broken {
                eprintln!("book-links: {broken}");
            }
            eprintln!(
                "book-links: {} of {} links in {} pages are broken",
                report.broken.len(),
                report.links,
                report.pages
            );
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("book-links: cannot read {}: {err}", dir.display());
            ExitCode::FAILURE
        }
    }
}
