//! `kasten llm` (the LLM in use and the servers found on this machine) and `kasten quality`
//! (the quality check over the LLM's annotations).

use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use kasten_engine::Engine;
use serde_json::json;

use crate::LlmAction;

/// How long one discovery probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_millis(400);

pub async fn run(engine: &Engine, action: Option<LlmAction>, json: bool) -> Result<()> {
    let found = kasten_llm::discover(PROBE_TIMEOUT).await;
    match action {
        None => {}
        Some(LlmAction::Use { n, model }) => {
            let server = n.checked_sub(1).and_then(|i| found.get(i)).ok_or_else(|| {
                anyhow!(
                    "there is no server {n}: `kasten llm` lists {} server(s) found on this machine",
                    found.len()
                )
            })?;
            let model = match model {
                Some(m) => m,
                None => server.models.first().cloned().ok_or_else(|| {
                    anyhow!("{} lists no models; pass --model NAME", server.server)
                })?,
            };
            engine
                .set_setting_checked("llm.provider", server.provider.as_str())
                .await?;
            engine
                .set_setting_checked("llm.base_url", &server.base_url)
                .await?;
            engine.set_setting_checked("llm.model", &model).await?;
            if !json {
                println!("now using {} {model} at {}", server.server, server.base_url);
            }
        }
        Some(LlmAction::Builtin) => {
            for k in [
                "llm.provider",
                "llm.base_url",
                "llm.model",
                "llm.model_path",
            ] {
                engine.unset_setting(k).await?;
            }
            if !json {
                println!("now using the built-in model");
            }
        }
    }
    let env = |k: &str| std::env::var(k).ok();
    let choice = engine.choose_llm(&env).await?;
    let local = choice.client.as_ref().and_then(|c| c.local());
    if json {
        let v = json!({
            "in_use": {
                "label": choice.label,
                "source": choice.source,
                "ready": choice.client.is_some(),
                "problem": choice.problem,
                "profile": choice.profile,
                "steps": choice.profile.steps(),
                "model_path": local.map(|l| l.options().path.display().to_string()),
                "timeout_secs": choice.timeout.as_secs(),
            },
            "discovered": found,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("LLM in use: {}", choice.label);
    match (&choice.client, &choice.problem) {
        (Some(_), _) => {
            println!("  from:  {}", source_words(choice.source));
            if let Some(l) = local {
                println!("  file:  {}", l.options().path.display());
                if choice.source == kasten_engine::LlmSource::BuiltIn {
                    println!(
                        "  note:  a tiny English-first model that runs on your CPU; it writes simple notes.\n         \
                         A bigger model writes much better ones: run Ollama or llama-server and pick it below,\n         \
                         or `kasten config set llm.model_path FILE.gguf`."
                    );
                }
            }
            println!("  does:  {}", choice.profile.steps());
        }
        (None, Some(p)) => println!("  not ready: {p}"),
        (None, None) => println!("  not ready"),
    }
    if found.is_empty() {
        println!(
            "\nNo LLM server found on this machine (probed Ollama :11434, LM Studio :1234, llama-server :8080, vLLM :8000)."
        );
    } else {
        println!("\nLLM servers on this machine:");
        for (i, d) in found.iter().enumerate() {
            let models = if d.models.is_empty() {
                "no models listed".to_owned()
            } else {
                d.models.join(", ")
            };
            println!("  {}. {} at {}: {models}", i + 1, d.server, d.base_url);
        }
        println!("Use one with `kasten llm use N [--model NAME]`.");
    }
    Ok(())
}

fn source_words(s: kasten_engine::LlmSource) -> &'static str {
    use kasten_engine::LlmSource::*;
    match s {
        Environment => "the environment (KASTEN_LLM_*)",
        Settings => "the settings (kasten config)",
        BuiltIn => "built in (installed by scripts/setup)",
        None => "nowhere",
    }
}

pub async fn quality(engine: &Engine, json: bool) -> Result<()> {
    let r = engine.quality_report(100_000).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "{} enriched notes: {}/{} keywords occur in their note ({:.0} %), {} with a context, \
             {} links (at most {} per note, {} different reasons)",
            r.notes,
            r.keywords_in_note,
            r.keywords,
            r.keyword_share_in_note * 100.0,
            r.notes_with_context,
            r.links,
            r.max_links_per_note,
            r.distinct_reasons
        );
        for f in &r.findings {
            if f.note.is_empty() {
                println!("  {}: {}", f.rule, f.detail);
            } else {
                println!("  {} {}: {}", f.note, f.rule, f.detail);
            }
        }
    }
    if !r.passed {
        bail!("the quality check failed ({} finding(s))", r.findings.len());
    }
    if !json {
        println!("quality check passed");
    }
    Ok(())
}
