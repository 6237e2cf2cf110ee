//! DaemonSets edited by hand into odd shapes.
