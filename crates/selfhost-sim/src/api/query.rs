//! Query parameters of API requests, and the options they translate to.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{DeleteOptions, ObjectFilter, Propagation, WriteOptions};

/// The decoded query string (kube-rs sends a leading `&`; empty pairs are ignored).
#[derive(Debug, Clone, Default)]
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    pub(crate) fn parse(raw: &str) -> Self {
        Query {
            pairs: form_urlencoded::parse(raw.as_bytes())
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        }
    }

    /// The first value of a parameter.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, key: &str) -> impl Iterator<Item = &str> {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    pub(crate) fn number<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, ApiError> {
        match self.get(key).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                ApiError::bad_request(format!("{key}: Invalid value: \"{v}\": must be a number"))
            }),
        }
    }

    /// `dryRun=All` (400 for any other value, as the apiserver validates it).
    pub(crate) fn dry_run(&self) -> Result<bool, ApiError> {
        dry_run_values(self.all("dryRun"))
    }

    /// Write options: dry run and the field manager (for Update entries in managedFields,
    /// falling back on the client's user agent as the apiserver does).
    pub(crate) fn write_options(&self, user_agent: Option<&str>) -> Result<WriteOptions, ApiError> {
        let field_manager = match self.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) => Some(m.to_string()),
            None => user_agent
                .map(|ua| ua.split('/').next().unwrap_or(ua).trim().to_string())
                .filter(|m| !m.is_empty())
                .or_else(|| Some("unknown".to_string())),
        };
        Ok(WriteOptions {
            dry_run: self.dry_run()?,
            field_manager,
        })
    }

    /// The label and field selectors as one filter; `None` when both select everything.
    pub(crate) fn filter(&self, rt: &ResourceType) -> Result<Option<Arc<ObjectFilter>>, ApiError> {
        let labels = LabelSelector::parse(self.get("labelSelector").unwrap_or(""))
            .map_err(|e| e.to_api_error())?;
        let fields = FieldSelector::parse(self.get("fieldSelector").unwrap_or(""), rt)
            .map_err(|e| e.to_api_error())?;
        if labels.is_everything() && fields.is_everything() {
            return Ok(None);
        }
        Ok(Some(Arc::new(move |obj: &Value| {
            labels.matches_object(obj) && fields.matches(obj)
        })))
    }

    /// `timeoutSeconds` of a watch.
    pub(crate) fn timeout(&self) -> Result<Option<Duration>, ApiError> {
        Ok(self
            .number::<u64>("timeoutSeconds")?
            .map(Duration::from_secs))
    }

    /// DeleteOptions from query parameters, filling what the body did not set.
    pub(crate) fn delete_options(&self, body: &[u8]) -> Result<DeleteOptions, ApiError> {
        let mut opts = delete_options_from_body(body)?;
        if opts.grace_period_seconds.is_none() {
            opts.grace_period_seconds = self.number("gracePeriodSeconds")?;
        }
        if opts.propagation_policy.is_none() {
            opts.propagation_policy = match self.get("propagationPolicy") {
                Some(p) => Some(parse_propagation(p)?),
                None => match self.get("orphanDependents") {
                    Some("true") => Some(Propagation::Orphan),
                    Some("false") => Some(Propagation::Background),
                    _ => None,
                },
            };
        }
        opts.dry_run = opts.dry_run || self.dry_run()?;
        Ok(opts)
    }
}

fn dry_run_values<'a>(values: impl Iterator<Item = &'a str>) -> Result<bool, ApiError> {
    let mut dry = false;
    for v in values {
        if v != "All" {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: \"{v}\": supported values: \"All\""
            )));
        }
        dry = true;
    }
    Ok(dry)
}

fn parse_propagation(p: &str) -> Result<Propagation, ApiError> {
    Propagation::parse(p).ok_or_else(|| {
        ApiError::bad_request(format!(
            "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
        ))
    })
}

/// DeleteOptions from a JSON body (kubectl and kube-rs send one).
fn delete_options_from_body(body: &[u8]) -> Result<DeleteOptions, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(DeleteOptions::default());
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions body: {e}")))?;
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    let propagation_policy = match s("propagationPolicy") {
        Some(p) => Some(parse_propagation(p)?),
        None => match v.get("orphanDependents").and_then(Value::as_bool) {
            Some(true) => Some(Propagation::Orphan),
            Some(false) => Some(Propagation::Background),
            None => None,
        },
    };
    let pre = v.get("preconditions");
    let pre_s = |k: &str| {
        pre.and_then(|p| p.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let dry = v
        .get("dryRun")
        .and_then(Value::as_array)
        .map(|a| dry_run_values(a.iter().filter_map(Value::as_str)))
        .transpose()?
        .unwrap_or(false);
    Ok(DeleteOptions {
        grace_period_seconds: v.get("gracePeriodSeconds").and_then(Value::as_i64),
        propagation_policy,
        precondition_uid: pre_s("uid"),
        precondition_resource_version: pre_s("resourceVersion"),
        dry_run: dry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_rs_leading_ampersand_and_encoding_are_understood() {
        let q = Query::parse("&fieldSelector=metadata.name%3Dp1&limit=500&watch=true");
        assert_eq!(q.get("fieldSelector"), Some("metadata.name=p1"));
        assert_eq!(q.number::<usize>("limit").unwrap(), Some(500));
        assert!(q.flag("watch"));
        assert_eq!(q.number::<usize>("nope").unwrap(), None);
        assert_eq!(
            Query::parse("limit=x")
                .number::<usize>("limit")
                .unwrap_err()
                .code,
            400
        );
    }

    #[test]
    fn delete_options_come_from_the_body_then_the_query() {
        let body = br#"{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Foreground","preconditions":{"uid":"u1"},"dryRun":["All"]}"#;
        let o = Query::parse("gracePeriodSeconds=0")
            .delete_options(body)
            .unwrap();
        assert_eq!(o.propagation_policy, Some(Propagation::Foreground));
        assert_eq!(o.precondition_uid.as_deref(), Some("u1"));
        assert_eq!(o.grace_period_seconds, Some(0));
        assert!(o.dry_run);
        let o = Query::parse("propagationPolicy=Orphan")
            .delete_options(b"")
            .unwrap();
        assert_eq!(o.propagation_policy, Some(Propagation::Orphan));
        assert_eq!(
            Query::parse("propagationPolicy=Later")
                .delete_options(b"")
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(Query::parse("dryRun=Some").dry_run().unwrap_err().code, 400);
    }

    #[test]
    fn the_field_manager_defaults_to_the_user_agent_product() {
        let o = Query::parse("")
            .write_options(Some("kubectl/v1.32.0 (linux/amd64)"))
            .unwrap();
        assert_eq!(o.field_manager.as_deref(), Some("kubectl"));
        let o = Query::parse("fieldManager=me")
            .write_options(Some("kubectl/v1"))
            .unwrap();
        assert_eq!(o.field_manager.as_deref(), Some("me"));
    }
}
