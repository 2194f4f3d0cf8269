//! Chat: answers from memory with citations (rules in `kasten_core::chat`).
//!
//! 1. Small talk (greetings, thanks) is recognised by a word list and answered without
//!    retrieval; the answer says so (`retrieval: skipped`).
//! 2. Otherwise the question (with the previous one for short follow-ups) is retrieved
//!    with the default search: hybrid ranking plus link expansion. Where
//!    `retrieval.search_terms` says so, the LLM first writes the question's search terms
//!    (A-Mem's retrieval, [`kasten_core::search_terms`]) and the search runs on the
//!    question with them; a failed call costs the answer nothing (the question alone).
//! 3. Only notes that pass the relevance gate are shown to the LLM, numbered `[1]..[n]`.
//!    If none passes, the answer is "Not in memory." — decided by Kasten, without the LLM,
//!    so it is testable and costs nothing.
//! 4. The LLM's answer is streamed, then tidied ([`kasten_core::chat::tidy_answer`]: an
//!    opening that only names the source taken off, a loop cut); `[n]` citations are
//!    mapped back to the shown notes (numbers naming no shown note are dropped and
//!    counted).
//! 5. Shown notes are reinforced as retrieved, cited ones as cited.

use chrono::{DateTime, NaiveDate, Utc};
use kasten_core::chat::{
    AnswerForm, NOT_IN_MEMORY, ShownLink, ShownNote, ShownReplaced, Turn, answer_prompt_marked,
    citations, is_relevant, notes_the_answer_uses, repeats_itself, retrieval_query,
    says_not_in_memory, small_talk, term_match, tidy_answer,
};
use kasten_core::lifecycle::Reinforce;
use kasten_core::text::Tokenizer;
use kasten_core::{NoteId, Via};
use kasten_llm::{ChatRequest, Message, Role, Usage};
use serde::{Deserialize, Serialize};

use crate::{Engine, EngineError};

pub use kasten_core::chat::Turn as ChatTurn;

/// How [`Engine::ask_with`] retrieves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskOptions {
    /// Notes retrieved (before the relevance gate).
    pub k: usize,
    /// Cosine similarity at which a note counts as about the question.
    pub min_cosine: f32,
    /// Turns of history sent to the model.
    pub history_turns: usize,
    /// Answer as of this day: retrieval returns what was current then
    /// ([`Engine::search_as_of`]); `None` is today.
    #[serde(default)]
    pub as_of: Option<NaiveDate>,
}

impl Default for AskOptions {
    fn default() -> Self {
        Self {
            k: 8,
            min_cosine: 0.35,
            history_turns: 6,
            as_of: None,
        }
    }
}

/// A note that was shown to the model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnswerNote {
    /// Its number in the prompt (`[n]`).
    pub n: usize,
    pub id: NoteId,
    pub content: String,
    pub created_at: DateTime<Utc>,
    pub score: f32,
    pub cosine: f32,
    pub via: Vec<String>,
    pub cited: bool,
}

/// Whether the answer used retrieval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Retrieval {
    /// Retrieval ran: `candidates` notes came back, `shown` passed the relevance gate.
    Used { candidates: usize, shown: usize },
    /// The message needed no memory.
    Skipped { reason: String },
}

/// An answer from memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answer {
    pub answer: String,
    /// Ids of the cited notes, in order of first citation; always notes in `notes`.
    pub citations: Vec<NoteId>,
    /// The model cited no note: `citations` are the shown notes the answer's words come
    /// from ([`kasten_core::chat::notes_the_answer_uses`]), the answer has no `[n]`.
    #[serde(default)]
    pub citations_inferred: bool,
    /// The notes shown to the model, numbered as in the prompt.
    pub notes: Vec<AnswerNote>,
    /// The terms the LLM wrote for the question and the search ran with beside it
    /// (`retrieval.search_terms`); empty when none were asked for or none came back.
    #[serde(default)]
    pub search_terms: Vec<String>,
    pub not_in_memory: bool,
    pub retrieval: Retrieval,
    /// `[n]` in the answer that named no shown note (dropped).
    pub invalid_citations: usize,
    pub model: Option<String>,
    pub usage: Option<Usage>,
}

impl Answer {
    /// The notes the answer cites, in order of first citation (each with its `[n]`): the
    /// citations, not every note shown to the model.
    pub fn cited_notes(&self) -> Vec<&AnswerNote> {
        self.citations
            .iter()
            .filter_map(|id| self.notes.iter().find(|n| &n.id == id))
            .collect()
    }
}

const SMALL_TALK_SYSTEM: &str = "You are Kasten, the user's note assistant. The user is making \
small talk; reply in one short, friendly sentence and offer to answer questions about their \
notes. Do not invent facts about the user.";
const SMALL_TALK_OFFLINE: &str = "Hello! Ask me anything about your notes.";

fn to_messages(prompt: Vec<kasten_core::prompts::PromptMessage>) -> Vec<Message> {
    prompt
        .into_iter()
        .map(|m| Message {
            role: match m.role {
                "system" => Role::System,
                "assistant" => Role::Assistant,
                _ => Role::User,
            },
            content: m.content,
        })
        .collect()
}

impl Engine {
    /// [`Engine::ask_with`] with the default options.
    pub async fn ask(
        &self,
        question: &str,
        history: &[Turn],
        on_token: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Answer, EngineError> {
        self.ask_with(question, history, &AskOptions::default(), on_token)
            .await
    }

    /// Answers `question` from memory (see the module docs), streaming the answer's text
    /// to `on_token`.
    pub async fn ask_with(
        &self,
        question: &str,
        history: &[Turn],
        options: &AskOptions,
        on_token: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Answer, EngineError> {
        let question = question.trim();
        if question.is_empty() {
            return Err(EngineError::EmptyQuery);
        }
        let history = &history[history.len().saturating_sub(options.history_turns)..];
        if let Some(reason) = small_talk(question) {
            return self.small_talk(question, history, reason, on_token).await;
        }

        let query = retrieval_query(question, history);
        let k = options.k.max(1);
        let mut found = self.search_question(&query, k, options.as_of).await?;
        let qv = self.embed_query(&query).await?;
        let mut judged = self.judge(&found.hits, &qv, &query)?;
        // The LLM's terms widen the search only, and only for a question the memory is
        // about: which notes are shown is still decided by the question's own words and
        // meaning (the relevance gate below), and a question no note is about is "Not in
        // memory." without calling the model.
        let about = judged
            .iter()
            .any(|(cosine, terms)| is_relevant(*cosine, terms.share(), options.min_cosine));
        let (terms, terms_usage) = if about && self.uses_search_terms() {
            self.question_terms(&query).await?
        } else {
            (Vec::new(), None)
        };
        if !terms.is_empty() {
            let searched = kasten_core::search_terms::with_question(&query, &terms);
            found = self.search_question(&searched, k, options.as_of).await?;
            judged = self.judge(&found.hits, &qv, &query)?;
        }
        let candidates = found.hits.len();
        let mut shown: Vec<AnswerNote> = Vec::new();
        let mut prompt_notes: Vec<ShownNote> = Vec::new();
        // what replaced each shown note, if anything did
        let mut replaced_by: Vec<Option<crate::SupersededBy>> = Vec::new();
        // which of the question's terms each shown note holds, and how it was found
        let mut matched: Vec<kasten_core::chat::TermMatch> = Vec::new();
        let mut vias: Vec<Vec<Via>> = Vec::new();
        for (h, (cosine, terms)) in found.hits.into_iter().zip(judged) {
            // a note reached through a link from a relevant note, or the next note of
            // the chain the question leads through, comes along with it
            let linked = h
                .via
                .iter()
                .any(|v| matches!(v, Via::Link { .. } | Via::Chain { .. }));
            if is_relevant(cosine, terms.share(), options.min_cosine)
                || (linked && !shown.is_empty())
            {
                prompt_notes.push(ShownNote {
                    // in words, as the relative dates' readings are: a model copies
                    // the form it is shown ("on 2023-01-29" against "29 January 2023")
                    time: kasten_core::relative::time_in_words(h.note.created_at),
                    // "last week" read against the note's day: the model can give a date
                    content: kasten_core::relative::with_dates_resolved(
                        &h.note.content,
                        h.note.created_at.date_naive(),
                    ),
                    context: h.note.context.clone(),
                    keywords: h.note.keywords.clone(),
                });
                replaced_by.push(h.superseded_by.clone());
                matched.push(terms);
                vias.push(h.via.clone());
                shown.push(AnswerNote {
                    n: shown.len() + 1,
                    id: h.note.id.clone(),
                    content: h.note.content.clone(),
                    created_at: h.note.created_at,
                    score: h.score,
                    cosine,
                    via: h.via.iter().map(Via::label).collect(),
                    cited: false,
                });
            }
        }
        if shown.is_empty() {
            on_token(NOT_IN_MEMORY);
            return Ok(Answer {
                answer: NOT_IN_MEMORY.to_owned(),
                citations: Vec::new(),
                citations_inferred: false,
                notes: Vec::new(),
                search_terms: terms,
                not_in_memory: true,
                retrieval: Retrieval::Used {
                    candidates,
                    shown: 0,
                },
                invalid_citations: 0,
                model: None,
                usage: terms_usage,
            });
        }

        let llm = self.llm_client().ok_or(EngineError::NoLlm)?;
        let links = self.links_among(&shown).await?;
        // a replaced note is marked with what replaced it, by its number when shown too
        let replaced: Vec<Option<ShownReplaced>> = replaced_by
            .iter()
            .map(|r| {
                r.as_ref().map(|s| ShownReplaced {
                    by: shown.iter().find(|n| n.id == s.id).map(|n| n.n),
                    since: s.since.format("%Y-%m-%d").to_string(),
                    reason: s.reason.clone(),
                })
            })
            .collect();
        // A small model always quotes a current note; a model that answers in its own words
        // quotes too when a shown note was replaced: which value is current is the memory's
        // knowledge, and a model left free answers from its own (the real world's value) or
        // declines. Only the built-in model is held to the quote (servers ignore grammars).
        let quote = self.pipeline.profile.guided()
            || (replaced.iter().any(Option::is_some) && llm.local().is_some());
        let as_of = options.as_of.map(|d| d.format("%Y-%m-%d").to_string());
        let req = ChatRequest {
            messages: to_messages(answer_prompt_marked(
                // a model held to a quote cites by its grammar; one left free answers
                // with a phrase, and what it used is read back from its words
                if quote {
                    AnswerForm::Cited
                } else {
                    AnswerForm::Phrase
                },
                &prompt_notes,
                &replaced,
                &links,
                history,
                question,
                as_of.as_deref(),
            )),
            temperature: 0.0,
            max_tokens: Some(if quote { 120 } else { 600 }),
            // the current note quoted is chosen by kasten_core::chat::what_to_quote
            grammar: quote.then(|| {
                let current: Vec<bool> = (0..prompt_notes.len())
                    .map(|i| replaced.get(i).is_none_or(Option::is_none))
                    .collect();
                // the end of the chain: reached from a hit, no shown note reached from it
                let chain_end: Vec<bool> = shown
                    .iter()
                    .zip(&vias)
                    .map(|(n, via)| {
                        via.iter().any(|v| matches!(v, Via::Chain { .. }))
                            && !vias
                                .iter()
                                .flatten()
                                .any(|v| matches!(v, Via::Chain { from } if *from == n.id))
                    })
                    .collect();
                let (quote, may_decline) =
                    kasten_core::chat::what_to_quote(&current, &matched, &chain_end);
                let quotable: Vec<(usize, &str)> = quote
                    .iter()
                    .filter_map(|i| prompt_notes.get(*i).map(|n| (i + 1, n.content.as_str())))
                    .collect();
                kasten_core::chat::quoted_answer_grammar(&quotable, prompt_notes.len(), may_decline)
            }),
        };
        // A model that begins to repeat itself (the same line again, as a small one may
        // until its token limit: a minute of it) is stopped there: the call is dropped, which
        // ends the generation, and the answer is what was streamed.
        let streamed = std::sync::Mutex::new(String::new());
        let looping = tokio::sync::Notify::new();
        let mut sink = |t: &str| {
            on_token(t);
            if let Ok(mut s) = streamed.lock() {
                s.push_str(t);
                if t.contains([' ', '\n']) && repeats_itself(&s) {
                    looping.notify_one();
                }
            }
        };
        let resp = tokio::select! {
            r = self.unless_closing(llm.chat_stream(&req, &mut sink)) => {
                r?.map_err(|e| EngineError::Llm(e.to_string()))?
            }
            () = looping.notified() => {
                let text = streamed.lock().map(|s| s.clone()).unwrap_or_default();
                kasten_llm::ChatResponse {
                    usage: Usage::estimated(&req.messages, &text),
                    text,
                    model: llm.config().model.clone(),
                }
            }
        };
        // what was streamed, as a person reads it: no opening that only names the source,
        // no loop (the final text replaces the streamed one)
        let text = tidy_answer(&resp.text);
        let not_in_memory = says_not_in_memory(&text);
        let (mut numbers, invalid) = if not_in_memory {
            (Vec::new(), 0)
        } else {
            citations(&text, shown.len())
        };
        // an answer that cites nothing is read back to the notes holding its words, each
        // as the model saw it: its text and its time
        let mut citations_inferred = false;
        if numbers.is_empty() && !not_in_memory {
            let seen: Vec<String> = prompt_notes
                .iter()
                .map(|p| format!("{} {}", p.content, p.time))
                .collect();
            numbers = notes_the_answer_uses(&Tokenizer::default(), &text, question, &seen);
            citations_inferred = !numbers.is_empty();
        }
        for n in &numbers {
            if let Some(s) = shown.get_mut(n - 1) {
                s.cited = true;
            }
        }
        let cited: Vec<NoteId> = numbers
            .iter()
            .filter_map(|n| shown.get(n - 1).map(|s| s.id.clone()))
            .collect();
        let retrieved: Vec<NoteId> = shown
            .iter()
            .filter(|s| !s.cited)
            .map(|s| s.id.clone())
            .collect();
        if self.reinforce_on() != crate::lifecycle::ReinforceOn::Off {
            self.reinforce_quietly(&retrieved, Reinforce::Retrieved)
                .await;
            self.reinforce_quietly(&cited, Reinforce::Cited).await;
        }
        let shown_count = shown.len();
        // the answer's tokens include the call that wrote its search terms
        let mut usage = resp.usage;
        if let Some(u) = &terms_usage {
            usage.add(u);
        }
        Ok(Answer {
            answer: text,
            citations: cited,
            citations_inferred,
            notes: shown,
            search_terms: terms,
            not_in_memory,
            retrieval: Retrieval::Used {
                candidates,
                shown: shown_count,
            },
            invalid_citations: invalid,
            model: Some(resp.model),
            usage: Some(usage),
        })
    }

    /// Each hit's cosine similarity to the question's vector and the question's terms it
    /// holds: what the relevance gate judges it by.
    fn judge(
        &self,
        hits: &[crate::SearchHit],
        qv: &[f32],
        query: &str,
    ) -> Result<Vec<(f32, kasten_core::chat::TermMatch)>, EngineError> {
        // the tokenizer (its stemmer) is not Send: it must not live across an await
        let tokenizer = Tokenizer::default();
        let ix = self.read_indexes()?;
        hits.iter()
            .map(|h| {
                let cosine = ix
                    .vector
                    .get(&h.note.id)?
                    .map(|v| qv.iter().zip(v.iter()).map(|(a, b)| a * b).sum::<f32>())
                    .unwrap_or(0.0);
                Ok((cosine, term_match(&tokenizer, query, &h.note.index_text())))
            })
            .collect()
    }

    /// The search terms the LLM in use writes for `question`
    /// ([`kasten_core::search_terms`]), with the call's tokens. A model that answers
    /// without usable terms, or fails, leaves the search to the question alone (logged):
    /// the answer never fails for want of terms. Only a closing engine is an error.
    pub async fn question_terms(
        &self,
        question: &str,
    ) -> Result<(Vec<String>, Option<Usage>), EngineError> {
        use kasten_core::search_terms;
        let Some(llm) = self.llm_client() else {
            return Ok((Vec::new(), None));
        };
        let req = kasten_llm::StructuredRequest {
            messages: to_messages(search_terms::prompt(question)),
            schema_name: search_terms::SCHEMA_NAME.to_owned(),
            schema: search_terms::schema(),
            temperature: 0.0,
            max_tokens: Some(search_terms::MAX_TOKENS),
        };
        let valid = |v: &serde_json::Value| {
            search_terms::parse(v)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        match self.unless_closing(llm.structured(&req, &valid)).await? {
            Ok(r) => Ok((
                search_terms::parse(&r.value).unwrap_or_default(),
                Some(r.usage),
            )),
            Err(e) => {
                tracing::warn!(error = %e, "no search terms from the LLM; searching the question alone");
                Ok((Vec::new(), None))
            }
        }
    }

    /// The accepted links between the shown notes, by the notes' numbers in the prompt,
    /// the most confident first.
    async fn links_among(&self, shown: &[AnswerNote]) -> Result<Vec<ShownLink>, EngineError> {
        let number: std::collections::HashMap<&NoteId, usize> =
            shown.iter().map(|n| (&n.id, n.n)).collect();
        let mut seen = std::collections::HashSet::new();
        let mut found: Vec<(f64, ShownLink)> = Vec::new();
        for n in shown {
            for l in self.store.links_of(&n.id).await? {
                if l.status != kasten_core::LinkStatus::Accepted {
                    continue;
                }
                let (Some(&from), Some(&to)) = (number.get(&l.from), number.get(&l.to)) else {
                    continue;
                };
                if seen.insert((from, to, l.kind.clone())) {
                    found.push((
                        l.confidence,
                        ShownLink {
                            from,
                            to,
                            kind: l.kind.to_string(),
                            reason: l.reason,
                        },
                    ));
                }
            }
        }
        found.sort_by(|a, b| b.0.total_cmp(&a.0));
        Ok(found.into_iter().map(|(_, l)| l).collect())
    }

    async fn small_talk(
        &self,
        question: &str,
        history: &[Turn],
        reason: &str,
        on_token: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Answer, EngineError> {
        let skipped = Retrieval::Skipped {
            reason: reason.to_owned(),
        };
        let Some(llm) = self.llm_client() else {
            on_token(SMALL_TALK_OFFLINE);
            return Ok(Answer {
                answer: SMALL_TALK_OFFLINE.to_owned(),
                citations: Vec::new(),
                citations_inferred: false,
                notes: Vec::new(),
                search_terms: Vec::new(),
                not_in_memory: false,
                retrieval: skipped,
                invalid_citations: 0,
                model: None,
                usage: None,
            });
        };
        let mut messages = vec![Message::system(SMALL_TALK_SYSTEM)];
        for t in history {
            messages.push(if t.role == "assistant" {
                Message::assistant(t.content.clone())
            } else {
                Message::user(t.content.clone())
            });
        }
        messages.push(Message::user(question));
        let req = ChatRequest {
            messages,
            temperature: 0.3,
            max_tokens: Some(80),
            grammar: None,
        };
        let mut sink = |t: &str| on_token(t);
        let resp = self
            .unless_closing(llm.chat_stream(&req, &mut sink))
            .await?
            .map_err(|e| EngineError::Llm(e.to_string()))?;
        Ok(Answer {
            answer: resp.text,
            citations: Vec::new(),
            citations_inferred: false,
            notes: Vec::new(),
            search_terms: Vec::new(),
            not_in_memory: false,
            retrieval: skipped,
            invalid_citations: 0,
            model: Some(resp.model),
            usage: Some(resp.usage),
        })
    }

    /// The stored turns of a chat session (for `kasten ask --session`), oldest first.
    pub async fn chat_history(
        &self,
        session: &str,
        turns: usize,
    ) -> Result<Vec<Turn>, EngineError> {
        Ok(self
            .store
            .chat_history(session, turns)
            .await?
            .into_iter()
            .map(|r| Turn {
                role: r.role,
                content: r.content,
            })
            .collect())
    }

    /// Appends a question and its answer to a chat session.
    pub async fn record_chat(
        &self,
        session: &str,
        question: &str,
        answer: &Answer,
    ) -> Result<(), EngineError> {
        let now = Utc::now();
        let turns = [
            kasten_store::ChatRecord {
                role: "user".into(),
                content: question.to_owned(),
                citations: Vec::new(),
                at: now,
            },
            kasten_store::ChatRecord {
                role: "assistant".into(),
                content: answer.answer.clone(),
                citations: answer.citations.iter().map(ToString::to_string).collect(),
                at: now + chrono::Duration::milliseconds(1),
            },
        ];
        Ok(self.store.append_chat(session, &turns).await?)
    }

    pub async fn clear_chat(&self, session: &str) -> Result<(), EngineError> {
        Ok(self.store.clear_chat(session).await?)
    }
}

#[cfg(test)]
mod cited_tests {
    use super::*;

    fn shown(n: usize) -> AnswerNote {
        AnswerNote {
            n,
            id: NoteId::generate(),
            content: format!("note {n}"),
            created_at: Utc::now(),
            score: 0.5,
            cosine: 0.5,
            via: vec!["vector".into()],
            cited: false,
        }
    }

    #[test]
    fn cited_notes_are_the_citations_in_their_order_not_every_note_shown() {
        let notes: Vec<AnswerNote> = (1..=4).map(shown).collect();
        let a = Answer {
            answer: "Yes [3], and also [1].".into(),
            citations: vec![notes[2].id.clone(), notes[0].id.clone()],
            citations_inferred: false,
            notes,
            search_terms: Vec::new(),
            not_in_memory: false,
            retrieval: Retrieval::Used {
                candidates: 4,
                shown: 4,
            },
            invalid_citations: 0,
            model: None,
            usage: None,
        };
        let cited: Vec<usize> = a.cited_notes().iter().map(|n| n.n).collect();
        assert_eq!(cited, vec![3, 1]);
    }
}

#[cfg(test)]
mod prompt_tests {
    use kasten_core::NewNote;

    use crate::PipelineOptions;
    use crate::tests::{HashEmbedder, engine_with_fake_and};

    async fn fake_and_engine() -> (kasten_fakellm::FakeLlm, crate::Engine) {
        let fake = kasten_fakellm::FakeLlm::start(kasten_fakellm::Mode::Normal)
            .await
            .unwrap();
        let workers = PipelineOptions::default().workers;
        let e = engine_with_fake_and(&fake, workers, HashEmbedder::arc("h", 128, 3)).await;
        (fake, e)
    }

    #[tokio::test]
    async fn a_notes_relative_dates_reach_the_model_read_against_its_day_and_stay_as_written() {
        let (fake, e) = fake_and_engine().await;
        let text = "Jon started going to the gym last week.";
        let at = "2023-03-16T13:56:00Z".parse().ok();
        let id = e.add(NewNote::new(text).unwrap().at(at)).await.unwrap().id;
        let a = e
            .ask("When did Jon start going to the gym?", &[], &|_| {})
            .await
            .unwrap();
        assert!(a.notes.iter().any(|n| n.id == id), "{a:?}");
        let body = fake
            .requests()
            .iter()
            .map(|r| r.body.to_string())
            .rfind(|b| b.contains("Question: When did Jon"))
            .unwrap();
        assert!(
            body.contains("gym last week (the week before 16 March 2023)."),
            "{body}"
        );
        // the note's time in words too, the form the answer should give a date in
        assert!(
            body.contains("(16 March 2023, 13:56) <<<Jon started"),
            "{body}"
        );
        // what the person sees and what is stored are the note as written
        let shown = a.notes.iter().find(|n| n.id == id).unwrap();
        assert_eq!(shown.content, text);
        assert_eq!(e.get(&id).await.unwrap().note.content, text);
        e.close().await;
    }

    /// A model that forgets to cite: the answer is read back to the note its words come
    /// from, and says so; an answer that cites keeps the model's citations.
    #[tokio::test]
    async fn an_answer_without_citations_is_read_back_to_the_note_its_words_come_from() {
        let (fake, e) = fake_and_engine().await;
        let banker = e
            .add(NewNote::new("Jon lost his job as a banker, so he opens a dance studio.").unwrap())
            .await
            .unwrap()
            .id;
        let gym = e
            .add(NewNote::new("Jon lost his gym membership card again.").unwrap())
            .await
            .unwrap()
            .id;
        let question = "What did Jon do after he lost his job?";
        fake.set_responder(|v| {
            v.last_user()
                .contains("Question: What did Jon do")
                .then(|| "In the notes, Jon opens a dance studio.".to_owned())
        });
        let a = e.ask(question, &[], &|_| {}).await.unwrap();
        assert!(a.notes.iter().any(|n| n.id == gym), "{a:?}");
        assert!(a.citations_inferred, "{a:?}");
        assert_eq!(a.citations, vec![banker.clone()]);
        assert!(a.notes.iter().all(|n| n.cited == (n.id == banker)), "{a:?}");
        // the opening that only names the source is taken off
        assert_eq!(a.answer, "Jon opens a dance studio.");

        // the model's own citation stands, even where the words say otherwise
        let gym_n = a.notes.iter().find(|n| n.id == gym).unwrap().n;
        fake.set_responder(move |v| {
            v.last_user()
                .contains("Question: What did Jon do")
                .then(|| format!("Jon opens a dance studio [{gym_n}]."))
        });
        let a = e.ask(question, &[], &|_| {}).await.unwrap();
        assert!(!a.citations_inferred, "{a:?}");
        assert_eq!(a.citations, vec![gym]);
        e.close().await;
    }

    /// A model that loops (the same line again until its token limit) is cut before the
    /// first repeat, and an opening naming its source moves its citation to the claim.
    #[tokio::test]
    async fn an_answer_that_repeats_itself_is_cut_and_reads_as_a_claim() {
        let (fake, e) = fake_and_engine().await;
        let studio = e
            .add(NewNote::new("Jon wants a dance studio with great natural light.").unwrap())
            .await
            .unwrap()
            .id;
        fake.set_responder(|v| {
            v.last_user().contains("Question: What studio").then(|| {
                format!(
                    "In [1], Jon wants:\n- a room with great natural light{}",
                    "\n- a room with a display of a dress".repeat(400)
                )
            })
        });
        let pieces = std::sync::Mutex::new(String::new());
        let a = e
            .ask("What studio does Jon want?", &[], &|t| {
                if let Ok(mut p) = pieces.lock() {
                    p.push_str(t);
                }
            })
            .await
            .unwrap();
        assert_eq!(
            a.answer,
            "Jon wants [1]:\n- a room with great natural light\n- a room with a display of a dress"
        );
        assert_eq!(a.citations, vec![studio]);
        assert!(!a.citations_inferred, "{a:?}");
        // what was streamed began as the model wrote it (the final text replaces it)
        let streamed = pieces.lock().map(|p| p.clone()).unwrap_or_default();
        assert!(streamed.starts_with("In [1], Jon wants:"), "{streamed}");
        e.close().await;
    }

    /// `retrieval.search_terms`: auto (the default) asks for none; on, the LLM writes the
    /// question's search terms before the search, the answer says which and counts their
    /// tokens; a model that writes none still gets its answer; off, the model is asked
    /// only for the answer.
    #[tokio::test]
    async fn the_llm_writes_the_search_terms_the_answer_s_search_runs_with() {
        let (fake, e) = fake_and_engine().await;
        e.add(NewNote::new("Jon teaches dancing in his ballroom studio downtown.").unwrap())
            .await
            .unwrap();
        let question = "Where does Jon teach dancing?";
        let terms_asked = |fake: &kasten_fakellm::FakeLlm| {
            fake.requests()
                .iter()
                .filter(|r| r.body.to_string().contains("\"search_terms\""))
                .count()
        };
        fake.set_responder(|v| {
            (v.schema_name() == Some("search_terms"))
                .then(|| r#"{"keywords": ["ballroom studio", "dance class", "Jon"]}"#.to_owned())
        });
        // auto (the default) is off for every model: only the answer is asked for
        let a = e.ask(question, &[], &|_| {}).await.unwrap();
        assert_eq!(terms_asked(&fake), 0);
        assert!(a.search_terms.is_empty() && !a.notes.is_empty(), "{a:?}");
        e.set_setting_checked("retrieval.search_terms", "on")
            .await
            .unwrap();
        let a = e.ask(question, &[], &|_| {}).await.unwrap();
        assert_eq!(terms_asked(&fake), 1);
        assert_eq!(a.search_terms, ["ballroom studio", "dance class", "Jon"]);
        assert!(!a.notes.is_empty(), "{a:?}");
        let asked = fake
            .requests()
            .iter()
            .map(|r| r.body.to_string())
            .find(|b| b.contains("\"search_terms\""))
            .unwrap();
        assert!(
            asked.contains("Question: Where does Jon teach dancing?"),
            "{asked}"
        );
        let with_terms = a.usage.unwrap();

        // terms the answer cannot use cost the answer nothing
        fake.set_responder(|v| {
            (v.schema_name() == Some("search_terms")).then(|| "no keywords today".to_owned())
        });
        let a = e.ask(question, &[], &|_| {}).await.unwrap();
        assert!(a.search_terms.is_empty(), "{a:?}");
        assert!(!a.notes.is_empty(), "{a:?}");

        e.set_setting_checked("retrieval.search_terms", "off")
            .await
            .unwrap();
        let before = terms_asked(&fake);
        let a = e.ask(question, &[], &|_| {}).await.unwrap();
        assert_eq!(terms_asked(&fake), before);
        assert!(a.search_terms.is_empty() && !a.notes.is_empty(), "{a:?}");
        // the same note shown: the answer's tokens with terms are both calls'
        let answer_only = a.usage.unwrap();
        assert!(
            with_terms.prompt_tokens > answer_only.prompt_tokens,
            "{with_terms:?} {answer_only:?}"
        );
        e.close().await;
    }
}
