//! The metric names a PromQL expression reads, for the tests that compare alerting rules and dashboard panels with
//! what the manager serves. Not a parser: it drops what cannot hold a metric name (strings, label matchers, ranges,
//! grouping label lists, numbers and durations, Grafana's `$variables`), then keeps the identifiers that are neither
//! keywords nor called like functions.

use std::collections::BTreeSet;

const KEYWORDS: [&str; 13] = [
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "inf",
    "nan",
];

/// Keywords followed by a parenthesised list of label names.
const GROUPING: [&str; 6] = ["by", "without", "on", "ignoring", "group_left", "group_right"];

/// Every metric name `expr` reads, e.g. `capov_engine_requests_total` of
/// `sum by (provider) (rate(capov_engine_requests_total{code="500"}[5m]))`.
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (word, next) in words(&without_grouping(&without_enclosed(expr))) {
        if !KEYWORDS.contains(&word.as_str()) && next != Some('(') {
            names.insert(word);
        }
    }
    names
}

/// The identifiers of `text`, each with the character after it (spaces skipped); numbers, durations (`5m`) and
/// Grafana's `$variables` are left out.
fn words(text: &str) -> Vec<(String, Option<char>)> {
    let chars: Vec<char> = text.chars().collect();
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut words = Vec::new();
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        let starts_name = c.is_ascii_alphabetic() || c == '_' || c == ':';
        if !(starts_name || c.is_ascii_digit() || c == '$') {
            index += 1;
            continue;
        }
        let start = index;
        index += 1;
        while index < chars.len() && (is_word(chars[index]) || (!starts_name && chars[index] == '.')) {
            index += 1;
        }
        if starts_name {
            let next = chars[index..].iter().copied().find(|c| !c.is_whitespace());
            words.push((chars[start..index].iter().collect(), next));
        }
    }
    words
}

/// `text` without the label lists of `by (…)`, `without (…)`, `on (…)`, `ignoring (…)`, `group_left (…)` and
/// `group_right (…)`.
fn without_grouping(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while index < chars.len() {
        let rest: String = chars[index..].iter().take(12).collect();
        let at_word_start = index == 0 || !(chars[index - 1].is_ascii_alphanumeric() || chars[index - 1] == '_');
        let grouping = GROUPING.iter().find(|word| {
            at_word_start
                && rest.starts_with(*word)
                && chars
                    .get(index + word.len())
                    .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
        });
        if let Some(word) = grouping {
            let after = index + word.len();
            let open = (after..chars.len()).find(|&i| !chars[i].is_whitespace());
            if let Some(open) = open.filter(|&open| chars[open] == '(') {
                out.push(' ');
                index = closing(&chars, open) + 1;
                continue;
            }
        }
        out.push(chars[index]);
        index += 1;
    }
    out
}

/// `expr` without string literals, `{…}` label matchers and `[…]` ranges (each replaced by a space).
fn without_enclosed(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut closer: Option<char> = None;
    let mut chars = expr.chars();
    while let Some(c) = chars.next() {
        match closer {
            Some(end) if c == end => {
                closer = None;
                out.push(' ');
            }
            Some(_) if c == '\\' => {
                chars.next();
            }
            Some(_) => {}
            None => match c {
                '"' | '\'' | '`' => closer = Some(c),
                '{' => closer = Some('}'),
                '[' => closer = Some(']'),
                _ => out.push(c),
            },
        }
    }
    out
}

/// The index of the `)` closing the `(` at `open` (or the last index).
fn closing(chars: &[char], open: usize) -> usize {
    let mut depth = 0;
    for (index, c) in chars.iter().enumerate().skip(open) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return index;
                }
            }
            _ => {}
        }
    }
    chars.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(expr: &str) -> Vec<String> {
        metric_names(expr).into_iter().collect()
    }

    #[test]
    fn names_inside_functions_aggregations_and_binary_operations() {
        assert_eq!(
            names(
                "sum by (namespace, provider) (rate(capov_engine_rate_limit_wait_seconds_count[10m])) \
                 / sum by (namespace, provider) (rate(capov_engine_requests_total{code=~\"5..\"}[10m])) > 0.5"
            ),
            [
                "capov_engine_rate_limit_wait_seconds_count",
                "capov_engine_requests_total"
            ]
        );
        assert_eq!(
            names("(sum by (namespace) (capov_leader) < 1) or absent(capov_leader)"),
            ["capov_leader"]
        );
        assert_eq!(
            names("max by (namespace, pod) (capov_process_resident_memory_bytes / capov_process_memory_limit_bytes)"),
            [
                "capov_process_memory_limit_bytes",
                "capov_process_resident_memory_bytes"
            ]
        );
    }

    #[test]
    fn label_names_strings_durations_and_grafana_variables_are_not_names() {
        assert_eq!(
            names(
                "histogram_quantile(0.9, sum by (le, provider) (rate(capov_engine_request_duration_seconds_bucket\
                 {namespace=~\"$namespace\",provider=~\"$provider\"}[$__rate_interval])))"
            ),
            ["capov_engine_request_duration_seconds_bucket"]
        );
        assert_eq!(
            names("capov_a offset 5m * on (pod) group_left (node) capov_b and capov_c unless capov_d"),
            ["capov_a", "capov_b", "capov_c", "capov_d"]
        );
        assert_eq!(
            names("sum(capov_machines{phase=\"Failed\"}) or vector(0)"),
            ["capov_machines"]
        );
        assert_eq!(
            names("label_values(capov_build_info, namespace)"),
            ["capov_build_info", "namespace"]
        );
    }

    #[test]
    fn a_bare_name_and_a_renamed_one() {
        assert_eq!(names("up == 0"), ["up"]);
        assert_eq!(names("capov_machines_total > 1e3"), ["capov_machines_total"]);
    }
}
