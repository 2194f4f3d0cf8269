//! Two processes on one SurrealDB server, with the automatic and the review policy, give
//! the embedded store's results.

use super::*;

#[test]
fn two_processes_write_and_enrich_on_a_server_once_each_like_the_embedded_store() {
    let llm = FakeServer::start("normal");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = SurrealServer::start(dir.path());
    let m = Memory::on_server(&server, &llm);
    let (a, b) = (corpus(0, 30), corpus(30, 30));
    let (fa, fb) = (m.file("a.jsonl", &a), m.file("b.jsonl", &b));

    // Two processes, each importing its file and then running the queue, started together
    // on a new database: their opens (migrations), writes and enrichment all overlap.
    let t = Instant::now();
    let script = |file: &str| {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(r#""$0" import "$1" --format jsonl --print-ids --batch 4 && echo --- && "$0" --json enrich --workers 2"#)
            .arg(kasten_bin())
            .arg(file)
            .env("KASTEN_DB", &m.db)
            .env("KASTEN_LLM_PROVIDER", "openai")
            .env("KASTEN_LLM_BASE_URL", llm.openai_url())
            .env("KASTEN_LLM_MODEL", "fake-model")
            .env_remove("KASTEN_LLM_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Group::start(c)
    };
    let (pa, pb) = (script(&fa), script(&fb));
    let (oa, ob) = (finish("process A", pa), finish("process B", pb));
    let secs = t.elapsed().as_secs_f64();
    let mut acknowledged = HashSet::new();
    let mut enrich_out = Vec::new();
    for (o, n) in [(&oa, a.len()), (&ob, b.len())] {
        let (printed, summary) = o
            .split_once("---\n")
            .unwrap_or_else(|| panic!("no separator in {o}"));
        let printed = ids(printed);
        assert_eq!(printed.len(), n, "every imported note's id is printed");
        acknowledged.extend(printed);
        enrich_out.push(summary.to_owned());
    }
    // a last pass finds nothing left: no job was left running or queued by either process
    let last: Value =
        serde_json::from_str(&m.ok(&["--json", "enrich"])).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(last["summary"]["done"].as_u64(), Some(0), "{last:#}");
    let (done, conflicts) = enrich_totals(&enrich_out);
    assert_eq!(done, 60, "the two processes enriched 60 notes between them");

    let expected: BTreeSet<String> = contents(&a).union(&contents(&b)).cloned().collect();
    let tables = m.tables();
    let on_server = check(&tables, &expected, &acknowledged);
    assert_llm_work_done_once(&llm, &tables, &expected);

    // the same input on the embedded store: the same notes and the same construction for
    // each (links and evolution depend on the order notes were enriched in, here and there)
    let (embedded, embedded_secs) = embedded_run(&a, &b, false);
    assert_eq!(on_server.notes, embedded.notes);
    assert_eq!(on_server.construction, embedded.construction);
    eprintln!(
        "server: 2 processes, 60 notes, 60 jobs, {} links, {} evolution revisions, \
         {conflicts} conflict retries, {secs:.1} s; embedded, 1 process: {} links, {embedded_secs:.1} s",
        on_server.links.len(),
        on_server.evolution.len(),
        embedded.links.len()
    );
}

#[test]
fn under_review_policy_a_server_with_two_processes_gives_exactly_the_embedded_results() {
    // With every LLM proposal held for review nothing changes while the queue runs, so
    // what each note's enrichment sees does not depend on the order jobs run in: the
    // links and edits proposed must be exactly those of a single embedded process.
    let llm = FakeServer::start("normal");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = SurrealServer::start(dir.path());
    let m = Memory::on_server(&server, &llm);
    let (a, b) = (corpus(100, 20), corpus(120, 20));
    let (fa, fb) = (m.file("a.jsonl", &a), m.file("b.jsonl", &b));

    let t = Instant::now();
    let (pa, pb) = (
        m.spawn(&Memory::import_args(&fa)),
        m.spawn(&Memory::import_args(&fb)),
    );
    let mut acknowledged: HashSet<String> = ids(&finish("import A", pa)).into_iter().collect();
    acknowledged.extend(ids(&finish("import B", pb)));
    assert_eq!(acknowledged.len(), 40);
    m.ok(&["config", "set", "policy.links", "review"]);
    m.ok(&["config", "set", "policy.edits", "review"]);
    let (ea, eb) = (
        m.spawn(&["--json", "enrich", "--workers", "2"]),
        m.spawn(&["--json", "enrich", "--workers", "2"]),
    );
    let outs = [finish("enrich A", ea), finish("enrich B", eb)];
    let secs = t.elapsed().as_secs_f64();
    let (done, conflicts) = enrich_totals(&outs);
    assert_eq!(done, 40);

    let expected: BTreeSet<String> = contents(&a).union(&contents(&b)).cloned().collect();
    let tables = m.tables();
    let on_server = check(&tables, &expected, &acknowledged);
    assert_llm_work_done_once(&llm, &tables, &expected);
    assert!(!on_server.links.is_empty() && !on_server.evolution.is_empty());
    assert!(
        on_server.links.iter().all(|l| l.3 == "proposed"),
        "under review every link is a proposal"
    );

    let (embedded, embedded_secs) = embedded_run(&a, &b, true);
    assert_eq!(on_server.notes, embedded.notes);
    assert_eq!(on_server.construction, embedded.construction);
    assert_eq!(
        on_server.links, embedded.links,
        "links differ from the embedded run"
    );
    assert_eq!(
        on_server.evolution, embedded.evolution,
        "proposed edits differ from the embedded run"
    );
    eprintln!(
        "review policy: 40 notes, {} links, {} proposed edits identical to the embedded run; \
         server (2 processes) {secs:.1} s, {conflicts} conflict retries; embedded {embedded_secs:.1} s",
        on_server.links.len(),
        on_server.evolution.len()
    );
}
