//! Backup and restore: table by table, without the API key, a cut-off file, restore by
//! replacement.

use super::*;

/// Every table of a backup except the schema record (written by the migrations, with
/// its own time), as JSON text per table.
fn tables(file: &PathBuf) -> BTreeMap<String, Value> {
    let v: Value = serde_json::from_slice(
        &std::fs::read(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display())),
    )
    .unwrap_or_else(|e| panic!("backup is not JSON: {e}"));
    assert_eq!(v["format"].as_str(), Some("kasten-backup"));
    v["tables"]
        .as_object()
        .map(|t| {
            t.iter()
                .filter(|(k, _)| k.as_str() != "schema_version")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn backup_then_restore_reproduces_the_memory_exactly() {
    let fake = FakeServer::start("normal");
    let a = Home::with_llm(&fake.openai_url());
    for (i, t) in [
        "Caroline went to the LGBTQ support group and felt accepted",
        "Caroline is researching adoption agencies for her future family",
        "Melanie painted a sunrise over the lake with her kids",
        "Melanie and Caroline talked about adoption and painting classes",
        "Jon lost his banking job and wants to open a dance studio",
    ]
    .iter()
    .enumerate()
    {
        a.ok(&["add", t, "--time", &format!("2023-05-0{}T10:00:00Z", i + 1)]);
    }
    a.ok(&["enrich"]);
    // user edits, a rejected proposal and a rolled-back event: revisions, audit, statuses
    let events = a.json(&["events"]);
    let rolled = events["events"][0]["id"].as_str().is_some();
    assert!(rolled, "{events:#}");
    if let Some(ev) = events["events"].as_array().and_then(|e| e.first()) {
        a.ok(&["rollback", ev["id"].as_str().unwrap_or_default()]);
    }
    let ids = a.all_ids();
    a.ok(&["edit", &ids[0], "--tags", "family,adoption"]);
    let props = a.json(&["proposals"]);
    let items = props["items"]
        .as_array()
        .or_else(|| props.as_array())
        .cloned()
        .unwrap_or_default();
    if let Some(link) = items.iter().find(|i| i["kind"].as_str() == Some("link")) {
        a.ok(&["reject", link["id"].as_str().unwrap_or_default()]);
    }
    a.ok(&["add", "A note still waiting for the LLM"]);

    let b1 = a.dir.path().join("backup.json");
    let v = a.json(&["backup", b1.to_str().unwrap_or_default()]);
    for t in [
        "note", "link", "revision", "event", "job", "audit", "setting",
    ] {
        assert!(
            v["tables"][t].as_u64().is_some_and(|n| n > 0),
            "{t} is empty in the backup: {v:#}"
        );
    }

    // restore into a new memory, back it up again: every table is identical
    let b = Home::new();
    let r = b.json(&["restore", b1.to_str().unwrap_or_default()]);
    assert_eq!(r["tables"]["note"].as_u64(), Some(6), "{r:#}");
    let b2 = b.dir.path().join("backup2.json");
    b.ok(&["backup", b2.to_str().unwrap_or_default()]);
    let (ta, tb) = (tables(&b1), tables(&b2));
    assert_eq!(ta.keys().collect::<Vec<_>>(), tb.keys().collect::<Vec<_>>());
    for (name, rows) in &ta {
        assert!(
            tb.get(name) == Some(rows),
            "table {name} differs after restore"
        );
    }
    // and what the commands show is the same
    for args in [
        vec!["list", "--limit", "100"],
        vec!["events", "--limit", "100"],
        vec!["proposals", "--status", "rejected"],
        vec!["proposals", "--status", "rolled_back"],
        vec!["usage"],
    ] {
        assert_eq!(a.json(&args), b.json(&args), "{args:?} differs");
    }
    for id in &ids {
        assert_eq!(a.json(&["show", id]), b.json(&["show", id]), "show {id}");
        assert_eq!(
            a.json(&["history", id]),
            b.json(&["history", id]),
            "history {id}"
        );
    }
    // search works on the restored memory (the indexes were rebuilt)
    let hits = b.json(&["search", "adoption agencies", "-k", "1"]);
    assert!(
        hits["hits"][0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("adoption agencies")),
        "{hits:#}"
    );

    // a memory that is not empty is refused, and nothing changes
    let refused = a.run(&["restore", b1.to_str().unwrap_or_default()]);
    assert!(!refused.status.success());
    let msg = String::from_utf8_lossy(&refused.stderr);
    assert!(msg.contains("only into an empty memory"), "{msg}");
    assert_eq!(a.all_ids().len(), 6);
    // something that is not a backup is refused before anything is opened
    let junk = a.file("junk.json", b"[1, 2, 3]");
    let out = a.run(&["restore", junk.to_str().unwrap_or_default()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a Kasten backup"));
    let out = a.run(&["restore", "no/such/file.json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("neither a backup file nor a note id"));
}

/// A memory whose settings hold the API key (the fallback where no OS keyring works):
/// its backups leave the key out. The key is put there through a restore, so the test
/// never touches a real keyring.
#[test]
fn a_backup_never_holds_the_api_key() {
    const KEY: &str = "sk-kasten-backup-7a6b5c4d3e2f1a0b";
    let a = Home::new();
    a.ok(&["add", "Ada's dog Pixel loves the beach"]);
    let first = a.dir.path().join("first.json");
    a.ok(&["backup", first.to_str().unwrap_or_default()]);
    let mut v: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&first).unwrap_or_else(|e| panic!("read backup: {e}")),
    )
    .unwrap_or_else(|e| panic!("backup is not JSON: {e}"));
    let settings = v["tables"]["setting"]
        .as_array_mut()
        .unwrap_or_else(|| panic!("no settings in the backup"));
    let mut row = settings
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no setting row to copy"));
    row["id"]["$record"]["key"] = serde_json::json!("llm");
    row["value"] = serde_json::json!(
        serde_json::json!({"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": KEY})
            .to_string()
    );
    settings.retain(|r| r["id"]["$record"]["key"] != "llm");
    settings.push(row);
    let with_key = a.file("with-key.json", v.to_string().as_bytes());

    let b = Home::new();
    b.ok(&["restore", with_key.to_str().unwrap_or_default()]);
    // the key is in this memory's settings (masked when shown) ...
    let config = b.ok(&["--json", "config"]);
    assert!(
        config.contains("********") && !config.contains(KEY),
        "{config}"
    );
    // ... and not in its backup, which keeps the rest of the LLM settings
    let second = b.dir.path().join("second.json");
    b.ok(&["backup", second.to_str().unwrap_or_default()]);
    let text = std::fs::read_to_string(&second).unwrap_or_else(|e| panic!("{e}"));
    assert!(!text.contains(KEY), "the backup holds the API key");
    assert!(
        text.contains("127.0.0.1:9"),
        "the LLM settings were dropped"
    );
}

/// Backups, exports and JSON Lines imports are read and written a page at a time; a
/// damaged backup is refused whole: the scan reads it to the end before anything is
/// written, so the memory stays empty and a sound copy restores afterwards.
#[test]
fn a_cut_off_backup_restores_nothing_and_a_sound_one_everything() {
    let a = Home::new();
    let f = a.file("notes.jsonl", kasten_tests::jsonl(40).as_bytes());
    let v = import_json(&a, &f, "jsonl");
    assert_eq!(v["imported"].as_u64(), Some(40), "{v:#}");
    let good = a.dir.path().join("backup.json");
    a.ok(&["backup", good.to_str().unwrap_or_default()]);
    let bytes = std::fs::read(&good).unwrap_or_else(|e| panic!("read backup: {e}"));

    let b = Home::new();
    let cut = b.file("cut.json", &bytes[..bytes.len() / 2]);
    let out = b.run(&["restore", cut.to_str().unwrap_or_default()]);
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("cut off") && msg.contains("nothing was restored"),
        "{msg}"
    );
    assert!(b.all_ids().is_empty(), "a refused backup wrote notes");

    let r = b.json(&["restore", good.to_str().unwrap_or_default()]);
    assert_eq!(r["tables"]["note"].as_u64(), Some(40), "{r:#}");
    assert_eq!(b.all_ids().len(), 40);
    let again = b.dir.path().join("again.json");
    b.ok(&["backup", again.to_str().unwrap_or_default()]);
    assert_eq!(tables(&good), tables(&again));

    // the export writes one file per note
    let vault = b.dir.path().join("vault");
    let e = b.json(&["export", vault.to_str().unwrap_or_default()]);
    assert_eq!(e["files"].as_u64(), Some(40), "{e:#}");
    let written = std::fs::read_dir(&vault)
        .unwrap_or_else(|e| panic!("read vault: {e}"))
        .count();
    assert_eq!(written, 40);
}

/// The entries of a folder, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    v.sort();
    v
}

/// `kasten restore --replace FILE`: the backup takes the place of a memory that changed
/// since, row for row; the memory as it was is kept beside it (named in the output) and
/// opens with everything it held. A damaged backup is refused first and changes nothing.
#[test]
fn restore_replace_puts_a_backup_in_the_memorys_place_and_keeps_the_one_before() {
    let a = Home::new();
    let f = a.file("notes.jsonl", kasten_tests::jsonl(12).as_bytes());
    let v = import_json(&a, &f, "jsonl");
    assert_eq!(v["imported"].as_u64(), Some(12), "{v:#}");
    let mut ids = a.all_ids();
    ids.sort();
    let backup = a.dir.path().join("backup.json");
    let backup_arg = backup.to_str().unwrap_or_default();
    a.ok(&["backup", backup_arg]);
    // changed since the backup: a note added, one deleted
    a.ok(&["add", "written after the backup"]);
    a.ok(&["delete", &ids[0]]);
    let mut changed = a.all_ids();
    changed.sort();
    assert_ne!(changed, ids);
    let home_before = entries(a.dir.path());

    // a plain restore refuses a memory that is not empty, and names the way to replace it
    let out = a.run(&["restore", backup_arg]);
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("only into an empty memory") && msg.contains("--replace"),
        "{msg}"
    );
    // a damaged backup: refused before anything is opened; the memory and its folder stay
    let bytes = std::fs::read(&backup).unwrap_or_else(|e| panic!("read backup: {e}"));
    let cut = a.file("cut.json", &bytes[..bytes.len() / 2]);
    let home_before = {
        let mut v = home_before;
        v.push("cut.json".into());
        v.sort();
        v
    };
    let out = a.run(&["restore", "--replace", cut.to_str().unwrap_or_default()]);
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("cut off") && msg.contains("nothing was restored"),
        "{msg}"
    );
    let mut now = a.all_ids();
    now.sort();
    assert_eq!(now, changed, "a refused backup changed the memory");
    assert_eq!(
        entries(a.dir.path()),
        home_before,
        "something moved or was left"
    );
    // --replace takes a backup file only
    let out = a.run(&["restore", "--replace", &ids[1]]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a backup file"));

    // the replacement: the memory is the backup's again, every table as backed up
    let r = a.json(&["restore", "--replace", backup_arg]);
    assert_eq!(r["tables"]["note"].as_u64(), Some(12), "{r:#}");
    let previous = PathBuf::from(r["previous"].as_str().unwrap_or_default());
    let name = previous
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert!(
        previous.parent() == Some(a.dir.path()) && name.starts_with("db.before-restore-"),
        "{r:#}"
    );
    let mut now = a.all_ids();
    now.sort();
    assert_eq!(now, ids);
    let again = a.dir.path().join("again.json");
    a.ok(&["backup", again.to_str().unwrap_or_default()]);
    assert_eq!(tables(&backup), tables(&again));
    assert!(
        !a.dir.path().join("db.restoring").exists(),
        "the work folder is left"
    );
    // the memory as it was opens, with its change
    let kept = format!("surrealkv://{}", previous.display());
    let listed = a.json(&["--db", &kept, "list", "--limit", "100"]);
    let notes = listed["notes"].as_array().cloned().unwrap_or_default();
    assert_eq!(notes.len(), changed.len(), "{listed:#}");
    assert!(
        notes
            .iter()
            .any(|n| n["content"].as_str() == Some("written after the backup")),
        "{listed:#}"
    );
    // and the text output says where it is
    let out = a.ok(&["restore", "--replace", backup_arg]);
    assert!(out.contains("is kept in"), "{out}");
}
