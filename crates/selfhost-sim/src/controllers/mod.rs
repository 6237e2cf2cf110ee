//! Controllers and kubelets of the simulated cluster (being written).
