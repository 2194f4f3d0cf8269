//! Recall@k of each system for every question, and the answers with --answer.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use crate::locomo::{self, Category, Question, Sample};
use anyhow::{Context, Result, bail};
use kasten_core::fusion::{self, Via};
use kasten_core::{NoteId, search_terms};
use kasten_engine::{Engine, LlmClient, LlmConfig, SearchOptions};
use kasten_llm::{ChatRequest, Message};

use super::answers::{self, Answers, Given};
use super::model::*;

#[allow(clippy::too_many_arguments)]
pub(crate) async fn score_questions(
    engine: &Engine,
    sample: &Sample,
    k: usize,
    options: &SearchOptions,
    mode: &Mode,
    totals: &mut Totals,
    mut kept: Option<&mut Answers>,
    log: &dyn Fn(String),
) -> Result<()> {
    // Kasten's default search follows links or not as the memory's setting and LLM say
    let options = &SearchOptions {
        links: engine.follows_links(),
        ..options.clone()
    };
    totals.follows_links = Some(engine.follows_links());
    // note id → turn id, for the rankings that return ids without reading notes
    let count = engine.count().await? as usize;
    let all = engine.list(count, 0).await?;
    let dia_of: HashMap<String, String> = all
        .iter()
        .filter_map(|n| {
            let src = n.source.as_deref()?;
            Some((n.id.to_string(), sample.dia_id_of(src)?.to_owned()))
        })
        .collect();
    let to_dia = |ids: Vec<String>| -> Vec<String> {
        ids.into_iter()
            .map(|id| dia_of.get(&id).cloned().unwrap_or(id))
            .collect()
    };
    let turns: HashSet<&str> = sample.turns().map(|(_, t)| t.dia_id.as_str()).collect();
    // the Boxes, for the Box-signal variant (computed once if the memory has none)
    if engine.boxes().await?.is_empty() {
        engine.recompute_boxes().await?;
    }
    let box_of: HashMap<kasten_core::NoteId, usize> = engine
        .boxes()
        .await?
        .into_iter()
        .enumerate()
        .flat_map(|(i, b)| b.members.into_iter().map(move |m| (m, i)))
        .collect();
    let client = if mode.answer || mode.search_terms {
        match engine.llm_client() {
            Some(c) => Some(c.clone()),
            None => bail!("{}", LlmConfig::missing_reason()),
        }
    } else {
        None
    };
    let mut scored = 0usize;
    for (index, q) in sample.questions.iter().enumerate() {
        let known: Vec<String> = q
            .evidence
            .iter()
            .filter(|e| turns.contains(e.as_str()))
            .cloned()
            .collect();
        totals.unknown_evidence += q.evidence.len() - known.len();
        let adversarial = q.category == Category::Adversarial;
        if adversarial {
            totals.adversarial += 1;
        } else if known.is_empty() {
            totals.skipped_no_evidence += 1;
        }
        let score_retrieval = !adversarial && !known.is_empty();
        if !score_retrieval && !mode.answer {
            continue;
        }

        let t0 = Instant::now();
        let out = engine.search_with(&q.question, k, options).await?;
        totals.search_latency.push(t0.elapsed());
        totals.context_chars.push(
            out.hits
                .iter()
                .map(|h| h.note.content.chars().count())
                .sum(),
        );
        let answer = match (client.as_ref().filter(|_| mode.answer), mode.answer_with) {
            (Some(_), AnswerWith::Ask) => {
                Some(ask_question(engine, q, &known, &to_dia, totals).await?)
            }
            (Some(c), AnswerWith::Amem) => Some(
                answer_question(c, q, index, &out.hits, totals, kept.as_deref_mut(), log).await?,
            ),
            (None, _) => None,
        };
        let mut retrieved: HashMap<System, Vec<String>> = HashMap::new();
        retrieved.insert(
            System::Kasten,
            to_dia(out.hits.iter().map(|h| h.note.id.to_string()).collect()),
        );
        let mut recall = HashMap::new();
        let mut search_terms = None;
        if score_retrieval && mode.search_terms && client.is_some() {
            let kasten = retrieved.get(&System::Kasten).cloned().unwrap_or_default();
            let terms = question_terms(engine, &q.question, totals).await?;
            search_terms = Some(terms.clone().unwrap_or_default());
            // no usable terms: the search a user gets is the question's alone
            let (with, alone, fused) = match terms {
                Some(terms) => {
                    let with = search_terms::with_question(&q.question, &terms);
                    let with = engine.search_with(&with, k, options).await?.hits;
                    let alone = engine
                        .search_with(&terms.join(", "), k, options)
                        .await?
                        .hits;
                    let ranked = |hits: &[kasten_engine::SearchHit]| -> Vec<(NoteId, f32)> {
                        hits.iter().map(|h| (h.note.id.clone(), h.score)).collect()
                    };
                    let (question, terms_alone) = (ranked(&out.hits), ranked(&alone));
                    // equal weights; the `Via`s only tell the two lists apart
                    let fused = fusion::rrf(
                        &[
                            (Via::Vector, 1.0, question.as_slice()),
                            (Via::Keyword, 1.0, terms_alone.as_slice()),
                        ],
                        k,
                    );
                    let ids = |hits: Vec<kasten_engine::SearchHit>| {
                        to_dia(hits.into_iter().map(|h| h.note.id.to_string()).collect())
                    };
                    (
                        ids(with),
                        ids(alone),
                        to_dia(fused.into_iter().map(|h| h.id.to_string()).collect()),
                    )
                }
                None => (kasten.clone(), kasten.clone(), kasten),
            };
            retrieved.insert(System::WithTerms, with);
            retrieved.insert(System::TermsOnly, alone);
            retrieved.insert(System::FusedTerms, fused);
        }
        if score_retrieval {
            let qv = engine.embed_query(&q.question).await?;
            let ids = |v: Vec<(kasten_core::NoteId, f32)>| -> Vec<String> {
                v.into_iter().map(|(id, _)| id.to_string()).collect()
            };
            retrieved.insert(System::Dense, to_dia(ids(engine.rank_vector(&qv, k)?)));
            retrieved.insert(
                System::Bm25,
                to_dia(ids(engine.rank_keyword(&q.question, k)?)),
            );
            let rrf = engine.rank_hybrid(&q.question, &qv, k)?;
            retrieved.insert(
                System::Rrf,
                to_dia(rrf.into_iter().map(|h| h.id.to_string()).collect()),
            );
            let ablations = [
                (System::FusionOnly, SearchOptions::fusion_only()),
                (
                    System::NoContext,
                    SearchOptions {
                        context_weight: 0.0,
                        ..options.clone()
                    },
                ),
                (
                    System::NoDates,
                    SearchOptions {
                        date_weight: 0.0,
                        ..options.clone()
                    },
                ),
                (
                    System::NoLinks,
                    SearchOptions {
                        links: false,
                        ..options.clone()
                    },
                ),
                (
                    System::WithLinks,
                    SearchOptions {
                        links: true,
                        ..options.clone()
                    },
                ),
                (
                    System::TwoHops,
                    SearchOptions {
                        links: true,
                        link_hops: 2,
                        ..options.clone()
                    },
                ),
            ];
            {
                let mut pool = engine.rank_expanded(&q.question, &qv, 3 * k, options)?;
                let top: HashSet<usize> = pool
                    .iter()
                    .take(3)
                    .filter_map(|h| box_of.get(&h.id).copied())
                    .collect();
                for h in &mut pool {
                    if box_of.get(&h.id).is_some_and(|b| top.contains(b)) {
                        h.score *= 1.0 + BOX_BOOST;
                    }
                }
                pool.sort_by(|a, b| b.score.total_cmp(&a.score));
                pool.truncate(k);
                retrieved.insert(
                    System::BoxBoost,
                    to_dia(pool.into_iter().map(|h| h.id.to_string()).collect()),
                );
            }
            for (sys, opts) in ablations {
                let hits = engine.rank_expanded(&q.question, &qv, k, &opts)?;
                retrieved.insert(
                    sys,
                    to_dia(hits.into_iter().map(|h| h.id.to_string()).collect()),
                );
            }
            let chained = SearchOptions {
                chain: true,
                ..options.clone()
            };
            let hits = engine.search_with(&q.question, k, &chained).await?.hits;
            retrieved.insert(
                System::Chain,
                to_dia(hits.into_iter().map(|h| h.note.id.to_string()).collect()),
            );
            if mode.held_out {
                if totals
                    .grid
                    .last()
                    .is_none_or(|(id, _)| *id != sample.sample_id)
                {
                    totals
                        .grid
                        .push((sample.sample_id.clone(), vec![Vec::new(); GRID.len()]));
                }
                for (i, &(v, c, d)) in GRID.iter().enumerate() {
                    let opts = SearchOptions {
                        vector_weight: v,
                        context_weight: c,
                        date_weight: d,
                        ..options.clone()
                    };
                    let hits = engine.rank_expanded(&q.question, &qv, k, &opts)?;
                    let got = to_dia(hits.into_iter().map(|h| h.id.to_string()).collect());
                    let r = locomo::recall_at_k(&known, &got, k).unwrap_or(0.0);
                    if let Some((_, per)) = totals.grid.last_mut() {
                        per[i].push(r);
                    }
                }
            }
            for (sys, got) in &retrieved {
                let r = locomo::recall_at_k(&known, got, k).unwrap_or(0.0);
                totals.recall.entry(*sys).or_default().add(q.category, r);
                recall.insert(*sys, r);
            }
            scored += 1;
        }
        if let Some(a) = &answer {
            totals.f1.add(q.category, a.f1);
            totals.bleu1.add(q.category, a.bleu1);
            totals.locomo_f1.add(q.category, a.locomo_f1);
        }
        totals.results.push(QuestionResult {
            sample: sample.sample_id.clone(),
            question: q.question.clone(),
            category: q.category,
            evidence: known,
            retrieved,
            recall,
            answer,
            search_terms,
        });
    }
    log(format!(
        "{}: {scored} questions scored for retrieval{}",
        sample.sample_id,
        if mode.answer {
            ", every question answered"
        } else {
            ""
        }
    ));
    Ok(())
}

/// Answers with Kasten's `ask` (nothing kept: asked afresh), scores the answer without its
/// citations ("Not in memory." read as LoCoMo's "not mentioned") and tallies what it cites:
/// `known` are the question's evidence turns, `to_dia` turns note ids into turns.
pub(crate) async fn ask_question(
    engine: &Engine,
    q: &Question,
    known: &[String],
    to_dia: &dyn Fn(Vec<String>) -> Vec<String>,
    totals: &mut Totals,
) -> Result<Answered> {
    let t = std::time::Instant::now();
    let a = engine
        .ask_with(
            &q.question,
            &[],
            &kasten_engine::AskOptions::default(),
            &|_| {},
        )
        .await
        .context("ask could not answer")?;
    totals.answer_latency.push(t.elapsed());
    if let Some(u) = &a.usage {
        totals.query_tokens.0 += u64::from(u.prompt_tokens);
        totals.query_tokens.1 += u64::from(u.completion_tokens);
        totals.query_tokens_estimated |= u.estimated;
    }
    let cited = to_dia(a.citations.iter().map(ToString::to_string).collect());
    let tally = &mut totals.ask;
    tally.shown += a.notes.len();
    tally.invalid_citations += a.invalid_citations;
    if q.category == Category::Adversarial {
        tally.adversarial += 1;
        tally.adversarial_declined += usize::from(a.not_in_memory);
    } else {
        tally.answerable += 1;
        tally.answerable_declined += usize::from(a.not_in_memory);
        tally.answerable_citing += usize::from(!cited.is_empty());
        tally.answerable_inferred += usize::from(a.citations_inferred);
        if !known.is_empty() {
            tally.with_evidence += 1;
            let hits = cited.iter().filter(|c| known.contains(c)).count();
            tally.cited += cited.len();
            tally.cited_evidence += hits;
            tally.evidence_cited += usize::from(hits > 0);
            if a.citations_inferred {
                tally.inferred += cited.len();
                tally.inferred_evidence += hits;
            }
        }
    }
    let prediction = a.answer.trim().to_owned();
    let scored = if a.not_in_memory {
        locomo::NOT_MENTIONED.to_owned()
    } else {
        kasten_core::chat::without_citations(&prediction)
    };
    Ok(scored_answer(q, &scored, prediction, cited))
}

/// An answer scored against the question's gold answer (LoCoMo's "not mentioned" for an
/// adversarial question): `scored` is what the metrics read, `prediction` the answer as
/// given.
fn scored_answer(q: &Question, scored: &str, prediction: String, cited: Vec<String>) -> Answered {
    let gold = match q.category {
        Category::Adversarial => locomo::NOT_MENTIONED.to_owned(),
        _ => q.answer.clone().unwrap_or_default(),
    };
    Answered {
        f1: locomo::token_f1(scored, &gold),
        bleu1: locomo::bleu1(scored, &gold),
        locomo_f1: locomo::locomo_f1(scored, &gold, q.category),
        prediction,
        cited,
    }
}

/// The search terms the LLM writes for `question` (what `ask` searches with,
/// [`Engine::question_terms`]), tallied; `None` when none came back.
async fn question_terms(
    engine: &Engine,
    question: &str,
    totals: &mut Totals,
) -> Result<Option<Vec<String>>> {
    let t0 = Instant::now();
    let (terms, usage) = engine.question_terms(question).await?;
    totals.terms.questions += 1;
    totals.terms.latency.push(t0.elapsed());
    if let Some(u) = usage {
        totals.terms.tokens.0 += u64::from(u.prompt_tokens);
        totals.terms.tokens.1 += u64::from(u.completion_tokens);
    }
    if terms.is_empty() {
        totals.terms.failed += 1;
        return Ok(None);
    }
    Ok(Some(terms))
}

/// Asks the LLM (or takes the answer it gave this request before, from `kept`) and scores
/// its answer against the gold one.
pub(crate) async fn answer_question(
    client: &LlmClient,
    q: &Question,
    index: usize,
    hits: &[kasten_engine::SearchHit],
    totals: &mut Totals,
    mut kept: Option<&mut Answers>,
    log: &dyn Fn(String),
) -> Result<Answered> {
    let notes: Vec<kasten_core::chat::ShownNote> = hits
        .iter()
        .map(|h| kasten_core::chat::ShownNote {
            time: h.note.created_at.format("%-d %B %Y").to_string(),
            content: h.note.content.clone(),
            context: h.note.context.clone(),
            keywords: h.note.keywords.clone(),
        })
        .collect();
    let prompt = locomo::answer_prompt(q, index, &notes);
    let req = ChatRequest {
        messages: vec![Message::system(prompt.system), Message::user(prompt.user)],
        temperature: 0.0,
        max_tokens: Some(64),
        grammar: None,
    };
    let key = answers::key(&req);
    let earlier = kept.as_deref_mut().and_then(|k| k.take(&key));
    let given = match earlier {
        Some(g) => g,
        None => {
            let t = std::time::Instant::now();
            let resp = client
                .chat(&req)
                .await
                .context("the LLM could not answer")?;
            let g = Given {
                key,
                text: resp.text,
                prompt_tokens: resp.usage.prompt_tokens,
                completion_tokens: resp.usage.completion_tokens,
                estimated: resp.usage.estimated,
                ms: t.elapsed().as_secs_f64() * 1e3,
            };
            if let Some(k) = kept {
                k.keep(g.clone(), log);
            }
            g
        }
    };
    totals
        .answer_latency
        .push(std::time::Duration::try_from_secs_f64(given.ms / 1e3).unwrap_or_default());
    totals.query_tokens.0 += u64::from(given.prompt_tokens);
    totals.query_tokens.1 += u64::from(given.completion_tokens);
    totals.query_tokens_estimated |= given.estimated;
    let prediction = given.text.trim().to_owned();
    Ok(scored_answer(
        q,
        &prediction.clone(),
        prediction,
        Vec::new(),
    ))
}
