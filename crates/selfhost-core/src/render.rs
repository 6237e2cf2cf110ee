//! Rendering Kubernetes objects as users read and kubectl applies them.

use serde::Serialize;

/// An object that could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// YAML serialisation failed.
    #[error("cannot render YAML: {0}")]
    Yaml(String),
    /// JSON serialisation failed.
    #[error("cannot render JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// One object as a YAML document (without a leading `---`).
pub fn to_yaml<T: Serialize>(object: &T) -> Result<String, RenderError> {
    serde_saphyr::to_string(object).map_err(|e| RenderError::Yaml(e.to_string()))
}

/// Several objects as one multi-document YAML stream, each document introduced by `---`, as
/// `kubectl apply -f` reads it.
pub fn to_yaml_stream<T: Serialize>(objects: &[T]) -> Result<String, RenderError> {
    let mut out = String::new();
    for object in objects {
        out.push_str("---\n");
        let doc = to_yaml(object)?;
        out.push_str(&doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// Several objects as a `v1 List`, the form `kubectl get -o json` prints for many objects.
pub fn to_json_list<T: Serialize>(objects: &[T]) -> Result<serde_json::Value, RenderError> {
    let items = objects
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": items }))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn cm(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some([("on".to_string(), "yes".to_string())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn stream_round_trips_through_a_yaml_reader() {
        let text = to_yaml_stream(&[cm("a"), cm("b")]).expect("renders");
        assert_eq!(text.matches("---\n").count(), 2);
        assert!(text.contains("apiVersion: v1") && text.contains("kind: ConfigMap"));
        let back: Vec<ConfigMap> = serde_saphyr::from_multiple(&text).expect("parses");
        // YAML 1.1 booleans like `yes` must stay strings when read back.
        assert_eq!(back, vec![cm("a"), cm("b")]);
    }

    #[test]
    fn json_list_has_kind_list() {
        let list = to_json_list(&[cm("a")]).expect("renders");
        assert_eq!(list["kind"], "List");
        assert_eq!(list["items"][0]["metadata"]["name"], "a");
    }
}

/// Environment variables and flags whose values may be credentials: never printed.
const SENSITIVE_WORDS: &[&str] = &["password", "secret", "token", "credential", "private"];

fn sensitive(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SENSITIVE_WORDS.iter().any(|word| lower.contains(word))
}

/// A copy of a pod template with every value that may be a credential replaced by
/// `<redacted>`: env values of sensitive-looking names, and values of sensitive-looking flags
/// (file paths are kept: a path is not a secret).
pub fn redact_template(
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
) -> k8s_openapi::api::core::v1::PodTemplateSpec {
    let mut template = template.clone();
    let containers = template.spec.iter_mut().flat_map(|spec| {
        spec.containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
    });
    for container in containers {
        for var in container.env.iter_mut().flatten() {
            if sensitive(&var.name) && var.value.is_some() {
                var.value = Some("<redacted>".into());
            }
        }
        for arg in container
            .command
            .iter_mut()
            .flatten()
            .chain(container.args.iter_mut().flatten())
        {
            // Paths and booleans are not secrets (`--use-service-account-credentials=true`).
            if let Some((flag, value)) = arg.split_once('=')
                && sensitive(flag)
                && !value.starts_with('/')
                && !matches!(value, "true" | "false")
            {
                *arg = format!("{flag}=<redacted>");
            }
        }
    }
    template
}

/// A unified diff of two pod templates as YAML (credentials redacted), labelled `live` and
/// `target`; empty when they render the same. Both sides get the API server's defaults first
/// (see [`crate::rollout::normalize`]), so that a default the server filled in is not shown as
/// a change.
pub fn template_diff(
    live: &k8s_openapi::api::core::v1::PodTemplateSpec,
    target: &k8s_openapi::api::core::v1::PodTemplateSpec,
) -> Result<String, RenderError> {
    let live = to_yaml(&crate::rollout::normalize(&redact_template(live)))?;
    let target = to_yaml(&crate::rollout::normalize(&redact_template(target)))?;
    if live == target {
        return Ok(String::new());
    }
    Ok(similar::TextDiff::from_lines(&live, &target)
        .unified_diff()
        .context_radius(3)
        .header("live", "target")
        .to_string())
}

#[cfg(test)]
mod diff_tests {
    use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec};

    use super::*;

    fn template(image: &str, token: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "kube-apiserver".into(),
                    image: Some(image.into()),
                    command: Some(vec![
                        "kube-apiserver".into(),
                        format!("--token-auth-file={token}"),
                        "--oidc-client-secret=hunter2".into(),
                        "--use-service-account-credentials=true".into(),
                    ]),
                    env: Some(vec![EnvVar {
                        name: "API_TOKEN".into(),
                        value: Some("s3cr3t".into()),
                        value_from: None,
                    }]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn the_diff_shows_the_change_and_never_a_credential() {
        let diff = template_diff(
            &template("k:v1.33.1", "/etc/t.csv"),
            &template("k:v1.34.0", "/etc/t.csv"),
        )
        .expect("diff");
        assert!(
            diff.contains("--- live") && diff.contains("+++ target"),
            "{diff}"
        );
        assert!(
            diff.contains("-      image: \"k:v1.33.1\"") || diff.contains("-    image"),
            "{diff}"
        );
        assert!(
            !diff.contains("hunter2") && !diff.contains("s3cr3t"),
            "{diff}"
        );
        // a path is shown: it is where a secret is, not the secret
        let same = template_diff(
            &template("k:v1", "/etc/t.csv"),
            &template("k:v1", "/etc/t.csv"),
        )
        .expect("diff");
        assert!(same.is_empty());
    }
}
