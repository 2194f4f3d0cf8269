//! The worker thread that owns the model: loads it on the first request, answers the
//! requests that wait together in one context (a sequence each, one decode per step for
//! all), and drops it when idle.

use super::prompt::{Chooser, batch_last, llama_err, prompt_tokens, take_utf8};
use super::*;

struct Loaded {
    model: LlamaModel,
    template: LlamaChatTemplate,
}

pub(super) fn worker(opts: LocalOptions, shared: Arc<Shared>, rx: mpsc::Receiver<Job>) {
    // Background work: the lowest CPU priority for this thread and the threads llama.cpp
    // starts from it (they inherit it). In the foreground the person waits for it: the
    // priority stays as it is.
    if !FOREGROUND.load(Ordering::Relaxed)
        && let Err(e) =
            thread_priority::set_current_thread_priority(thread_priority::ThreadPriority::Min)
    {
        tracing::debug!(?e, "could not lower the built-in model's CPU priority");
    }
    // Unloaded: wait for a request, load, then serve until idle (the context, which
    // borrows the model, is dropped before it).
    loop {
        let Ok(first) = rx.recv() else { break };
        let mut loaded: Option<Loaded> = None;
        let model = match ensure_loaded(&opts, &shared, &mut loaded) {
            Ok(m) => m,
            Err(e) => {
                shared.requests.fetch_add(1, Ordering::Relaxed);
                let _ = first.reply.send(Err(e));
                continue;
            }
        };
        let gone = serve(&opts, model, &shared, &rx, first);
        drop(loaded);
        shared.loaded.store(false, Ordering::Relaxed);
        if gone {
            return;
        }
    }
    shared.loaded.store(false, Ordering::Relaxed);
}

/// Serves requests with the loaded model until none came for [`LocalOptions::idle_unload`]
/// (false) or every sender is gone (true). Requests that arrive while others are being
/// answered join them: each gets its own sequence in the shared context, and every step
/// of generation decodes one token for each of them together.
fn serve(
    opts: &LocalOptions,
    m: &Loaded,
    shared: &Shared,
    rx: &mpsc::Receiver<Job>,
    first: Job,
) -> bool {
    let mut pool: Option<Pool<'_>> = None;
    let mut waiting: VecDeque<Job> = VecDeque::from([first]);
    // a request read and tokenized that waits for a free sequence or room in the cache
    let mut held: Option<Ready> = None;
    loop {
        let busy = pool.as_ref().is_some_and(|p| p.active() > 0);
        if !busy && waiting.is_empty() && held.is_none() {
            match rx.recv_timeout(opts.idle_unload) {
                Ok(j) => waiting.push_back(j),
                Err(RecvTimeoutError::Timeout) => {
                    tracing::info!("built-in model unloaded after {:?} idle", opts.idle_unload);
                    return false;
                }
                Err(RecvTimeoutError::Disconnected) => return true,
            }
        }
        // every request that waits now (a sender gone while some are being answered: they
        // are finished first; the wait above notices it afterwards)
        while let Ok(j) = rx.try_recv() {
            waiting.push_back(j);
        }
        admit(opts, m, shared, &mut pool, &mut waiting, &mut held);
        if let Some(p) = pool.as_mut()
            && p.active() > 0
        {
            p.step(m, shared);
        }
    }
}

/// One request, its prompt tokenized and its answer's length settled.
struct Ready {
    job: Job,
    tokens: Vec<LlamaToken>,
    max_new: usize,
}

impl Ready {
    /// The cache cells this request may fill: its prompt and its whole answer.
    fn cells(&self) -> usize {
        self.tokens.len() + self.max_new + 1
    }
}

/// The prompt's tokens and the most tokens the answer may have.
fn prepare(
    opts: &LocalOptions,
    m: &Loaded,
    job: &Job,
) -> Result<(Vec<LlamaToken>, usize), LlmError> {
    let tokens = prompt_tokens(&m.model, &m.template, &job.messages)?;
    let n_prompt = tokens.len();
    let budget = opts.max_context as usize;
    if n_prompt + 16 > budget {
        return Err(LlmError::Protocol(format!(
            "the prompt has {n_prompt} tokens, more than the built-in model's context of {budget}"
        )));
    }
    let max_new = (job.max_tokens as usize).min(budget - n_prompt - 8);
    Ok((tokens, max_new))
}

/// Answers `job` and counts it.
fn reply(shared: &Shared, job: Job, result: Result<Generated, LlmError>) {
    shared.requests.fetch_add(1, Ordering::Relaxed);
    drop(job.pieces);
    let _ = job.reply.send(result);
}

/// Starts the waiting requests while a sequence is free and the cache has room for them,
/// oldest first; one that does not fit waits in `held` until an answer is finished.
fn admit<'m>(
    opts: &LocalOptions,
    m: &'m Loaded,
    shared: &Shared,
    pool: &mut Option<Pool<'m>>,
    waiting: &mut VecDeque<Job>,
    held: &mut Option<Ready>,
) {
    loop {
        let ready = match held.take() {
            Some(r) => r,
            None => {
                let Some(job) = waiting.pop_front() else {
                    return;
                };
                // dropped by its caller (a timeout, a closed window): nobody waits for it
                if job.cancelled.load(Ordering::Relaxed) {
                    continue;
                }
                match prepare(opts, m, &job) {
                    Ok((tokens, max_new)) => Ready {
                        job,
                        tokens,
                        max_new,
                    },
                    Err(e) => {
                        reply(shared, job, Err(e));
                        continue;
                    }
                }
            }
        };
        if ready.job.cancelled.load(Ordering::Relaxed) {
            continue;
        }
        let idle = pool.as_ref().is_none_or(|p| p.active() == 0);
        if idle {
            // between answers: the context is made again for another thread count
            let threads = thread_count(opts.threads, &shared.others);
            if pool.as_ref().is_none_or(|p| p.threads != threads) {
                *pool = None;
                match Pool::new(opts, m, threads) {
                    Ok(p) => {
                        shared.threads.store(threads as u64, Ordering::Relaxed);
                        *pool = Some(p);
                    }
                    Err(e) => {
                        reply(shared, ready.job, Err(e));
                        continue;
                    }
                }
            }
        }
        let Some(p) = pool.as_mut() else {
            return;
        };
        if !p.fits(&ready) {
            *held = Some(ready);
            return;
        }
        p.start(m, shared, ready, opts.grammar_first);
    }
}

/// The sequences decoded together, in one context whose attention (KV) cache they share
/// (llama.cpp's unified cache: a prompt start that two sequences share is held once).
struct Pool<'m> {
    ctx: LlamaContext<'m>,
    n_ctx: usize,
    threads: usize,
    /// The most sequences answered at once.
    batch: usize,
    seqs: Vec<Seq>,
    /// Counts starts, for the least recently used sequence.
    clock: u64,
}

/// A sequence of the shared context: what its cache holds, and the request it answers.
struct Seq {
    id: i32,
    /// The tokens whose keys and values are in the cache for this sequence, in position
    /// order. Kept after its answer: the next prompt that starts the same way reads only
    /// the part after the shared start (Kasten's prompts start with fixed instructions and
    /// examples, so most of each prompt is reused).
    cached: Vec<LlamaToken>,
    last_used: u64,
    active: Option<Active>,
}

/// A request being answered.
struct Active {
    job: Job,
    chooser: Chooser,
    n_prompt: usize,
    max_new: usize,
    generated: u32,
    text: String,
    pending: Vec<u8>,
    /// The token chosen last, to be read into the cache by the next step.
    next: LlamaToken,
}

/// Sequences kept at least, so that the two kinds of prompt in flight (construction and
/// links alternate) each keep their cache even when answered one at a time.
const MIN_SEQS: usize = 2;
/// Cache cells per sequence when several are answered at once (a Kasten prompt and its
/// answer take about 600–900 tokens); a longer prompt waits until there is room for it.
const CELLS_PER_SEQ: usize = 1536;

impl<'m> Pool<'m> {
    fn new(opts: &LocalOptions, m: &'m Loaded, threads: usize) -> Result<Self, LlmError> {
        let backend = backend()?;
        let batch = opts.batch.clamp(1, MAX_BATCH);
        let n_seqs = batch.max(MIN_SEQS);
        let n_ctx = (opts.max_context as usize).max(batch * CELLS_PER_SEQ);
        let n_ctx_u32 = u32::try_from(n_ctx).unwrap_or(opts.max_context);
        let threads_i32 = i32::try_from(threads).unwrap_or(2);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx_u32))
            .with_n_batch(n_ctx_u32)
            .with_n_ubatch(512)
            .with_n_seq_max(u32::try_from(n_seqs).unwrap_or(1))
            .with_kv_unified(true)
            .with_n_threads(threads_i32)
            .with_n_threads_batch(threads_i32);
        let ctx = m
            .model
            .new_context(backend, params)
            .map_err(|e| llama_err("creating a context", e))?;
        let seqs = (0..n_seqs)
            .map(|i| Seq {
                id: i32::try_from(i).unwrap_or(0),
                cached: Vec::new(),
                last_used: 0,
                active: None,
            })
            .collect();
        Ok(Self {
            ctx,
            n_ctx,
            threads,
            batch,
            seqs,
            clock: 0,
        })
    }

    fn active(&self) -> usize {
        self.seqs.iter().filter(|s| s.active.is_some()).count()
    }

    /// Cells the answers being written may fill, counted without what they share.
    fn reserved(&self) -> usize {
        self.seqs
            .iter()
            .filter_map(|s| s.active.as_ref().map(|a| a.n_prompt + a.max_new + 1))
            .sum()
    }

    /// Whether `ready` can start now: a sequence free and room in the cache beside the
    /// answers being written (the idle sequences' caches give way to it).
    fn fits(&self, ready: &Ready) -> bool {
        self.active() < self.batch && self.reserved() + ready.cells() <= self.n_ctx
    }

    /// Takes a free sequence for `ready`, reads its prompt (what a sequence's cache already
    /// holds of it is shared, not read again) and chooses its first token.
    fn start(&mut self, m: &Loaded, shared: &Shared, ready: Ready, grammar_first: bool) {
        let Ready {
            job,
            tokens,
            max_new,
        } = ready;
        let n_prompt = tokens.len();
        let grammar = match &job.grammar {
            Some(g) => match LlamaSampler::grammar(&m.model, g, "root") {
                Ok(s) => Some(s),
                Err(e) => {
                    reply(
                        shared,
                        job,
                        Err(llama_err("compiling the output grammar", e)),
                    );
                    return;
                }
            },
            None => None,
        };
        let pick = if job.temperature > 0.0 {
            LlamaSampler::chain_simple([
                LlamaSampler::temp(job.temperature),
                LlamaSampler::dist(0x4b41_5354),
            ])
        } else {
            LlamaSampler::greedy()
        };
        let chooser = Chooser {
            grammar,
            pick,
            grammar_first,
            full_steps: 0,
            fallback: m.model.vocab().eos(),
        };
        // the free sequence whose cache shares the longest start with this prompt, else the
        // least recently used
        let Some(s) = self
            .seqs
            .iter()
            .enumerate()
            .filter(|(_, q)| q.active.is_none())
            .max_by_key(|(_, q)| (common_prefix(&q.cached, &tokens), u64::MAX - q.last_used))
            .map(|(i, _)| i)
        else {
            reply(shared, job, Err(llama_err("starting", "no free sequence")));
            return;
        };
        let t_prompt = Instant::now();
        // at least the prompt's last token is read again: its logits start the answer
        let limit = n_prompt.saturating_sub(1);
        let own = common_prefix(&self.seqs[s].cached, &tokens).min(limit);
        let (source, shared_len) = self
            .seqs
            .iter()
            .enumerate()
            .map(|(i, q)| (i, common_prefix(&q.cached, &tokens).min(limit)))
            .max_by_key(|&(i, n)| (n, i == s))
            .unwrap_or((s, own));
        let reuse = self.reuse(s, source, own, shared_len);
        self.make_room(s, n_prompt + max_new + 1);
        self.clock += 1;
        let seq = &mut self.seqs[s];
        seq.last_used = self.clock;
        let id = seq.id;
        let fresh = &tokens[reuse..];
        let read = (|| {
            let mut batch = LlamaBatch::new(fresh.len().max(1), 1);
            let last = fresh.len().saturating_sub(1);
            for (i, t) in fresh.iter().enumerate() {
                batch.add(*t, (reuse + i) as i32, &[id], i == last)?;
            }
            Ok::<_, llama_cpp_2::llama_batch::BatchAddError>(batch)
        })();
        let result = read
            .map_err(|e| llama_err("reading the prompt", e))
            .and_then(|mut batch| {
                self.ctx
                    .decode(&mut batch)
                    .map_err(|e| llama_err("reading the prompt", e))
            });
        if let Err(e) = result {
            // what this sequence's cache holds is unknown after a failure: start it over
            self.forget(s);
            reply(shared, job, Err(e));
            return;
        }
        self.seqs[s].cached.extend_from_slice(fresh);
        shared
            .prompt_tokens
            .fetch_add(n_prompt as u64, Ordering::Relaxed);
        shared
            .prompt_tokens_reused
            .fetch_add(reuse as u64, Ordering::Relaxed);
        shared
            .prompt_ms
            .fetch_add(t_prompt.elapsed().as_millis() as u64, Ordering::Relaxed);
        let mut active = Active {
            job,
            chooser,
            n_prompt,
            max_new,
            generated: 0,
            text: String::new(),
            pending: Vec::new(),
            next: LlamaToken(0),
        };
        if max_new == 0 {
            finish(shared, active);
            return;
        }
        let t_gen = Instant::now();
        let done = advance(&self.ctx, m, shared, &mut active, batch_last(fresh.len()));
        shared
            .generation_ms
            .fetch_add(t_gen.elapsed().as_millis() as u64, Ordering::Relaxed);
        if done {
            finish(shared, active);
        } else {
            self.seqs[s].active = Some(active);
        }
    }

    /// Puts the first `n` tokens of the prompt in sequence `s`'s cache: its own when they
    /// are there, else shared from `source`'s. Returns how many are there (0 when the cache
    /// cannot be cut, as for recurrent models).
    fn reuse(&mut self, s: usize, source: usize, own: usize, n: usize) -> usize {
        let id = self.seqs[s].id;
        let from_own = source == s || own >= n;
        let keep = if from_own { own } else { 0 };
        let cut = self
            .ctx
            .clear_kv_cache_seq(Some(id as u32), Some(keep as u32), None)
            .unwrap_or(false);
        if !cut {
            let _ = self.ctx.clear_kv_cache_seq(Some(id as u32), None, None);
            self.seqs[s].cached.clear();
            return 0;
        }
        self.seqs[s].cached.truncate(keep);
        if from_own || n == 0 {
            return keep;
        }
        let src = self.seqs[source].id;
        if self
            .ctx
            .copy_kv_cache_seq(src, id, Some(0), Some(n as u32))
            .is_err()
        {
            return 0;
        }
        let prefix = self.seqs[source].cached[..n].to_vec();
        self.seqs[s].cached = prefix;
        n
    }

    /// Empties the idle sequences' caches, least recently used first, until the answers
    /// being written and sequence `s`'s (which may fill `cells`) have room.
    fn make_room(&mut self, s: usize, cells: usize) {
        let mut used = self.reserved()
            + cells
            + self
                .seqs
                .iter()
                .enumerate()
                .filter(|(i, q)| *i != s && q.active.is_none())
                .map(|(_, q)| q.cached.len())
                .sum::<usize>();
        while used > self.n_ctx {
            let Some(t) = self
                .seqs
                .iter()
                .enumerate()
                .filter(|(i, q)| *i != s && q.active.is_none() && !q.cached.is_empty())
                .min_by_key(|(_, q)| q.last_used)
                .map(|(i, _)| i)
            else {
                break;
            };
            used -= self.seqs[t].cached.len();
            self.forget(t);
        }
    }

    /// Empties sequence `s`'s cache.
    fn forget(&mut self, s: usize) {
        let id = self.seqs[s].id;
        let _ = self.ctx.clear_kv_cache_seq(Some(id as u32), None, None);
        self.seqs[s].cached.clear();
    }

    /// One step of generation: the token each answer chose last is read into the cache, all
    /// in one decode, and each answer chooses its next one. A cancelled request ends here
    /// and the others go on.
    fn step(&mut self, m: &Loaded, shared: &Shared) {
        for seq in &mut self.seqs {
            if seq
                .active
                .as_ref()
                .is_some_and(|a| a.job.cancelled.load(Ordering::Relaxed))
                && let Some(a) = seq.active.take()
            {
                // the cache keeps what was read: it is still a prompt's start
                reply(
                    shared,
                    a.job,
                    Err(LlmError::Protocol("the request was cancelled".into())),
                );
            }
        }
        let n = self.active();
        if n == 0 {
            return;
        }
        let t_gen = Instant::now();
        let mut batch = LlamaBatch::new(n, 1);
        let mut rows: Vec<(usize, i32)> = Vec::with_capacity(n);
        let mut added = Ok(());
        for (i, seq) in self.seqs.iter().enumerate() {
            if let Some(a) = &seq.active {
                let row = batch.n_tokens();
                added = added.and(batch.add(a.next, seq.cached.len() as i32, &[seq.id], true));
                rows.push((i, row));
            }
        }
        let decoded = added
            .map_err(|e| llama_err("generating", e))
            .and_then(|()| {
                self.ctx
                    .decode(&mut batch)
                    .map_err(|e| llama_err("generating", e))
            });
        if let Err(e) = decoded {
            // what the cache holds is unknown after a failure: every answer being written
            // fails, and the cache starts over
            self.ctx.clear_kv_cache();
            for seq in &mut self.seqs {
                seq.cached.clear();
                if let Some(a) = seq.active.take() {
                    reply(shared, a.job, Err(e.clone()));
                }
            }
            return;
        }
        shared.generation_steps.fetch_add(1, Ordering::Relaxed);
        shared.batch_peak.fetch_max(n as u64, Ordering::Relaxed);
        for (i, row) in rows {
            let seq = &mut self.seqs[i];
            let Some(mut a) = seq.active.take() else {
                continue;
            };
            seq.cached.push(a.next);
            if advance(&self.ctx, m, shared, &mut a, row) {
                finish(shared, a);
            } else {
                seq.active = Some(a);
            }
        }
        shared
            .generation_ms
            .fetch_add(t_gen.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

/// Chooses the answer's next token from the logits at `row` of the last decode and passes
/// its text on. Returns whether the answer is complete (an end token, or its length).
fn advance(ctx: &LlamaContext<'_>, m: &Loaded, shared: &Shared, a: &mut Active, row: i32) -> bool {
    let vocab = m.model.vocab();
    let token = a.chooser.choose(ctx, row);
    if vocab.is_eog(token) {
        return true;
    }
    a.generated += 1;
    shared.generated_tokens.fetch_add(1, Ordering::Relaxed);
    a.pending
        .extend_from_slice(&vocab.token_to_piece(token, false, None));
    let piece = take_utf8(&mut a.pending);
    if !piece.is_empty() {
        if let Some(tx) = &a.job.pieces {
            let _ = tx.send(piece.clone());
        }
        a.text.push_str(&piece);
    }
    a.next = token;
    a.generated as usize >= a.max_new
}

/// Sends a complete answer.
fn finish(shared: &Shared, mut a: Active) {
    shared
        .grammar_full_steps
        .fetch_add(a.chooser.full_steps, Ordering::Relaxed);
    if !a.pending.is_empty() {
        let rest = String::from_utf8_lossy(&a.pending).into_owned();
        if let Some(tx) = &a.job.pieces {
            let _ = tx.send(rest.clone());
        }
        a.text.push_str(&rest);
    }
    let generated = Generated {
        text: a.text,
        prompt_tokens: u32::try_from(a.n_prompt).unwrap_or(u32::MAX),
        completion_tokens: a.generated,
    };
    reply(shared, a.job, Ok(generated));
}

fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn ensure_loaded<'a>(
    opts: &LocalOptions,
    shared: &Shared,
    loaded: &'a mut Option<Loaded>,
) -> Result<&'a Loaded, LlmError> {
    if loaded.is_none() {
        let started = Instant::now();
        check_gguf(&opts.path)?;
        let backend = backend()?;
        // Read into memory, not mapped: llama.cpp repacks most weights into a buffer of its
        // own for the CPU's kernels, and a mapped file kept every page it read for that
        // resident beside the copy (docs/BENCHMARKS.md, the built-in LLM's peak RSS).
        let params = LlamaModelParams::default().with_use_mmap(false);
        let model = LlamaModel::load_from_file(backend, &opts.path, &params)
            .map_err(|e| {
            LlmError::Config(format!(
                "llama.cpp cannot load {} ({e}); run scripts/setup again, or choose another GGUF file",
                opts.path.display()
            ))
        })?;
        let template = model
            .chat_template(None)
            .or_else(|_| LlamaChatTemplate::new("chatml"))
            .map_err(|e| LlmError::Config(format!("the model has no usable chat template: {e}")))?;
        shared.model_bytes.store(model.size(), Ordering::Relaxed);
        shared.params.store(model.n_params(), Ordering::Relaxed);
        shared
            .load_ms
            .store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
        shared.loaded.store(true, Ordering::Relaxed);
        tracing::info!(path = %opts.path.display(), ms = started.elapsed().as_millis() as u64, "built-in model loaded");
        *loaded = Some(Loaded { model, template });
    }
    loaded
        .as_ref()
        .ok_or_else(|| LlmError::Protocol("the built-in model is not loaded".into()))
}
