//! Helpers for tau's end-to-end tests: locating the workspace's binaries and isolated homes.
