//! Multi-document YAML as the tests read what a chart renders or clusterctl prints: the documents, one of them by
//! kind and name, and the kinds and names in order.

use serde_json::Value;

/// The non-empty documents of `yaml`; fails the test when it is not YAML.
pub fn documents(yaml: &str) -> Vec<Value> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(yaml).unwrap_or_else(|err| panic!("not YAML ({err}):\n{yaml}"));
    documents.into_iter().filter(|document| !document.is_null()).collect()
}

/// The document of `kind` named `name`; fails the test when there is none.
pub fn find<'a>(documents: &'a [Value], kind: &str, name: &str) -> &'a Value {
    documents
        .iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} among {:?}", kinds_and_names(documents)))
}

/// `<kind>/<name>` of each document, in order.
pub fn kinds_and_names(documents: &[Value]) -> Vec<String> {
    documents
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap_or(""),
                d["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_documents_and_finds_one_by_kind_and_name() {
        let documents = documents("---\nkind: A\nmetadata: {name: a}\n---\n---\nkind: B\nmetadata: {name: b}\nx: 1\n");
        assert_eq!(kinds_and_names(&documents), ["A/a", "B/b"]);
        assert_eq!(find(&documents, "B", "b")["x"], 1);
    }

    #[test]
    #[should_panic(expected = "no B a among [\"A/a\"]")]
    fn a_missing_document_fails_naming_what_there_is() {
        find(&documents("kind: A\nmetadata: {name: a}\n"), "B", "a");
    }
}
