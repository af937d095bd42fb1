//! The link check of the user book: mdBook has none of its own. It reads the HTML mdBook wrote, so it checks what
//! readers get (mdBook turns `page.md#anchor` into `page.html#anchor` and makes the heading ids): every relative
//! `href` and `src` must name a file inside the book, and every `#fragment` an `id` of that page. Links with a
//! scheme (`https:`, `mailto:`) are not followed: the check needs no network.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Component, Path, PathBuf};

/// mdBook's page for unknown addresses: a web server serves it for any path, so its links are absolute from the
/// site's root (`output.html.site-url`), not relative to where it lies; it is left out.
const NOT_FOUND_PAGE: &str = "404.html";

/// What a check found.
#[derive(Debug, Default)]
pub struct Report {
    pub pages: usize,
    pub links: usize,
    /// `page: link (why)`, one per broken link.
    pub broken: Vec<String>,
}

/// Checks the book built into `root`.
pub fn check(root: &Path) -> io::Result<Report> {
    let mut pages = BTreeMap::new();
    for path in html_files(root)? {
        let text = std::fs::read_to_string(&path)?;
        let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        pages.insert(relative, text);
    }
    let ids: BTreeMap<&PathBuf, BTreeSet<String>> = pages.iter().map(|(path, text)| (path, ids(text))).collect();
    let mut report = Report {
        pages: pages.len(),
        ..Report::default()
    };
    for (page, text) in &pages {
        for link in links(text) {
            if is_external(&link) {
                continue;
            }
            report.links += 1;
            if let Err(why) = resolve(root, page, &link, &ids) {
                report.broken.push(format!("{}: {link} ({why})", page.display()));
            }
        }
    }
    Ok(report)
}

fn resolve(root: &Path, page: &Path, link: &str, ids: &BTreeMap<&PathBuf, BTreeSet<String>>) -> Result<(), String> {
    let link = link.replace("&amp;", "&");
    let (path, fragment) = match link.split_once('#') {
        Some((path, fragment)) => (path, Some(percent_decode(fragment))),
        None => (link.as_str(), None),
    };
    let path = path.split('?').next().unwrap_or_default();
    let target = if path.is_empty() {
        page.to_path_buf()
    } else {
        let joined = page.parent().unwrap_or(Path::new("")).join(percent_decode(path));
        let mut target = normalize(&joined).ok_or("leaves the book")?;
        if path.ends_with('/') || root.join(&target).is_dir() {
            target.push("index.html");
        }
        if !root.join(&target).is_file() {
            return Err(format!("no file {}", target.display()));
        }
        target
    };
    let Some(fragment) = fragment.filter(|f| !f.is_empty()) else {
        return Ok(());
    };
    match ids.get(&target) {
        Some(known) if known.contains(&fragment) => Ok(()),
        Some(_) => Err(format!("no anchor #{fragment} in {}", target.display())),
        None => Ok(()), // an anchor into a file that is not a page (an image): nothing to check
    }
}

/// `a/b/../c` → `a/c`; None when it climbs out of the book.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

fn is_external(link: &str) -> bool {
    let scheme = link.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    });
    scheme || link.starts_with("//")
}

fn html_files(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "html") && path != root.join(NOT_FOUND_PAGE) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The values of `attribute="…"` in `html`.
fn attribute_values<'a>(html: &'a str, attribute: &str) -> Vec<&'a str> {
    let needle = format!(" {attribute}=\"");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&needle) {
        rest = &rest[at + needle.len()..];
        if let Some(end) = rest.find('"') {
            out.push(&rest[..end]);
            rest = &rest[end..];
        }
    }
    out
}

fn ids(html: &str) -> BTreeSet<String> {
    attribute_values(html, "id")
        .into_iter()
        .chain(attribute_values(html, "name"))
        .map(percent_decode)
        .collect()
}

fn links(html: &str) -> Vec<String> {
    attribute_values(html, "href")
        .into_iter()
        .chain(attribute_values(html, "src"))
        .map(String::from)
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(pages: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (path, html) in pages {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
            std::fs::write(path, html).expect("page");
        }
        dir
    }

    #[test]
    fn links_and_anchors_that_resolve_pass() {
        let dir = book(&[
            (
                "index.html",
                r##"<a href="guide/a.html#first-step">a</a> <a href="https://example.com/x#y">x</a>"##,
            ),
            (
                "guide/a.html",
                r##"<h2 id="first-step">1</h2><a href="../index.html">up</a><a href="#first-step">here</a><img src="img/x.svg">"##,
            ),
            ("guide/img/x.svg", "<svg/>"),
        ]);
        let report = check(dir.path()).expect("check");
        assert_eq!(report.broken, Vec::<String>::new());
        assert_eq!((report.pages, report.links), (2, 4));
    }

    #[test]
    fn a_missing_page_a_missing_anchor_and_a_link_out_of_the_book_fail() {
        let dir = book(&[
            (
                "index.html",
                r##"<a href="guide/b.html">b</a><a href="guide/a.html#second-step">a</a>"##,
            ),
            (
                "guide/a.html",
                r##"<h2 id="first-step">1</h2><a href="../../templates/README.html">t</a>"##,
            ),
        ]);
        let report = check(dir.path()).expect("check");
        assert_eq!(
            report.broken,
            [
                "guide/a.html: ../../templates/README.html (leaves the book)",
                "index.html: guide/b.html (no file guide/b.html)",
                "index.html: guide/a.html#second-step (no anchor #second-step in guide/a.html)",
            ]
        );
    }
}
