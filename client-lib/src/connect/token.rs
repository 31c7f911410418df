//! The hub's bearer token, `<TAU_DATA_DIR>/hub/token`, as both hub APIs on the loopback port need
//! it (gRPC over TCP and `GET /status`).
//!
//! Invariants: read from its file each time it is needed, never cached; an error names the file,
//! never its content; only what the hub writes (hex, so ASCII letters and digits) is a token.

use std::path::Path;

/// The token in `file`, trimmed, or why there is none (one line, without the content).
pub fn read(file: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read the hub token {}: {e}", file.display()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("the hub token file {} is empty", file.display()));
    }
    if !token.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(format!("the hub token {} is not a token", file.display()));
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_empty_or_odd_token_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        assert!(
            read(&file)
                .unwrap_err()
                .starts_with("cannot read the hub token")
        );
        std::fs::write(&file, "  \n").unwrap();
        assert!(read(&file).unwrap_err().contains("empty"));
        std::fs::write(&file, "se cret\n").unwrap();
        let error = read(&file).unwrap_err();
        assert!(
            error.contains("not a token") && !error.contains("se cret"),
            "{error}"
        );
        std::fs::write(&file, "secret\n").unwrap();
        assert_eq!(read(&file).unwrap(), "secret");
    }
}
