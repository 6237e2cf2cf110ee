//! Request bodies of create and update, decoded as the apiserver decodes them: JSON, YAML,
//! or (for the kinds kubectl's generators create) protobuf, by Content-Type, into the kind's
//! fields (see [`super::strict`] for unknown and repeated fields); other media types are
//! 415, naming what is decoded.

use http::HeaderMap;
use serde_json::Value;

use super::protobuf;
use super::strict::{self, FieldValidation, scan};
use crate::error::ApiError;
use crate::resources::ResourceType;

/// A decoded object and the warnings to send with the answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decoded {
    /// The object, without fields its kind does not have.
    pub(crate) object: Value,
    /// `Warning` header texts (fieldValidation=Warn).
    pub(crate) warnings: Vec<String>,
}

/// The media type of a request, lower-cased, without parameters (JSON when absent).
pub(crate) fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Decodes the body of a create or update of `rt`.
///
/// # Errors
/// 400 for a body that is not an object of the kind (or, with Strict, has unknown or
/// repeated fields); 415 for a media type the server does not decode.
pub(crate) fn decode_object(
    rt: &ResourceType,
    headers: &HeaderMap,
    body: &[u8],
    directive: FieldValidation,
) -> Result<Decoded, ApiError> {
    let (mut object, scanned) = match media_type(headers).as_str() {
        "application/json" | "" | "*/*" => {
            let mut scanned = scan::scan(body).map_err(|e| {
                ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
            })?;
            (std::mem::take(&mut scanned.value), Some(scanned))
        }
        protobuf::MEDIA_TYPE => {
            let value = protobuf::decode(rt, body).map_err(|e| e.to_api_error())?;
            (value, None)
        }
        "application/yaml" => {
            let text = std::str::from_utf8(body)
                .map_err(|_| ApiError::bad_request("the request body is not UTF-8"))?;
            let value: Value = serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
            (value, None)
        }
        _ if protobuf::decodes(rt) => {
            return Err(ApiError::unsupported_media_type(&[
                "application/json",
                "application/yaml",
                protobuf::MEDIA_TYPE,
            ]));
        }
        _ => {
            return Err(ApiError::unsupported_media_type(&[
                "application/json",
                "application/yaml",
            ]));
        }
    };
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: expected an object",
        ));
    }
    let warnings = strict::check_body(rt, &mut object, scanned.as_ref(), directive)?;
    Ok(Decoded { object, warnings })
}
