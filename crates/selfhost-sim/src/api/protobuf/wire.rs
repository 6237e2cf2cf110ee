//! The protobuf wire format, as far as Kubernetes messages use it: varints, 64- and 32-bit
//! fixed values and length-delimited fields (strings, bytes, messages, map entries).

use super::ProtobufError;

/// One field value as it appears on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireValue<'a> {
    /// Wire type 0: integers, booleans.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2: strings, bytes, embedded messages, map entries.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

/// The fields of one message, in wire order.
pub(crate) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    /// Reads the fields of `message`.
    pub(crate) fn of(message: &'a [u8]) -> Self {
        Fields { rest: message }
    }

    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let (&byte, rest) = self.rest.split_first().ok_or(ProtobufError::Truncated)?;
            self.rest = rest;
            let bits = u64::from(byte & 0x7f);
            // The tenth byte may only carry the top bit of a 64-bit value.
            if i == 9 && bits > 1 {
                return Err(ProtobufError::BadVarint);
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtobufError::BadVarint)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtobufError> {
        if self.rest.len() < n {
            return Err(ProtobufError::Truncated);
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }

    fn field(&mut self) -> Result<(u32, WireValue<'a>), ProtobufError> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| ProtobufError::BadVarint)?;
        if number == 0 {
            return Err(ProtobufError::FieldZero);
        }
        let value = match key & 7 {
            0 => WireValue::Varint(self.varint()?),
            1 => {
                let bytes = self.take(8)?;
                let mut le = [0u8; 8];
                le.copy_from_slice(bytes);
                WireValue::Fixed64(u64::from_le_bytes(le))
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| ProtobufError::Truncated)?;
                WireValue::Bytes(self.take(len)?)
            }
            5 => {
                let bytes = self.take(4)?;
                let mut le = [0u8; 4];
                le.copy_from_slice(bytes);
                WireValue::Fixed32(u32::from_le_bytes(le))
            }
            // 3 and 4 are the deprecated groups, which no Kubernetes message uses.
            other => return Err(ProtobufError::WireType(other)),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, WireValue<'a>), ProtobufError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let item = self.field();
        if item.is_err() {
            // Nothing after a malformed field can be trusted.
            self.rest = &[];
        }
        Some(item)
    }
}

#[cfg(test)]
pub(crate) mod encode {
    //! Hand-built protobuf bytes for tests.

    /// A varint.
    pub(crate) fn varint(mut value: u64, out: &mut Vec<u8>) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    /// A message under construction.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct Message(pub(crate) Vec<u8>);

    impl Message {
        pub(crate) fn new() -> Self {
            Message::default()
        }

        /// A length-delimited field (string, bytes, message).
        pub(crate) fn bytes(mut self, field: u32, value: &[u8]) -> Self {
            varint(u64::from(field) << 3 | 2, &mut self.0);
            varint(value.len() as u64, &mut self.0);
            self.0.extend_from_slice(value);
            self
        }

        pub(crate) fn string(self, field: u32, value: &str) -> Self {
            self.bytes(field, value.as_bytes())
        }

        pub(crate) fn message(self, field: u32, value: &Message) -> Self {
            self.bytes(field, &value.0)
        }

        /// A varint field (integers, booleans).
        pub(crate) fn varint(mut self, field: u32, value: u64) -> Self {
            varint(u64::from(field) << 3, &mut self.0);
            varint(value, &mut self.0);
            self
        }

        /// A map entry (`key = 1`, `value = 2`).
        pub(crate) fn entry(self, field: u32, key: &str, value: &[u8]) -> Self {
            let entry = Message::new().string(1, key).bytes(2, value);
            self.message(field, &entry)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::encode::Message;
    use super::*;

    #[test]
    fn fields_of_every_wire_type_are_read_in_order() {
        let mut msg = Message::new().string(1, "a").varint(7, 300).0;
        msg.extend_from_slice(&[(3 << 3) | 1, 1, 0, 0, 0, 0, 0, 0, 0]);
        msg.extend_from_slice(&[(4 << 3) | 5, 2, 0, 0, 0]);
        let fields: Vec<_> = Fields::of(&msg).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            fields,
            [
                (1, WireValue::Bytes(b"a")),
                (7, WireValue::Varint(300)),
                (3, WireValue::Fixed64(1)),
                (4, WireValue::Fixed32(2)),
            ]
        );
    }

    #[test]
    fn a_negative_int64_is_a_ten_byte_varint() {
        let msg = Message::new().varint(10, (-5i64) as u64).0;
        assert_eq!(msg.len(), 11);
        let (_, value) = Fields::of(&msg).next().unwrap().unwrap();
        assert_eq!(value, WireValue::Varint((-5i64) as u64));
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        let cases: [(&[u8], ProtobufError); 5] = [
            (&[0x0a, 5, b'a'], ProtobufError::Truncated),
            (&[0x08], ProtobufError::Truncated),
            (
                &[
                    0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
                ],
                ProtobufError::BadVarint,
            ),
            (&[0x0b], ProtobufError::WireType(3)),
            (&[0x02, 0], ProtobufError::FieldZero),
        ];
        for (bytes, want) in cases {
            let got: Result<Vec<_>, _> = Fields::of(bytes).collect();
            assert_eq!(got.unwrap_err(), want, "{bytes:?}");
        }
    }
}
