//! Reads a JSON body the way Go's strict decoder sees it: the value (the last of repeated
//! fields wins), every repeated field, and where each field first appears, so that problems
//! can be reported in the order the body shows them.

use std::collections::HashMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// A field (or map key).
    Key(String),
    /// A list element.
    Index(usize),
}

/// A path as the apiserver prints it in strict decoding errors: `spec.containers[0].name`.
pub(crate) fn render(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// A JSON document with what a strict decoder notices about its fields.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scanned {
    /// The document.
    pub(crate) value: Value,
    /// Repeated fields: (position, rendered path), in body order.
    pub(crate) duplicates: Vec<(usize, String)>,
    /// Where each field path first appears (its position among all fields of the body).
    first_seen: HashMap<String, usize>,
}

impl Scanned {
    /// The position of a field's first appearance; fields the body does not show sort last.
    pub(crate) fn position(&self, path: &str) -> usize {
        self.first_seen.get(path).copied().unwrap_or(usize::MAX)
    }
}

/// Parses a JSON document, noting repeated fields and where each field first appears.
///
/// # Errors
/// The JSON syntax error, as serde_json words it.
pub(crate) fn scan(body: &[u8]) -> Result<Scanned, serde_json::Error> {
    let mut scanner = Scanner::default();
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = Node(&mut scanner).deserialize(&mut de)?;
    de.end()?;
    Ok(Scanned {
        value,
        duplicates: scanner.duplicates,
        first_seen: scanner.first_seen,
    })
}

#[derive(Default)]
struct Scanner {
    path: Vec<Segment>,
    fields: usize,
    duplicates: Vec<(usize, String)>,
    first_seen: HashMap<String, usize>,
}

/// One value of the document, read with the scanner's path.
struct Node<'s>(&'s mut Scanner);

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON has no NaN or infinity, so every parsed float is representable.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let scanner = self.0;
        let mut items = Vec::new();
        loop {
            scanner.path.push(Segment::Index(items.len()));
            let item = seq.next_element_seed(Node(scanner))?;
            scanner.path.pop();
            match item {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let scanner = self.0;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            scanner.fields += 1;
            scanner.path.push(Segment::Key(key.clone()));
            let path = render(&scanner.path);
            if object.contains_key(&key) {
                scanner.duplicates.push((scanner.fields, path));
            } else {
                scanner.first_seen.entry(path).or_insert(scanner.fields);
            }
            let value = map.next_value_seed(Node(scanner))?;
            scanner.path.pop();
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repeated_fields_are_noted_in_body_order_and_the_last_value_wins() {
        let body = br#"{"metadata": {"name": "a", "name": "b"},
                        "spec": {"containers": [{"name": "c", "image": "x", "image": "y"}],
                                 "paused": true, "paused": false}}"#;
        let scanned = scan(body).unwrap();
        assert_eq!(scanned.value["metadata"]["name"], "b");
        assert_eq!(scanned.value["spec"]["containers"][0]["image"], "y");
        assert_eq!(scanned.value["spec"]["paused"], false);
        let paths: Vec<&str> = scanned.duplicates.iter().map(|(_, p)| p.as_str()).collect();
        assert_eq!(
            paths,
            ["metadata.name", "spec.containers[0].image", "spec.paused"]
        );
        assert!(scanned.position("metadata") < scanned.position("spec.containers[0].name"));
        assert!(scanned.position("spec.containers[0].image") < scanned.position("spec.paused"));
        assert_eq!(scanned.position("nowhere"), usize::MAX);
    }

    #[test]
    fn the_document_is_the_one_serde_json_reads() {
        let body = br#"[{"a": 1, "b": [1.5, -2, null, true, "s"]}, {}]"#;
        let scanned = scan(body).unwrap();
        assert_eq!(
            scanned.value,
            serde_json::from_slice::<Value>(body).unwrap()
        );
        assert!(scanned.duplicates.is_empty());
        assert_eq!(scanned.position("[0].b"), 2);
    }

    #[test]
    fn syntax_errors_and_trailing_data_are_rejected() {
        assert!(scan(b"{\"a\": ").is_err());
        assert!(scan(b"{} {}").is_err());
        assert_eq!(scan(b" {} ").unwrap().value, json!({}));
    }

    #[test]
    fn paths_render_like_the_apiservers() {
        let path = [
            Segment::Key("spec".into()),
            Segment::Key("containers".into()),
            Segment::Index(0),
            Segment::Key("name".into()),
        ];
        assert_eq!(render(&path), "spec.containers[0].name");
        assert_eq!(
            render(&[Segment::Index(1), Segment::Key("path".into())]),
            "[1].path"
        );
    }
}
