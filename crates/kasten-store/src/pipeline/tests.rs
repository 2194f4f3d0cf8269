//! The job queue and the apply of an enrichment: each job claimed once (also by
//! processes at once), applied once, stale neighbour updates held for review, accepted
//! links read a page at a time.

use crate::tests::{mem, note, write};
use crate::*;

fn enrichment(job: &JobId, note: &Note) -> Enrichment {
    Enrichment {
        job: job.clone(),
        note: note.id.clone(),
        read: crate::NoteRead::of(note),
        after: Fields {
            keywords: vec!["k".into()],
            tags: vec!["t".into()],
            context: "c".into(),
        },
        construction_changes: Vec::new(),
        embedding: vec![1.0, 0.0],
        construction_mode: ApplyMode::Apply,
        tier: None,
        embed_model: "m".into(),
        llm_model: "llm".into(),
        prompt_version: "v".into(),
        tokens_in: 10,
        tokens_out: 5,
        tokens_estimated: false,
        llm_calls: 1,
        unknown_handles: 0,
        dropped: 0,
        timings_ms: serde_json::json!({}),
        links: vec![],
        updates: vec![],
    }
}

#[tokio::test]
async fn the_queue_claims_each_job_once_and_apply_happens_once() -> Result<(), StoreError> {
    let s = mem().await;
    let a = note("a");
    let b = note("b");
    let (wa, wb) = (write(&a, vec![1.0, 0.0]), write(&b, vec![0.0, 1.0]));
    let job_a = wa.job.clone().unwrap();
    s.insert_notes(&[wa, wb]).await?;
    let until = Utc::now() + chrono::Duration::minutes(5);
    let first = s.claim_jobs("w1", 1, until).await?;
    let second = s.claim_jobs("w2", 5, until).await?;
    assert_eq!(first.len(), 1);
    assert_eq!(
        second.len(),
        1,
        "a running job with a live lease is not claimed again"
    );
    assert_ne!(first[0].id, second[0].id);
    assert!(s.claim_jobs("w3", 5, until).await?.is_empty());
    assert_eq!(first[0].attempts, 1);

    s.apply_enrichment(&enrichment(&job_a, &a)).await?;
    let n = s.get_note(&a.id).await?.unwrap();
    assert_eq!(n.enrich_state, EnrichState::Done);
    assert_eq!(n.keywords, vec!["k".to_owned()]);
    assert_eq!(n.version, 2);
    // the same job applied again is refused and changes nothing
    let again = enrichment(&job_a, &n);
    assert!(s.apply_enrichment(&again).await.is_err());
    assert_eq!(s.get_note(&a.id).await?.unwrap().version, 2);
    assert_eq!(s.events(10).await?.len(), 1);
    assert_eq!(s.revisions(Some(&a.id), 10).await?.len(), 1);

    // an expired lease makes the job claimable again; a restart requeues running jobs
    let past = Utc::now() - chrono::Duration::seconds(1);
    assert_eq!(s.requeue_running_jobs().await?, 1);
    let re = s.claim_jobs("w4", 5, past).await?;
    assert_eq!(re.len(), 1);
    assert_eq!(re[0].attempts, 2);
    assert_eq!(
        s.claim_jobs("w5", 5, until).await?.len(),
        1,
        "lease already expired"
    );
    s.close().await;
    Ok(())
}

#[tokio::test]
async fn a_stale_neighbour_update_is_held_and_the_rest_applies() -> Result<(), StoreError> {
    let s = mem().await;
    let a = note("new");
    let nb = note("neighbour");
    let wa = write(&a, vec![1.0, 0.0]);
    let job = wa.job.clone().unwrap();
    s.insert_notes(&[wa, write(&nb, vec![0.0, 1.0])]).await?;
    let mut e = enrichment(&job, &a);
    e.links.push(LinkWrite {
        to: nb.id.clone(),
        kind: "relates".into(),
        reason: "r".into(),
        confidence: 0.9,
        mode: ApplyMode::Apply,
    });
    e.updates.push(NeighbourWrite {
        id: nb.id.clone(),
        version: 7, // not the stored version (1)
        before: Fields::default(),
        after: Fields {
            keywords: vec![],
            tags: vec!["x".into()],
            context: "changed".into(),
        },
        embedding_before: Some(vec![0.0, 1.0]),
        embedding_after: vec![0.5, 0.5],
        mode: ApplyMode::Apply,
        changes: Vec::new(),
    });
    // the neighbour changed since the pipeline read it: its update is held for review,
    // everything else lands
    let held = s.apply_enrichment(&e).await?;
    assert_eq!(held, vec![nb.id.clone()]);
    assert_eq!(
        s.get_note(&a.id).await?.unwrap().enrich_state,
        EnrichState::Done
    );
    assert_eq!(s.links_of(&a.id).await?.len(), 1);
    let nbn = s.get_note(&nb.id).await?.unwrap();
    assert_eq!(
        nbn.context, "",
        "the stale update must not clobber the neighbour"
    );
    assert_eq!(s.embedding_of(&nb.id).await?, Some(vec![0.0, 1.0]));
    let revs = s.revisions(Some(&nb.id), 10).await?;
    assert_eq!(revs.len(), 1);
    assert_eq!(revs[0].status, "proposed");
    assert_eq!(
        s.accepted_links().await?,
        vec![(a.id.clone(), nb.id.clone())]
    );
    // the note itself changed meanwhile (another job evolved it): construction still
    // applies, and its revision records the annotations found inside the transaction
    let b = note("other");
    let wb = write(&b, vec![1.0, 1.0]);
    let jb = wb.job.clone().unwrap();
    s.insert_notes(&[wb]).await?;
    s.apply_enrichment(&enrichment(&jb, &b)).await?;
    let rb = s.revisions(Some(&b.id), 10).await?;
    assert_eq!(
        rb[0].before,
        serde_json::json!({"keywords": [], "tags": [], "context": ""})
    );
    // a deleted note refuses
    let c = note("gone");
    let wc = write(&c, vec![1.0, 1.0]);
    let jc = wc.job.clone().unwrap();
    s.insert_notes(&[wc]).await?;
    let ec = enrichment(&jc, &c);
    s.delete_note(&c.id).await?;
    assert!(matches!(
        s.apply_enrichment(&ec).await,
        Err(StoreError::Conflict)
    ));
    s.close().await;
    Ok(())
}

#[tokio::test]
async fn the_proposed_tier_applies_but_never_over_the_users_choice() -> Result<(), StoreError> {
    use kasten_core::lifecycle::Tier;
    let s = mem().await;
    let (a, b) = (note("a"), note("b"));
    let (wa, wb) = (write(&a, vec![1.0, 0.0]), write(&b, vec![0.0, 1.0]));
    let (ja, jb) = (wa.job.clone().unwrap(), wb.job.clone().unwrap());
    s.insert_notes(&[wa, wb]).await?;
    // the user made b long-term before the LLM got to it
    assert!(s.set_tier(&b.id, Tier::LongTerm, None, "user").await?);
    for (job, n) in [(&ja, &a), (&jb, &b)] {
        let mut e = enrichment(job, n);
        e.tier = Some("short_term".into());
        s.apply_enrichment(&e).await?;
    }
    assert_eq!(s.get_note(&a.id).await?.unwrap().tier, Tier::ShortTerm);
    assert_eq!(s.get_note(&b.id).await?.unwrap().tier, Tier::LongTerm);
    // and the LLM cannot override the user through set_tier either
    assert!(!s.set_tier(&b.id, Tier::ShortTerm, None, "llm").await?);
    Ok(())
}

#[tokio::test]
async fn a_proposed_link_that_already_exists_is_skipped_not_fatal() -> Result<(), StoreError> {
    let s = mem().await;
    let (a, b) = (note("a"), note("b"));
    let (wa, wb) = (write(&a, vec![1.0, 0.0]), write(&b, vec![0.0, 1.0]));
    let ja = wa.job.clone().unwrap();
    s.insert_notes(&[wa, wb]).await?;
    s.insert_import_links(&[crate::ImportLinkWrite {
        from: a.id.clone(),
        to: b.id.clone(),
        kind: "relates".into(),
        reason: "imported".into(),
        confidence: 1.0,
        status: LinkStatus::Proposed,
        created_at: Utc::now(),
    }])
    .await?;
    let mut e = enrichment(&ja, &a);
    e.links.push(LinkWrite {
        to: b.id.clone(),
        kind: "relates".into(),
        reason: "llm".into(),
        confidence: 0.9,
        mode: ApplyMode::Apply,
    });
    s.apply_enrichment(&e).await?;
    let links = s.links_of(&a.id).await?;
    assert_eq!(links.len(), 1);
    assert_eq!(links[0].reason, "imported", "the existing link stands");
    assert_eq!(links[0].status, LinkStatus::Proposed);
    assert_eq!(
        s.get_note(&a.id).await?.unwrap().enrich_state,
        EnrichState::Done
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_take_each_job_exactly_once() -> Result<(), StoreError> {
    // Eight claimers on one store race for 40 jobs: the claim's conditional update and the
    // conflict retry must hand every job to exactly one of them.
    let s = std::sync::Arc::new(mem().await);
    let notes: Vec<Note> = (0..40).map(|i| note(&format!("job note {i}"))).collect();
    let writes: Vec<NoteWrite> = notes.iter().map(|n| write(n, vec![1.0, 0.0])).collect();
    s.insert_notes(&writes).await?;
    let until = Utc::now() + chrono::Duration::minutes(5);
    let mut tasks = Vec::new();
    for w in 0..8 {
        let s = std::sync::Arc::clone(&s);
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                match s.claim_jobs(&format!("w{w}"), 1, until).await {
                    Ok(v) if v.is_empty() => break,
                    Ok(v) => mine.extend(v.into_iter().map(|j| j.id)),
                    // the bounded retry gave up: try again, as the engine's workers do
                    Err(StoreError::Conflict) => continue,
                    Err(e) => return Err(e),
                }
            }
            Ok(mine)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.map_err(|e| StoreError::Db(e.to_string()))??);
    }
    let unique: std::collections::HashSet<_> = all.iter().cloned().collect();
    assert_eq!(all.len(), 40, "a job was claimed twice or not at all");
    assert_eq!(unique.len(), 40);
    assert_eq!(s.job_counts().await?.running, 40);
    eprintln!(
        "40 jobs, 8 claimers: {} transaction(s) retried after a conflict",
        Store::conflict_retries()
    );
    if let Ok(s) = std::sync::Arc::try_unwrap(s) {
        s.close().await;
    }
    Ok(())
}

#[tokio::test]
async fn accepted_links_read_a_page_at_a_time_are_all_of_them() -> Result<(), StoreError> {
    let s = mem().await;
    let notes: Vec<Note> = (0..12).map(|i| note(&format!("n{i}"))).collect();
    let writes: Vec<_> = notes.iter().map(|n| write(n, vec![1.0, 0.0])).collect();
    s.insert_notes(&writes).await?;
    // 30 links, every third one only proposed
    let mut links = Vec::new();
    for i in 0..12 {
        for j in [1, 3, 5] {
            if links.len() < 30 {
                let k = links.len();
                links.push(crate::ImportLinkWrite {
                    from: notes[i].id.clone(),
                    to: notes[(i + j) % 12].id.clone(),
                    kind: "relates".into(),
                    reason: String::new(),
                    confidence: 1.0,
                    status: if k % 3 == 2 {
                        LinkStatus::Proposed
                    } else {
                        LinkStatus::Accepted
                    },
                    created_at: Utc::now(),
                });
            }
        }
    }
    assert_eq!(s.insert_import_links(&links).await?, 30);
    let mut all = s.accepted_links().await?;
    all.sort();
    assert_eq!(all.len(), 20);
    for limit in [1, 3, 7, 20, 50] {
        let (mut paged, mut after, mut pages) = (Vec::new(), None, 0);
        loop {
            let (page, next) = s.accepted_links_page(after, limit).await?;
            assert!(page.len() <= limit);
            paged.extend(page);
            pages += 1;
            match next {
                Some(c) => after = Some(c),
                None => break,
            }
        }
        paged.sort();
        assert_eq!(paged, all, "pages of {limit}");
        assert!(pages >= 20 / limit, "{pages} pages of {limit}");
    }
    Ok(())
}
