//! Validation the real apiserver applies on create and update (422 Invalid).

pub mod names;
