//! The shape of the schema tables: a message is a name and its fields; a field is its number,
//! its JSON name and the kind of value it holds.

/// What a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A UTF-8 string.
    Str,
    /// Bytes, base64 in JSON.
    Bytes,
    /// A bool.
    Bool,
    /// An int32.
    I32,
    /// An int64.
    I64,
    /// The message of that name.
    Msg(&'static str),
    /// The message of that name, whose fields Go embeds in the owner's JSON.
    Inline(&'static str),
    /// A map from strings to values of the kind.
    Map(&'static Kind),
    /// `meta.v1.Time`: RFC 3339 in JSON; seconds and nanos on the wire.
    Time,
    /// `intstr.IntOrString`: a number or a string in JSON.
    IntOrString,
    /// `resource.Quantity`: its string in JSON.
    Quantity,
    /// `meta.v1.FieldsV1`: raw JSON.
    FieldsV1,
}

/// One field of a message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    /// The field number.
    pub tag: u32,
    /// The name in JSON.
    pub json: &'static str,
    /// What it holds.
    pub kind: Kind,
    /// Whether it repeats (a JSON array).
    pub repeated: bool,
}

/// One message of the schema.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Message {
    /// Its name, e.g. `api.core.v1.PodSpec`.
    pub name: &'static str,
    /// Its fields, by number.
    pub fields: &'static [Field],
}

/// A field that holds one value.
pub(crate) const fn one(tag: u32, json: &'static str, kind: Kind) -> Field {
    Field {
        tag,
        json,
        kind,
        repeated: false,
    }
}

/// A repeated field.
pub(crate) const fn many(tag: u32, json: &'static str, kind: Kind) -> Field {
    Field {
        tag,
        json,
        kind,
        repeated: true,
    }
}

/// A message.
pub(crate) const fn msg(name: &'static str, fields: &'static [Field]) -> Message {
    Message { name, fields }
}
