//! Provider credentials. The rules live in `tau_api::credentials`, shared with `tau doctor`, so the
//! hub and the doctor never disagree about whether a role can run.

pub use tau_api::credentials::*;
