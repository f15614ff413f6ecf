//! Saved documents read as they stream: `report`, `serve` and the output rules parse a file
//! piece by piece (serde_json over a `BufReader`) straight into its typed document, so memory is
//! the typed values — no text of the whole file, no JSON tree — whatever the file's size.
//!
//! The document's kind comes from its `schema` member, which pcieperf writes first: the rest of
//! the object is then read as that kind's type. A document whose first member is not `schema`
//! (edited by hand, written by another tool) is gathered as a JSON tree first, then read the
//! same way; that costs the tree's memory, but only for such files.

use std::io::{BufReader, Read};
use std::path::Path;

use serde::de::value::{MapAccessDeserializer, StringDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::bench::results::{Results, PREVIOUS_SCHEMA, SCHEMA};
use crate::error::InvalidInput;

use super::strip::WithoutControlCharacters;
use super::view::Document;

/// Which documents a reader takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// Results documents only (`serve`, the output rules).
    Results,
    /// Every kind `report` shows: results, pio, crosscheck.
    Saved,
}

/// Standard input that is not a file (a pipe) is read up to this much: it has no size to check,
/// and a pipe can be endless. Files have no limit; a run writes them whatever their size.
pub const PIPE_LIMIT: crate::bounded::Limit = crate::bounded::Limit { bytes: 256 << 20, what: "results document read from a pipe" };

/// Read the document in `path` (`-`: standard input).
pub fn read_file(path: &Path, accept: Accept) -> Result<Document, InvalidInput> {
    from_reader(crate::bounded::stream(path, PIPE_LIMIT)?, accept)
}

/// Read a document from `reader`, with control characters removed from its strings.
pub fn from_reader<R: Read>(reader: R, accept: Accept) -> Result<Document, InvalidInput> {
    let text = BufReader::with_capacity(64 * 1024, WithoutControlCharacters::new(reader));
    let mut json = serde_json::Deserializer::from_reader(text);
    let (mut schema, mut refused) = (None, None);
    let mut track = serde_path_to_error::Track::new();
    let seed = DocumentSeed { accept, schema: &mut schema, refused: &mut refused };
    let read = seed.deserialize(serde_path_to_error::Deserializer::new(&mut json, &mut track)).and_then(|document| json.end().map(|()| document));
    read.map_err(|e| match (refused, schema) {
        (Some(refusal), _) => refusal,
        _ if e.is_io() => crate::bounded::into_invalid(e.into()),
        (None, Some(schema)) => InvalidInput::new(format!("malformed {schema} document at `{}`: {e}", track.path())),
        (None, None) if e.is_data() => no_schema(),
        (None, None) => InvalidInput::new(format!("not a JSON document: {e}")),
    })
}

fn no_schema() -> InvalidInput {
    InvalidInput::new(format!("not a pcieperf results document: no \"schema\": \"{SCHEMA}\""))
}

/// The kinds of document a reader can build.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Results,
    Pio,
    Crosscheck,
}

impl Kind {
    /// The kind a schema names, or why it is refused.
    fn of(schema: Option<&str>, accept: Accept) -> Result<Kind, InvalidInput> {
        use crate::bench::{crosscheck, pio};
        let kind = schema.and_then(|s| s.strip_prefix("pcieperf.")).and_then(|s| s.split_once('/')).map(|(kind, _)| kind);
        match (schema, kind) {
            (Some(SCHEMA | PREVIOUS_SCHEMA), _) => Ok(Kind::Results),
            (Some(pio::SCHEMA | pio::PREVIOUS_SCHEMA), _) if accept == Accept::Saved => Ok(Kind::Pio),
            (_, Some("pio")) if accept == Accept::Saved => Err(InvalidInput::new(format!("not a {} document", pio::SCHEMA))),
            (Some(crosscheck::SCHEMA), _) if accept == Accept::Saved => Ok(Kind::Crosscheck),
            (Some("pcieperf.results/1"), _) => Err(InvalidInput::new(format!(
                "results schema 'pcieperf.results/1' was written by an older pcieperf (its link conditions had another shape): \
                 this pcieperf reads '{SCHEMA}'; measure again or use the pcieperf that wrote it"
            ))),
            (Some(other), _) => Err(InvalidInput::new(format!("unsupported results schema '{other}': this pcieperf reads '{SCHEMA}'"))),
            (None, _) => Err(no_schema()),
        }
    }

    /// The document of this kind from `members`; its schema becomes this version's.
    fn read<'de, D: Deserializer<'de>>(self, members: D) -> Result<Document, D::Error> {
        use crate::bench::{crosscheck, pio};
        Ok(match self {
            Kind::Results => Document::Results(Results { schema: SCHEMA.into(), ..Results::deserialize(members)? }),
            Kind::Pio => Document::Pio(pio::PioRun { schema: pio::SCHEMA.into(), ..pio::PioRun::deserialize(members)? }),
            Kind::Crosscheck => Document::Crosscheck(crosscheck::Crosscheck::deserialize(members)?),
        })
    }
}

/// The top-level object, read by the kind its schema names. A refusal is kept in `refused` (the
/// parser's error only says where reading stopped) and the schema in `schema`, for messages.
struct DocumentSeed<'a> {
    accept: Accept,
    schema: &'a mut Option<String>,
    refused: &'a mut Option<InvalidInput>,
}

impl DocumentSeed<'_> {
    fn kind<E: de::Error>(&mut self, schema: Option<&str>) -> Result<Kind, E> {
        match Kind::of(schema, self.accept) {
            Ok(kind) => {
                *self.schema = schema.map(str::to_string);
                Ok(kind)
            }
            Err(refusal) => Err(self.refuse(refusal)),
        }
    }

    fn refuse<E: de::Error>(&mut self, refusal: InvalidInput) -> E {
        let error = E::custom(&refusal);
        *self.refused = Some(refusal);
        error
    }
}

impl<'de> DeserializeSeed<'de> for DocumentSeed<'_> {
    type Value = Document;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Document, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DocumentSeed<'_> {
    type Value = Document;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a pcieperf document (a JSON object with a \"schema\" member)")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Document, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Err(self.refuse(no_schema()));
        };
        let value: Value = map.next_value()?;
        if key == "schema" {
            let kind = self.kind(value.as_str())?;
            return kind.read(MapAccessDeserializer::new(Prepend { first: Some((key, value)), value: None, rest: map }));
        }
        let mut members = serde_json::Map::new();
        members.insert(key, value);
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            members.insert(key, value);
        }
        let schema = members.get("schema").and_then(Value::as_str).unwrap_or_default().to_string();
        let kind = self.kind(Some(&schema).filter(|s| !s.is_empty()).map(String::as_str))?;
        let mut track = serde_path_to_error::Track::new();
        kind.read(serde_path_to_error::Deserializer::new(Value::Object(members), &mut track))
            .map_err(|e| self.refuse(InvalidInput::new(format!("malformed {schema} document at `{}`: {e}", track.path()))))
    }
}

/// The members of an object with one already read put back in front.
struct Prepend<A> {
    first: Option<(String, Value)>,
    value: Option<Value>,
    rest: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Prepend<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        match self.first.take() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(StringDeserializer::<A::Error>::new(key)).map(Some)
            }
            None => self.rest.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(value).map_err(de::Error::custom),
            None => self.rest.next_value_seed(seed),
        }
    }
}
