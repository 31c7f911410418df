//! The channel's persisted state under `<TAU_DATA_DIR>/telegram/`: files (atomic, 0600,
//! versioned), the owner binding, the poll offset, the chat's session, the pairing code and the
//! approval cards. `tau telegram pair` and `tau telegram status` read and write the same files
//! through this module, so the client and the channel share one format.

mod files;
mod presentations;
mod records;

pub use files::{FORMAT_VERSION, STATE_DIR_NAME, StateError, state_dir};
pub use presentations::{
    CardState, MAX_KEPT, Presentation, PresentationLog, Tap, callback_data, parse_callback_data,
    random_token,
};
pub use records::{
    OwnerBinding, PAIRING_TTL_SECONDS, PairingCode, PairingRefusal, StatePaths, issue_pairing_code,
    read_offset, read_owner, read_session, redeem_pairing_code, write_offset, write_owner,
    write_session,
};
