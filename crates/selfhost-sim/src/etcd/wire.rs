//! The protobuf wire format, for writing what the schema tables (`message.rs`) describe.

use super::message::Message;

/// The message of that name.
pub(crate) fn message(name: &str) -> Option<&'static Message> {
    let messages = super::schema::MESSAGES;
    messages
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .map(|i| &messages[i])
}

/// Appends a varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        // The low seven bits, with the continuation bit: the cast keeps exactly those.
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a varint field.
pub(crate) fn put_varint_field(out: &mut Vec<u8>, tag: u32, value: u64) {
    put_varint(out, u64::from(tag) << 3);
    put_varint(out, value);
}

/// Appends a length-delimited field.
pub(crate) fn put_bytes_field(out: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    put_varint(out, (u64::from(tag) << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}
