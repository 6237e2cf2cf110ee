//! The observation builder, with the target of a pivot run.

use crate::component::Component;
pub(crate) use crate::observation::builder::{
    NEW, OLD, Pod, UPDATE_AT, World, on_front, t, template, version,
};
use crate::pivot::{PivotOptions, Target};

/// The target of the run: [`NEW`] with port sharing, started at `t(0)`.
pub(crate) fn target(component: Component) -> Target {
    Target {
        version: version(NEW),
        template: template(component, NEW, true),
        run_started_at: t(0),
        options: PivotOptions::default(),
    }
}

/// The target of the run behind the node's API front: [`target`], listening on the default
/// layout's address for the DaemonSet's pods.
pub(crate) fn front_target(component: Component) -> Target {
    front_target_with(component, crate::front::FrontLayout::default())
}

/// [`front_target`] behind a front with `layout`.
pub(crate) fn front_target_with(component: Component, layout: crate::front::FrontLayout) -> Target {
    let plain = target(component);
    Target {
        template: on_front(plain.template, layout.backend),
        ..plain
    }
}
