//! Building oVirt search expressions safely.
//!
//! The engine compares names with LIKE/ILIKE, so `name=worker` is a pattern, not an equality:
//! callers must still filter results for exact equality (the client's `find_*_by_name` do).

/// Quotes a value for the search language: always double-quoted, with `\` and `"` escaped, so
/// spaces, `and`/`or` words and operators inside a value stay part of it.
pub fn quote_value(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for ch in value.chars() {
        if ch == '"' || ch == '\\' {
            quoted.push('\\');
        }
        quoted.push(ch);
    }
    quoted.push('"');
    quoted
}

/// `field="value"`.
pub fn equals(field: &str, value: &str) -> String {
    format!("{field}={}", quote_value(value))
}

/// `field="a" or field="b" …`.
pub fn any_of<'a>(field: &str, values: impl IntoIterator<Item = &'a str>) -> String {
    values
        .into_iter()
        .map(|value| equals(field, value))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// `name="…"`.
pub fn name_is(name: &str) -> String {
    equals("name", name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_escapes_special_characters() {
        assert_eq!(quote_value("worker"), "\"worker\"");
        assert_eq!(quote_value("my vm"), "\"my vm\"");
        assert_eq!(quote_value(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn disjunction_of_ids() {
        assert_eq!(any_of("id", ["a", "b"]), "id=\"a\" or id=\"b\"");
    }
}
