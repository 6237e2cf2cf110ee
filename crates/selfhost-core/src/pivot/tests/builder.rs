//! The observation builder, with the target of a pivot run.

use crate::component::Component;
pub(crate) use crate::observation::builder::{
    NEW, OLD, Pod, UPDATE_AT, World, t, template, version,
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
