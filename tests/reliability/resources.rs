//! Resources: a data directory the process may not write, a disk that fills up mid-import
//! (a file-size limit, so writes fail with EFBIG as on a full disk), a 1 MB note, and the
//! peak memory of imports of two sizes.

use std::collections::HashSet;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

use kasten_tests::{Home, kasten_bin};

use super::consistency;

/// Effective user id of this process (from /proc, no libc).
fn uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|u| u.parse().ok())
        .unwrap_or(u32::MAX)
}

/// `kasten args` for `h`, run so that file permissions apply: as root, without the
/// capabilities that override them (setpriv, util-linux).
fn without_override(h: &Home, args: &[&str]) -> std::process::Output {
    let mut c = h.cmd(args);
    if uid() == 0 {
        let mut wrapped = Command::new("setpriv");
        wrapped
            .args([
                "--bounding-set=-dac_override,-dac_read_search,-fowner",
                "--",
            ])
            .arg(kasten_bin())
            .args(args);
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => wrapped.env(k, v),
                None => wrapped.env_remove(k),
            };
        }
        c = wrapped;
    }
    c.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {args:?} (setpriv needed as root): {e}"))
}

fn chmod_tree(dir: &std::path::Path, readonly: bool) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            chmod_tree(&e.path(), readonly);
        }
        set_readonly(&e.path(), readonly);
    }
    set_readonly(dir, readonly);
}

fn set_readonly(p: &std::path::Path, readonly: bool) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(p)
        .map(|m| m.permissions().mode())
        .unwrap_or(0o755);
    let mode = if readonly {
        mode & !0o222
    } else {
        mode | 0o200
    };
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", p.display()));
}

#[test]
fn a_read_only_data_directory_is_refused_in_words_and_left_intact() {
    let h = Home::new();
    let ids: Vec<String> = ["first note", "second note"]
        .iter()
        .map(|n| h.ok(&["add", n]).trim().to_owned())
        .collect();
    let before = h.dump();
    let db = h.dir.path().join("db");
    chmod_tree(&db, true);
    for args in [&["add", "a third"][..], &["list"], &["search", "note"]] {
        let out = without_override(&h, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "cannot use the data directory {}: it is not writable",
                db.display()
            )),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    chmod_tree(&db, false);
    let after = h.dump();
    assert_eq!(after["note"], before["note"], "nothing changed");
    assert_eq!(h.all_ids().len(), ids.len());
    h.ok(&["add", "writable again"]);
}

/// Runs `kasten args` with writes limited to files of `blocks` 512-byte blocks (SIGXFSZ
/// ignored, so a write past the limit fails with EFBIG the way a full disk fails it).
fn with_file_limit(h: &Home, blocks: u64, args: &[&str]) -> std::process::Output {
    let mut script = format!("trap '' XFSZ; ulimit -f {blocks}; exec \"$0\"");
    for i in 0..args.len() {
        script.push_str(&format!(" \"${}\"", i + 1));
    }
    let inner = h.cmd(args);
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).arg(kasten_bin()).args(args);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_full_disk_stops_the_import_in_words_and_loses_nothing_committed() {
    let h = Home::new();
    h.ok(&["add", "written before the disk filled up"]);
    let lines: String = (0..500)
        .map(|i| {
            format!(
                "{{\"content\": \"line {i}: {}\"}}\n",
                "a longer remark about the garden and the weather ".repeat(4)
            )
        })
        .collect();
    let f = h.file("notes.jsonl", lines.as_bytes());
    let path = f.to_str().unwrap_or_default();
    let args = [
        "import",
        path,
        "--format",
        "jsonl",
        "--print-ids",
        "--batch",
        "50",
    ];
    let out = with_file_limit(&h, 1000, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the limit was not hit: {err}");
    let error = err
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {err}"));
    assert!(
        error.starts_with("error: import stopped at line ")
            && error.contains("note(s) before it were saved, this batch and the rest were not"),
        "{error}"
    );
    // and it says what the disk said (SurrealDB only logs the cause)
    assert!(
        error.contains("the disk refused a write: File too large (os error 27)"),
        "{error}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let acknowledged: HashSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    // the disk has room again: everything acknowledged is there, once, and consistent
    let ids: HashSet<String> = h.all_ids().into_iter().collect();
    assert!(acknowledged.is_subset(&ids));
    assert_eq!(ids.len(), acknowledged.len() + 1, "whole batches only");
    assert!(acknowledged.len() < 500, "the limit stopped the import");
    consistency::check(&h.dump(), "after the full disk");
    // the import finishes without duplicating what was saved
    h.ok(&["import", path, "--format", "jsonl"]);
    assert_eq!(h.all_ids().len(), 501);
    // a single add on a full disk fails in words too, and the memory still opens
    let out = with_file_limit(&h, 8, &["add", "no room for this one"]);
    if out.status.success() {
        // it fitted in what the limit allows (the write went to an existing file)
        assert_eq!(h.all_ids().len(), 502);
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("error: "), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(h.all_ids().len(), 501);
    }
}

#[test]
fn a_one_megabyte_note_is_saved_whole_and_found() {
    let h = Home::new();
    let words = [
        "river", "stone", "market", "violin", "harbour", "lantern", "orchard", "copper",
    ];
    let mut content = String::from("quokkaphone marks the start of a very long note. ");
    let mut i = 0;
    while content.len() < 1024 * 1024 {
        content.push_str(words[i % words.len()]);
        content.push_str(&format!("{} ", i % 1000));
        i += 1;
    }
    content.push_str("and that is the end.");
    let mut child = h
        .cmd(&["add", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("stdin"));
        stdin
            .write_all(content.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let shown = h.json(&["show", &id]);
    assert_eq!(shown["content"].as_str().map(str::len), Some(content.len()));
    assert!(shown["content"].as_str() == Some(content.as_str()));
    let hits = h.json(&["search", "quokkaphone", "-k", "1"]);
    assert_eq!(hits["hits"][0]["id"].as_str(), Some(id.as_str()), "{hits}");
}

/// Runs an import of `n` notes and returns its peak resident memory (VmHWM) in KiB.
fn import_peak_kib(n: usize) -> u64 {
    let h = Home::new();
    let (mut child, out) = h.spawn_import(n, None);
    let pid = child.id();
    let counter = std::thread::spawn(move || out.lines().count());
    let mut peak = 0;
    // VmHWM only grows; the last reading before exit is the peak (to within 5 ms)
    while child.try_wait().ok().flatten().is_none() {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if let Some(kib) = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|k| k.parse::<u64>().ok())
        {
            peak = peak.max(kib);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(child.wait().is_ok_and(|s| s.success()));
    assert_eq!(counter.join().unwrap_or(0), n, "every note acknowledged");
    assert!(peak > 0, "no reading of VmHWM");
    peak
}

#[test]
fn import_memory_does_not_grow_with_the_import() {
    let small = import_peak_kib(300);
    let large = import_peak_kib(1500);
    eprintln!(
        "import peak RSS (VmHWM): 300 notes {} MiB, 1,500 notes {} MiB",
        small / 1024,
        large / 1024
    );
    // five times the notes: the input file and the note records grow (~200 bytes a
    // note), the embedding batches and the store's buffers do not
    assert!(
        large < small + 64 * 1024,
        "peak RSS grew from {small} KiB to {large} KiB"
    );
}
