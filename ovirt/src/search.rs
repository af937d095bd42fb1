//! Building oVirt search expressions safely.
//!
//! The engine compares names with LIKE/ILIKE, so `name=worker` is a pattern, not an equality:
//! callers must still filter results for exact equality (the client's `find_*_by_name` do).
//!
//! The engine's search language has no escapes: a double quote opens or closes a value, whatever precedes it, and
//! `'` or `;` anywhere fail the whole search (`searchbackend/SyntaxChecker.java`, `DISALLOWED_CHARS`). Values of
//! directory fields also refuse `<>&^!'` (`BaseConditionFieldAutoCompleter.validChar`), and `\` is PostgreSQL's
//! LIKE escape. CAPOV therefore never sends a value holding any of [`REFUSED`]: a single lookup fails with
//! [`Error::UnsearchableValue`] before any request (no oVirt name can hold these characters: the engine allows
//! letters, digits, `.`, `_`, `-` in VM and template names), and a batch skips such values, which name nothing.

use crate::error::{Error, Result};

/// Characters CAPOV never puts into a search value (the engine's refused ones, the quote that cannot be escaped,
/// the LIKE escape, and `#`, which the issue tracker reports as refused too).
pub const REFUSED: &[char] = &['\'', ';', '"', '\\', '<', '>', '&', '^', '#', '!'];

/// The first character of `value` the search cannot carry, if any.
pub fn unsearchable(value: &str) -> Option<char> {
    value.chars().find(|c| REFUSED.contains(c) || c.is_control())
}

/// A value as the search language carries it: double-quoted (spaces, `and`/`or` words and operators inside stay
/// part of it), or the error naming the character it cannot carry.
pub fn quote_value(field: &str, value: &str) -> Result<String> {
    match unsearchable(value) {
        Some(character) => Err(Error::UnsearchableValue {
            field: field.to_string(),
            value: value.to_string(),
            character,
        }),
        None => Ok(format!("\"{value}\"")),
    }
}

/// `field="value"`.
pub fn equals(field: &str, value: &str) -> Result<String> {
    Ok(format!("{field}={}", quote_value(field, value)?))
}

/// `field="a" or field="b" …`, leaving out values the search cannot carry (they name no engine object: ids are
/// UUIDs, names have no such characters). None when no value is left.
pub fn any_of<'a>(field: &str, values: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let terms: Vec<String> = values
        .into_iter()
        .filter_map(|value| equals(field, value).ok())
        .collect();
    (!terms.is_empty()).then(|| terms.join(" or "))
}

/// `name="…"`.
pub fn name_is(name: &str) -> Result<String> {
    equals("name", name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_double_quoted_without_escapes() {
        assert_eq!(quote_value("name", "worker").unwrap(), "\"worker\"");
        assert_eq!(quote_value("name", "my vm").unwrap(), "\"my vm\"");
        assert_eq!(name_is("a.b_c-1").unwrap(), "name=\"a.b_c-1\"");
    }

    #[test]
    fn values_the_engine_refuses_never_leave_the_client() {
        for (value, bad) in [
            ("o'brien", '\''),
            ("a;drop", ';'),
            (r#"a"b"#, '"'),
            (r"a\b", '\\'),
            ("a<b", '<'),
            ("a>b", '>'),
            ("a&b", '&'),
            ("a^b", '^'),
            ("a#b", '#'),
            ("a!b", '!'),
            ("a\nb", '\n'),
        ] {
            match name_is(value) {
                Err(Error::UnsearchableValue { field, character, .. }) => {
                    assert_eq!((field.as_str(), character), ("name", bad), "{value:?}")
                }
                other => panic!("{value:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn batches_skip_what_cannot_be_searched() {
        assert_eq!(any_of("id", ["a", "b"]).unwrap(), "id=\"a\" or id=\"b\"");
        assert_eq!(any_of("id", ["a", "x';--"]).unwrap(), "id=\"a\"");
        assert_eq!(any_of("id", ["x';--"]), None);
    }
}
