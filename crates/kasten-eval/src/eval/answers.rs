//! The answers a checkpointed run has already been given, so answering resumes too.
//!
//! With a real model answering takes hours (a conversation's ~200 questions at tens of
//! seconds each on 2 cores), and a run is stopped for other work as often as its ingest.
//! Each answer is appended, as one JSON line, to `answers.jsonl` in the conversation's
//! checkpoint folder, keyed by a hash of everything the model was sent; a run that finds
//! the same request there takes the answer (its text, tokens and the time it took) instead
//! of asking again. Only runs with `--checkpoint` keep answers: a short run's latency
//! figures are always measured afresh.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use kasten_llm::ChatRequest;
use serde::{Deserialize, Serialize};

use crate::cache::fnv1a64;

pub(crate) const FILE: &str = "answers.jsonl";

/// One answer as the model gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Given {
    /// [`key`] of the request, as hex.
    pub(crate) key: String,
    pub(crate) text: String,
    pub(crate) prompt_tokens: u32,
    pub(crate) completion_tokens: u32,
    pub(crate) estimated: bool,
    /// How long the model took to answer, in milliseconds.
    pub(crate) ms: f64,
}

/// The answers kept for one conversation.
pub(crate) struct Answers {
    file: PathBuf,
    known: HashMap<String, Given>,
    /// The file ends in a torn line: the next answer starts on a line of its own.
    torn: bool,
    /// How many answers this run took from the file.
    pub(crate) reused: usize,
}

/// The key of a request: its messages, temperature and answer budget.
pub(crate) fn key(req: &ChatRequest) -> String {
    let mut bytes = Vec::new();
    for m in &req.messages {
        bytes.extend_from_slice(format!("{:?}", m.role).as_bytes());
        bytes.push(0);
        bytes.extend_from_slice(m.content.as_bytes());
        bytes.push(0);
    }
    bytes.extend_from_slice(format!("{}|{:?}", req.temperature, req.max_tokens).as_bytes());
    format!("{:016x}", fnv1a64(&bytes))
}

impl Answers {
    /// The answers kept in `dir`; `fresh` forgets them. A line that cannot be read (the
    /// last one of a run killed while writing it) is skipped: that question is asked again.
    pub(crate) fn open(dir: &Path, fresh: bool) -> Self {
        let file = dir.join(FILE);
        if fresh {
            let _ = std::fs::remove_file(&file);
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let torn = !text.is_empty() && !text.ends_with('\n');
        let known = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Given>(l).ok())
            .map(|g| (g.key.clone(), g))
            .collect();
        Self {
            file,
            known,
            torn,
            reused: 0,
        }
    }

    pub(crate) fn file(&self) -> &Path {
        &self.file
    }

    /// The answer already given to `key`, if any.
    pub(crate) fn take(&mut self, key: &str) -> Option<Given> {
        let g = self.known.get(key).cloned();
        if g.is_some() {
            self.reused += 1;
        }
        g
    }

    /// Keeps `given`. A failed write is said and costs only a question asked again.
    pub(crate) fn keep(&mut self, given: Given, log: &dyn Fn(String)) {
        let line = match serde_json::to_string(&given) {
            Ok(l) => l,
            Err(e) => return log(format!("cannot keep an answer: {e}")),
        };
        let written = self
            .file
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.file)?;
                // one write per line, so a kill leaves at most one torn last line
                let start = if self.torn { "\n" } else { "" };
                f.write_all(format!("{start}{line}\n").as_bytes())
            });
        match written {
            Ok(()) => self.torn = false,
            Err(e) => log(format!(
                "cannot keep an answer in {}: {e}",
                self.file.display()
            )),
        }
        self.known.insert(given.key.clone(), given);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kasten_llm::Message;

    fn req(user: &str) -> ChatRequest {
        ChatRequest {
            messages: vec![Message::system("answer briefly"), Message::user(user)],
            temperature: 0.0,
            max_tokens: Some(64),
            grammar: None,
        }
    }

    fn given(key: &str, text: &str) -> Given {
        Given {
            key: key.into(),
            text: text.into(),
            prompt_tokens: 100,
            completion_tokens: 7,
            estimated: false,
            ms: 1234.5,
        }
    }

    #[test]
    fn a_request_keys_by_what_the_model_is_sent() {
        assert_eq!(key(&req("When?")), key(&req("When?")));
        assert_ne!(key(&req("When?")), key(&req("Where?")));
        let mut longer = req("When?");
        longer.max_tokens = Some(128);
        assert_ne!(key(&req("When?")), key(&longer));
    }

    #[test]
    fn answers_kept_are_found_again_and_a_torn_line_is_asked_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Answers::open(dir.path(), false);
        assert!(a.take("k1").is_none());
        a.keep(given("k1", "7 May 2023"), &|m| panic!("{m}"));
        a.keep(given("k2", "Paris"), &|m| panic!("{m}"));
        // a run killed while writing its third answer
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(FILE))
            .unwrap();
        f.write_all(br#"{"key":"k3","text":"Lon"#).unwrap();
        drop(f);

        let mut again = Answers::open(dir.path(), false);
        assert_eq!(again.take("k1"), Some(given("k1", "7 May 2023")));
        assert_eq!(again.take("k2").map(|g| g.text), Some("Paris".to_owned()));
        assert!(again.take("k3").is_none());
        assert_eq!(again.reused, 2);
        // the torn line does not stop the next answer from being kept
        again.keep(given("k3", "London"), &|m| panic!("{m}"));
        let third = Answers::open(dir.path(), false).take("k3");
        assert_eq!(third.map(|g| g.text), Some("London".to_owned()));

        assert!(Answers::open(dir.path(), true).take("k1").is_none());
    }
}
