//! Discovery of local LLM servers against servers on loopback: `kasten-fakellm` answering
//! like Ollama and like an OpenAI-compatible server, one that answers garbage, one that
//! accepts and never answers, and a closed port.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use kasten_fakellm::{FakeLlm, Mode};
use kasten_llm::{Provider, discover_at};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server that answers every request with `reply` (or never, when `None`).
async fn raw_server(reply: Option<&'static [u8]>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                match reply {
                    Some(r) => {
                        let _ = s.write_all(r).await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn finds_ollama_and_openai_servers_and_ignores_garbage_hangs_and_closed_ports() {
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let root = format!("http://{}", fake.addr());
    let garbage = raw_server(Some(
        b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\nhello world",
    ))
    .await;
    let not_a_list = raw_server(Some(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 13\r\n\r\n{\"data\": 42}",
    ))
    .await;
    let hangs = raw_server(None).await;
    // a port that was free a moment ago: nothing listens there
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let targets = vec![
        ("Ollama".to_owned(), root.clone(), Provider::Ollama),
        ("llama-server".to_owned(), root.clone(), Provider::Openai),
        ("garbage".to_owned(), garbage, Provider::Openai),
        ("not a list".to_owned(), not_a_list, Provider::Openai),
        ("hangs".to_owned(), hangs, Provider::Ollama),
        ("closed".to_owned(), closed, Provider::Openai),
    ];
    let started = Instant::now();
    let found = discover_at(&targets, Duration::from_millis(500)).await;
    let took = started.elapsed();
    let names: Vec<&str> = found.iter().map(|d| d.server.as_str()).collect();
    assert_eq!(names, ["Ollama", "llama-server"], "{found:?}");
    assert_eq!(found[0].base_url, root);
    assert_eq!(found[1].base_url, format!("{root}/v1"));
    assert!(!found[0].models.is_empty() && !found[1].models.is_empty());
    // the probes run at once, and the hanging one is cut off by the timeout
    assert!(took < Duration::from_secs(5), "discovery took {took:?}");
}

/// A server whose every answer is a redirect to `to` (another server's model list).
async fn redirecting_server(to: String) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let to = to.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let reply =
                    format!("HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\n\r\n");
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    // the redirect leads to a real model list: following it would report a server there
    let fake = FakeLlm::start(Mode::Normal).await.unwrap();
    let list = format!("http://{}/v1/models", fake.addr());
    let redirects = redirecting_server(list).await;
    let targets = vec![
        ("redirects".to_owned(), redirects, Provider::Openai),
        (
            "direct".to_owned(),
            format!("http://{}", fake.addr()),
            Provider::Openai,
        ),
    ];
    let found = discover_at(&targets, Duration::from_secs(5)).await;
    let names: Vec<&str> = found.iter().map(|d| d.server.as_str()).collect();
    assert_eq!(names, ["direct"], "{found:?}");
}

/// Bytes of the endless answer below.
const ENDLESS_BYTES: usize = 64 << 20;

#[tokio::test]
async fn a_huge_answer_is_cut_off_while_it_streams() {
    // A model list that goes on and on (64 MB, its length not declared: it ends when the
    // connection does): the probe stops reading at 1 MB and hangs up, so the server cannot
    // write the rest. The server counts what it could send.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (sent_tx, sent_rx) = tokio::sync::oneshot::channel::<usize>();
    tokio::spawn(async move {
        let Ok((mut s, _)) = l.accept().await else {
            return;
        };
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
        let mut sent = 0usize;
        if s.write_all(head.as_bytes()).await.is_ok() {
            // a list of models with an endless run of blanks in it
            let chunk = vec![b' '; 64 << 10];
            while sent < ENDLESS_BYTES {
                if s.write_all(&chunk).await.is_err() {
                    break;
                }
                sent += chunk.len();
            }
        }
        let _ = sent_tx.send(sent);
    });
    let targets = vec![(
        "endless".to_owned(),
        format!("http://{addr}"),
        Provider::Openai,
    )];
    let found = discover_at(&targets, Duration::from_secs(60)).await;
    assert!(found.is_empty(), "{found:?}");
    let sent = sent_rx.await.unwrap();
    // what the kernel buffers on loopback besides the 1 MB read is far less than 32 MB
    assert!(
        sent < 32 << 20,
        "the probe read {sent} bytes of an answer it cannot use"
    );
}
