//! The committed `ui/src/bindings.ts` must be what the commands and events generate. Like
//! rust-analyzer's `ensure_file_contents`: on drift the file is rewritten and the test
//! fails, so a local run fixes it and CI catches an uncommitted change.

#[test]
fn bindings_ts_is_up_to_date() -> Result<(), String> {
    // the checkout being tested (cargo sets this for the test process; the value compiled
    // in can name another clone that shared the target directory, and a drift would then
    // be written there)
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let committed_path = root.join("ui/src/bindings.ts");
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let fresh_path = dir.path().join("bindings.ts");
    crate::export_bindings(&fresh_path)?;
    let fresh = std::fs::read_to_string(&fresh_path).map_err(|e| e.to_string())?;
    assert!(fresh.contains("addNote"), "the export lacks the commands");
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    if committed != fresh {
        std::fs::write(&committed_path, &fresh).map_err(|e| format!("cannot update: {e}"))?;
        return Err(
            "ui/src/bindings.ts was out of date with the Rust commands and events; it \
                    has been regenerated: review and commit it"
                .into(),
        );
    }
    Ok(())
}
