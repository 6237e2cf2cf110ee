//! Image pulls that fail, back off, and recover; names no runtime accepts.

use super::*;

#[test]
fn an_unknown_image_shows_err_image_pull_then_image_pull_back_off_with_growing_delays() {
    let mut h = Harness::new();
    let image = "registry.k8s.io/kube-apiserver:v9.9.9";
    let uid = h.create(pod("web", image));
    // Pull attempts start at 1 (sandbox), then every failure is followed by 10, 20, 40 s.
    h.run_to(3.0);
    assert_eq!(h.state(&uid), "ErrImagePull");
    let message = h
        .container(&uid)
        .state
        .unwrap()
        .waiting
        .unwrap()
        .message
        .unwrap();
    assert_eq!(
        message,
        format!(
            "rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": failed to resolve \
             reference \"{image}\": {image}: not found"
        )
    );
    h.run_to(5.0);
    assert_eq!(h.state(&uid), "ImagePullBackOff");
    let message = h
        .container(&uid)
        .state
        .unwrap()
        .waiting
        .unwrap()
        .message
        .unwrap();
    assert!(
        message.starts_with(&format!(
            "Back-off pulling image \"{image}\": ErrImagePull: rpc error"
        )),
        "{message}"
    );
    assert_eq!(h.phase(&uid), "Pending");
    let pulls = |h: &Harness| -> Vec<u64> {
        h.events
            .iter()
            .filter(|e| e.reason == "Pulling")
            .map(|e| ms(e.at) / 1000)
            .collect()
    };
    h.run_to(100.0);
    // Failures at 3, 15, 37, 79: next attempts 10, 20, 40 s after each.
    assert_eq!(pulls(&h), [1, 13, 35, 77]);
    let reasons = h.event_reasons(&uid);
    assert!(reasons.contains(&"Failed") && reasons.contains(&"BackOff"));
}

#[test]
fn a_pull_succeeds_once_the_registry_has_the_image() {
    let mut h = Harness::new();
    let image = "example.com/late:1";
    let uid = h.create(pod("late", image));
    h.run_to(10.0);
    assert_eq!(h.state(&uid), "ImagePullBackOff");
    h.registry.add(image, ImageBehaviour::default()).unwrap();
    // The retry at 13 s pulls for 2 s, then 1 s to start and 3 s to Ready.
    h.run_to(16.0);
    assert_eq!(h.state(&uid), "Running");
    h.run_to(19.0);
    assert!(h.container(&uid).ready);
}

#[test]
fn invalid_names_and_the_never_policy_wait_forever() {
    let mut h = Harness::new();
    let invalid = h.create(pod("bad", "Not A Valid Image"));
    let mut never = pod("never", "example.com/absent:1");
    never.spec.as_mut().unwrap().containers[0].image_pull_policy = Some("Never".into());
    let never = h.create(never);
    h.run_to(60.0);
    assert_eq!(h.state(&invalid), "InvalidImageName");
    assert_eq!(h.state(&never), "ErrImageNeverPull");
    assert_eq!(
        h.container(&never)
            .state
            .unwrap()
            .waiting
            .unwrap()
            .message
            .as_deref(),
        Some("Container image \"example.com/absent:1\" is not present with pull policy of Never")
    );
    assert_eq!(
        (h.phase(&invalid), h.phase(&never)),
        ("Pending".into(), "Pending".into())
    );
}
