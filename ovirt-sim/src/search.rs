//! The subset of the engine's search language CAPOV and its users need: `field=value` and
//! `field!=value` terms joined by `and` / `or` (and binds tighter), double-quoted values, `*` wildcards,
//! case-insensitive matching; `sortby …` and `page …` are accepted and ignored.
//!
//! As the engine's `searchbackend/SyntaxChecker.java`: `'` and `;` anywhere fail the whole search
//! (`DISALLOWED_CHARS`), and there are no escapes — a `"` always opens or closes a value, a `\` is a plain
//! character.

/// One comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub field: String,
    /// Lower-cased pattern.
    pub pattern: String,
    pub negated: bool,
}

impl Term {
    pub fn is_literal(&self) -> bool {
        !self.negated && !self.pattern.contains('*')
    }
}

/// Disjunction of conjunctions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    pub any_of: Vec<Vec<Term>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    NotEquals,
}

/// Characters that fail any search, wherever they stand.
const DISALLOWED: &[char] = &['\'', ';'];

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    if let Some(bad) = text.chars().find(|c| DISALLOWED.contains(c)) {
        return Err(format!("invalid character {bad:?}"));
    }
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&ch) = chars.peek() {
        match ch {
            c if c.is_whitespace() => {
                chars.next();
            }
            '=' => {
                chars.next();
                tokens.push(Token::Equals);
            }
            '!' => {
                chars.next();
                if chars.next() != Some('=') {
                    return Err("expected '=' after '!'".into());
                }
                tokens.push(Token::NotEquals);
            }
            '"' => {
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some(c) => value.push(c),
                        None => return Err("unterminated quoted value".into()),
                    }
                }
                tokens.push(Token::Quoted(value));
            }
            _ => {
                let mut word = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || c == '=' || c == '!' || c == '"' {
                        break;
                    }
                    word.push(c);
                    chars.next();
                }
                tokens.push(Token::Word(word));
            }
        }
    }
    Ok(tokens)
}

/// Parses a search expression. An empty expression matches everything.
pub fn parse(text: &str) -> Result<Query, String> {
    let tokens = tokenize(text)?;
    let mut query = Query::default();
    let mut current: Vec<Term> = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        match &tokens[index] {
            Token::Word(word) if word.eq_ignore_ascii_case("sortby") || word.eq_ignore_ascii_case("page") => {
                break;
            }
            Token::Word(word) if word.eq_ignore_ascii_case("and") => index += 1,
            Token::Word(word) if word.eq_ignore_ascii_case("or") => {
                if current.is_empty() {
                    return Err("'or' without a left-hand term".into());
                }
                query.any_of.push(std::mem::take(&mut current));
                index += 1;
            }
            Token::Word(field) => {
                let negated = match tokens.get(index + 1) {
                    Some(Token::Equals) => false,
                    Some(Token::NotEquals) => true,
                    _ => return Err(format!("expected an operator after {field:?}")),
                };
                let value = match tokens.get(index + 2) {
                    Some(Token::Word(v)) | Some(Token::Quoted(v)) => v.clone(),
                    _ => return Err(format!("expected a value for {field:?}")),
                };
                // `Vms: name=x` style prefixes name the collection; drop them.
                let field = field.rsplit(':').next().unwrap_or(field).to_lowercase();
                current.push(Term {
                    field,
                    pattern: value.to_lowercase(),
                    negated,
                });
                index += 3;
            }
            other => return Err(format!("unexpected {other:?}")),
        }
    }
    if !current.is_empty() {
        query.any_of.push(current);
    }
    Ok(query)
}

/// Case-insensitive match with `*` wildcards; `pattern` is already lower-cased.
pub fn matches_pattern(pattern: &str, text: &str) -> bool {
    let text = text.to_lowercase();
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text.as_str();
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(pos) => rest = &rest[pos + part.len()..],
                None => return false,
            }
        }
    }
    true
}

impl Query {
    pub fn matches_all(&self) -> bool {
        self.any_of.is_empty()
    }

    /// Whether an object matches; `field` returns the object's values for a field name (None for
    /// fields the object does not have, which match nothing).
    pub fn matches(&self, field: impl Fn(&str) -> Option<Vec<String>>) -> bool {
        if self.any_of.is_empty() {
            return true;
        }
        self.any_of.iter().any(|all| {
            all.iter().all(|term| {
                let hit =
                    field(&term.field).is_some_and(|values| values.iter().any(|v| matches_pattern(&term.pattern, v)));
                hit != term.negated
            })
        })
    }

    /// When the whole query is `f=a or f=b …` with literal values of one field, those values;
    /// lets callers answer from an index instead of scanning.
    pub fn literal_alternatives(&self, field: &str) -> Option<Vec<&str>> {
        if self.any_of.is_empty() {
            return None;
        }
        self.any_of
            .iter()
            .map(|all| match all.as_slice() {
                [term] if term.field == field && term.is_literal() => Some(term.pattern.as_str()),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> impl Fn(&str) -> Option<Vec<String>> + '_ {
        move |f| (f == "name").then(|| vec![name.to_string()])
    }

    #[test]
    fn exact_and_wildcard_names() {
        let q = parse("name=worker").unwrap();
        assert!(q.matches(named("Worker")));
        assert!(!q.matches(named("worker-1")));
        let q = parse("name=work*").unwrap();
        assert!(q.matches(named("worker-1")));
    }

    #[test]
    fn quoted_values_and_or() {
        let q = parse(r#"name="my vm" or name="a\b""#).unwrap();
        assert!(q.matches(named("my vm")));
        assert!(q.matches(named("a\\b")), "a backslash is a plain character");
        assert!(!q.matches(named("my")));
        assert_eq!(q.literal_alternatives("name"), Some(vec!["my vm", "a\\b"]));
    }

    #[test]
    fn no_escapes_and_the_engines_disallowed_characters() {
        // `\"` does not escape: the quote closes the value and the rest is garbage.
        assert!(parse(r#"name="a\"b""#).is_err());
        for bad in ["name=o'brien", "name=a;", "name=\"x\"; delete", "name=a or id=';'"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn and_binds_tighter_than_or() {
        let q = parse("name=a and status=up or name=b").unwrap();
        assert_eq!(q.any_of.len(), 2);
        assert_eq!(q.any_of[0].len(), 2);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse("name").is_err());
        assert!(parse("name=\"open").is_err());
        assert!(parse("or name=a").is_err());
    }
}
