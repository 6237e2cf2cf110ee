//! The protobuf wire format, read or written by the schema tables (`message.rs`).

use super::DecodeError;
use super::message::Message;

/// The message of that name.
pub(crate) fn message(name: &str) -> Option<&'static Message> {
    let messages = super::schema::MESSAGES;
    messages
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .map(|i| &messages[i])
}

/// One field as it is on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireValue<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2: a string, bytes, a message or packed numbers.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

/// Reads the fields of one message in order.
pub(crate) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    /// The fields of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Fields { rest: bytes }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.rest.len() {
            return Err(DecodeError::Truncated);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    /// The next field: its number and value.
    pub(crate) fn next_field(&mut self) -> Result<Option<(u32, WireValue<'a>)>, DecodeError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let key = varint(&mut self.rest)?;
        let tag = u32::try_from(key >> 3).map_err(|_| DecodeError::Malformed("field number"))?;
        if tag == 0 {
            return Err(DecodeError::Malformed("field number 0"));
        }
        let value = match key & 7 {
            0 => WireValue::Varint(varint(&mut self.rest)?),
            1 => {
                let b = self.take(8)?;
                let mut word = [0u8; 8];
                word.copy_from_slice(b);
                WireValue::Fixed64(u64::from_le_bytes(word))
            }
            2 => {
                let len =
                    usize::try_from(varint(&mut self.rest)?).map_err(|_| DecodeError::Truncated)?;
                WireValue::Bytes(self.take(len)?)
            }
            5 => {
                let b = self.take(4)?;
                let mut word = [0u8; 4];
                word.copy_from_slice(b);
                WireValue::Fixed32(u32::from_le_bytes(word))
            }
            _ => return Err(DecodeError::Malformed("wire type")),
        };
        Ok(Some((tag, value)))
    }
}

/// Reads a varint off the front of `bytes`.
pub(crate) fn varint(bytes: &mut &[u8]) -> Result<u64, DecodeError> {
    let mut value = 0u64;
    for (i, byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *bytes = &bytes[i + 1..];
            return Ok(value);
        }
    }
    Err(DecodeError::Malformed("varint"))
}

#[cfg(test)]
mod tests {
    use super::super::message::Kind;
    use super::*;

    #[test]
    fn every_message_a_field_names_is_in_the_schema() {
        let messages = super::super::schema::MESSAGES;
        assert!(messages.windows(2).all(|w| w[0].name < w[1].name), "sorted");
        for m in messages {
            for f in m.fields {
                let named = match f.kind {
                    Kind::Msg(n) | Kind::Inline(n) => Some(n),
                    Kind::Map(Kind::Msg(n)) => Some(*n),
                    _ => None,
                };
                if let Some(name) = named {
                    assert!(
                        message(name).is_some(),
                        "{}.{} names {name}",
                        m.name,
                        f.json
                    );
                }
            }
        }
    }

    #[test]
    fn varints_read_as_protobuf_writes_them() {
        let mut bytes: &[u8] = &[0xac, 0x02, 0x01];
        assert_eq!(varint(&mut bytes).expect("varint"), 300);
        assert_eq!(bytes, &[0x01]);
        let mut endless: &[u8] = &[0xff; 11];
        assert!(varint(&mut endless).is_err());
    }
}
