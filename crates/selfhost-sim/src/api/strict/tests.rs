use serde_json::{Value, json};

use super::*;
use crate::resources::{DAEMONSETS, PODS};

/// A DaemonSet body with a repeated name, unknown fields at three depths, a field both
/// unknown and repeated, and repeated known fields.
const MESSY_DAEMONSET: &str = r#"{
  "apiVersion": "apps/v1", "kind": "DaemonSet",
  "metadata": {"name": "first", "name": "ds", "unknownMeta": "x"},
  "spec": {
    "unknown1": 1,
    "unknownTwice": "a", "unknownTwice": "b",
    "minReadySeconds": 1, "minReadySeconds": 2,
    "selector": {"matchLabels": {"app": "a"}},
    "template": {
      "metadata": {"labels": {"app": "a"}},
      "spec": {"containers": [{"name": "c", "image": "i", "unknownNested": {"a": 1, "a": 2},
                               "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}
    }
  }
}"#;

const MESSY_IN_ORDER: [&str; 7] = [
    r#"duplicate field "metadata.name""#,
    r#"unknown field "metadata.unknownMeta""#,
    r#"unknown field "spec.unknown1""#,
    r#"unknown field "spec.unknownTwice""#,
    r#"duplicate field "spec.minReadySeconds""#,
    r#"unknown field "spec.template.spec.containers[0].unknownNested""#,
    r#"duplicate field "spec.template.spec.containers[0].imagePullPolicy""#,
];

fn body(text: &str, directive: FieldValidation) -> Result<(Value, Vec<String>), ApiError> {
    let mut scanned = scan::scan(text.as_bytes()).expect("valid JSON");
    let mut obj = std::mem::take(&mut scanned.value);
    let warnings = check_body(&DAEMONSETS, &mut obj, Some(&scanned), directive)?;
    Ok((obj, warnings))
}

#[test]
fn strict_rejects_a_body_listing_every_problem_in_body_order() {
    let err = body(MESSY_DAEMONSET, FieldValidation::Strict).unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        err.message,
        format!(
            "DaemonSet in version \"v1\" cannot be handled as a DaemonSet: strict decoding error: {}",
            MESSY_IN_ORDER.join(", ")
        )
    );
}

#[test]
fn warn_and_ignore_drop_unknown_fields_and_differ_only_in_what_they_say() {
    for (directive, said) in [
        (FieldValidation::Warn, MESSY_IN_ORDER.to_vec()),
        (FieldValidation::Ignore, Vec::new()),
    ] {
        let (obj, warnings) = body(MESSY_DAEMONSET, directive).expect("accepted");
        assert_eq!(warnings, said, "{directive:?}");
        assert_eq!(
            obj["metadata"],
            json!({"name": "ds"}),
            "last repeated value wins"
        );
        assert_eq!(obj["spec"]["minReadySeconds"], 2);
        assert!(obj["spec"].get("unknown1").is_none());
        assert!(obj["spec"].get("unknownTwice").is_none());
        let container = &obj["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container,
            &json!({"name": "c", "image": "i", "imagePullPolicy": "Never"})
        );
    }
}

#[test]
fn a_clean_body_passes_every_directive_unchanged_but_for_nulls() {
    let text = r#"{"metadata": {"name": "ds", "labels": null},
                   "spec": {"selector": {"matchLabels": {"app": "a"}}}}"#;
    for directive in [
        FieldValidation::Strict,
        FieldValidation::Warn,
        FieldValidation::Ignore,
    ] {
        let (obj, warnings) = body(text, directive).expect("accepted");
        assert!(warnings.is_empty());
        assert_eq!(obj["metadata"], json!({"name": "ds"}));
        assert_eq!(obj["kind"], "DaemonSet");
    }
}

#[test]
fn a_value_of_the_wrong_type_is_rejected_whatever_the_directive() {
    let text = r#"{"metadata": {"name": "ds"}, "spec": {"minReadySeconds": "soon"}}"#;
    for directive in [FieldValidation::Strict, FieldValidation::Ignore] {
        let err = body(text, directive).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message
                .starts_with("DaemonSet in version \"v1\" cannot be handled as a DaemonSet: "),
            "{}",
            err.message
        );
    }
}

#[test]
fn yaml_bodies_report_unknown_fields_sorted() {
    let mut obj = json!({"metadata": {"name": "p", "zeta": 1},
                         "spec": {"containers": [{"name": "c", "alpha": 1}]}});
    let warnings = check_body(&PODS, &mut obj, None, FieldValidation::Warn).unwrap();
    assert_eq!(
        warnings,
        [
            r#"unknown field "metadata.zeta""#,
            r#"unknown field "spec.containers[0].alpha""#
        ]
    );
}

fn patched(
    patch_problems: &[String],
    order: PatchedOrder,
    directive: FieldValidation,
) -> Result<(Value, Vec<String>), ApiError> {
    let mut obj = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "ds"},
        "spec": {"zzz": 1, "selector": {"matchLabels": {"app": "a"}}, "template": {"spec": {
            "containers": [{"name": "c", "unknownNested": 1}]}}}
    });
    let warnings = check_patched(
        &DAEMONSETS,
        &mut obj,
        patch_problems,
        order,
        directive,
        |_| "the patch".to_string(),
    )?;
    Ok((obj, warnings))
}

#[test]
fn patched_objects_report_the_patchs_problems_first_then_unknown_fields() {
    let own = [r#"duplicate field "spec.paused""#.to_string()];
    let (obj, warnings) = patched(&own, PatchedOrder::Walk, FieldValidation::Warn).unwrap();
    assert_eq!(
        warnings,
        [
            r#"duplicate field "spec.paused""#,
            r#"unknown field "spec.template.spec.containers[0].unknownNested""#,
            r#"unknown field "spec.zzz""#,
        ]
    );
    assert!(obj["spec"].get("zzz").is_none());

    let err = patched(&own, PatchedOrder::Text, FieldValidation::Strict).unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        err.message,
        format!(
            " \"\" is invalid: patch: Invalid value: \"the patch\": strict decoding error: {}",
            warnings.join(", ")
        )
    );
    assert_eq!(err.details.as_ref().unwrap()["causes"][0]["field"], "patch");

    let (_, warnings) = patched(&own, PatchedOrder::Walk, FieldValidation::Ignore).unwrap();
    assert!(warnings.is_empty());
}

#[test]
fn json_patch_operations_with_unknown_or_repeated_members_are_problems() {
    let ops = r#"[{"op": "add", "path": "/a", "value": 1, "foo": "bar"},
                  {"op": "add", "path": "/b", "path": "/c", "value": 1},
                  {"op": "remove", "path": "/d"}]"#;
    let scanned = scan::scan(ops.as_bytes()).unwrap();
    assert_eq!(
        json_patch_problems(&scanned),
        [
            r#"json patch unknown field "[0].foo""#,
            r#"json patch duplicate field "[1].path""#
        ]
    );
}

#[test]
fn the_directive_defaults_to_warn_and_rejects_other_values() {
    let cases = [
        ("", Some(FieldValidation::Warn)),
        ("fieldValidation=", Some(FieldValidation::Warn)),
        ("fieldValidation=Warn", Some(FieldValidation::Warn)),
        ("fieldValidation=Strict", Some(FieldValidation::Strict)),
        ("fieldValidation=Ignore", Some(FieldValidation::Ignore)),
        ("fieldValidation=strict", None),
    ];
    for (query, want) in cases {
        assert_eq!(
            FieldValidation::from_query(&Query::parse(query), "CreateOptions").ok(),
            want,
            "{query}"
        );
    }
    let err = FieldValidation::from_query(&Query::parse("fieldValidation=Loud"), "PatchOptions")
        .unwrap_err();
    assert_eq!(err.code, 422);
    assert_eq!(
        err.message,
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn""#
    );
}

#[test]
fn apply_configurations_with_unknown_fields_fail_as_schema_errors() {
    let applied = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "ds", "namespace": "kube-system"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "api", "image": "i", "ports": [{"containerPort": 443, "hostPrt": 1}]},
            {"name": "side", "imagePullPolicyx": "Always"}
        ]}}}
    });
    let err = check_applied(&DAEMONSETS, &applied).unwrap_err();
    assert_eq!((err.code, err.reason.as_str()), (500, ""));
    assert!(
        err.to_status().get("reason").is_none(),
        "Go omits an empty reason"
    );
    assert_eq!(
        err.message,
        "failed to create typed patch object (kube-system/ds; apps/v1, Kind=DaemonSet): errors:\n  \
         .spec.template.spec.containers[name=\"api\"].ports[containerPort=443].hostPrt: field not declared in schema\n  \
         .spec.template.spec.containers[name=\"side\"].imagePullPolicyx: field not declared in schema"
    );

    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "team"}, "spec": {"bogus": 1}});
    assert_eq!(
        check_applied(&crate::resources::NAMESPACES, &namespace)
            .unwrap_err()
            .message,
        "failed to create typed patch object (team; /v1, Kind=Namespace): .spec.bogus: field not declared in schema"
    );

    let clean = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"containers": [{"name": "c", "image": "i", "args": null}]}});
    assert_eq!(check_applied(&PODS, &clean), Ok(()));
}
