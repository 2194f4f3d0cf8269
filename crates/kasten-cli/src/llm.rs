//! `kasten llm` (the LLM in use and the servers found on this machine), `kasten llm models`
//! / `install` / `remove` (the built-in models Kasten can install) and `kasten quality`
//! (the quality check over the LLM's annotations).

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use kasten_engine::{Engine, LlmPick};
use kasten_llm::catalog::{
    CatalogModel, DEFAULT_MODEL, catalog as builtin_models, find_model, installed_path,
    measurements, models_dir,
};
use kasten_llm::install::{InstallProgress, Installer, human};
use serde_json::json;

use crate::args::LlmAction;

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
                .use_llm(&LlmPick::Server {
                    provider: server.provider.as_str().to_owned(),
                    base_url: server.base_url.clone(),
                    model: model.clone(),
                })
                .await?;
            if !json {
                println!("now using {} {model} at {}", server.server, server.base_url);
            }
        }
        Some(LlmAction::Builtin { name }) => {
            // a named model must be installed; the default one is looked up where
            // scripts/setup and the .deb put it, as with no name
            let env = |k: &str| std::env::var(k).ok();
            let model = name.as_deref().map(find).transpose()?;
            let path = match &model {
                None => None,
                Some(m) => {
                    let p = installed_path(m, env).ok_or_else(|| {
                        anyhow!(
                            "{} is not installed: `kasten llm install {}` downloads it ({})",
                            m.title,
                            m.name,
                            human(m.download_size())
                        )
                    })?;
                    (!m.default).then_some(p)
                }
            };
            engine
                .use_llm(&LlmPick::Builtin {
                    model_path: path.as_ref().map(|p| p.display().to_string()),
                })
                .await?;
            if !json {
                match &model {
                    Some(m) => println!("now using the built-in model {}", m.title),
                    None => println!("now using the built-in model"),
                }
            }
        }
        Some(LlmAction::Models | LlmAction::Install { .. } | LlmAction::Remove { .. }) => {
            bail!("internal error: the model catalog is not served with a memory")
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
                        "  note:  a small model that runs on your CPU: keywords, contexts and links, no rewrites of\n         \
                         older notes (evolution), answers that quote a note. A bigger model does both:\n         \
                         `kasten llm models` lists the built-in choices\n         \
                         (`kasten llm install NAME`, then `kasten llm builtin NAME`); or run Ollama or\n         \
                         llama-server and pick it below, or `kasten config set llm.model_path FILE.gguf`."
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
        return Err(anyhow::Error::new(crate::output::Reported(format!(
            "the quality check failed ({} finding(s))",
            r.findings.len()
        ))));
    }
    if !json {
        println!("quality check passed");
    }
    Ok(())
}

/// The catalog's model `name`, or an error that lists the names.
fn find(name: &str) -> Result<CatalogModel> {
    find_model(name).ok_or_else(|| {
        let names: Vec<String> = builtin_models().into_iter().map(|m| m.name).collect();
        anyhow!(
            "there is no built-in model '{name}'; `kasten llm models` lists them: {}",
            names.join(", ")
        )
    })
}

/// `kasten llm models`, `install NAME`, `remove NAME`: files in Kasten's data directory,
/// no memory opened.
pub async fn catalog(action: &LlmAction, json: bool) -> Result<()> {
    let env = |k: &str| std::env::var(k).ok();
    let dir = models_dir(env)
        .ok_or_else(|| anyhow!("cannot find Kasten's data directory: set KASTEN_HOME"))?;
    match action {
        LlmAction::Models => models(&dir, json),
        LlmAction::Install { name } => install(&dir, &find(name)?, json).await,
        LlmAction::Remove { name } => {
            let m = find(name)?;
            let removed = Installer::new(&dir)?.remove(&m)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&json!({"name": m.name, "removed": removed}))?
                );
            } else if removed {
                println!("removed {} from {}", m.title, dir.display());
                if let Some(p) = installed_path(&m, env) {
                    println!(
                        "(the copy at {} stays: it is not in Kasten's data directory)",
                        p.display()
                    );
                }
            } else {
                println!("{} is not installed in {}", m.title, dir.display());
            }
            Ok(())
        }
        _ => bail!("internal error: not a catalog command"),
    }
}

fn models(dir: &Path, json: bool) -> Result<()> {
    let env = |k: &str| std::env::var(k).ok();
    let measured = measurements(dir);
    let list: Vec<_> = builtin_models()
        .into_iter()
        .map(|m| {
            let path = installed_path(&m, env);
            let me = measured.get(&m.file);
            (m, path, me.cloned())
        })
        .collect();
    if json {
        let models: Vec<_> = list
            .iter()
            .map(|(m, path, me)| {
                json!({
                    "name": m.name,
                    "title": m.title,
                    "size": m.size,
                    "download_size": m.download_size(),
                    "languages": m.languages,
                    "license": m.license,
                    "author": m.author,
                    "about": m.about,
                    "default": m.default,
                    "installed": path.is_some(),
                    "path": path.as_ref().map(|p| p.display().to_string()),
                    "notes_per_hour": me.as_ref().map(|x| x.notes_per_hour),
                    "quality": me.as_ref().map(|x| json!({"passed": x.quality_passed, "detail": x.quality})),
                    "measured": me,
                })
            })
            .collect();
        let v = json!({"models_dir": dir.display().to_string(), "models": models});
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("Built-in models (installed into {}):", dir.display());
    for (m, path, me) in &list {
        println!(
            "\n  {:<20} {}, {}, {}, {}{}",
            m.name,
            m.title,
            human(m.size),
            m.languages.join("+"),
            m.license,
            if m.default { " (the default)" } else { "" }
        );
        println!("  {:<20} {}", "", m.about);
        match path {
            Some(p) => println!("  {:<20} installed: {}", "", p.display()),
            None => println!(
                "  {:<20} not installed: `kasten llm install {}` downloads {}",
                "",
                m.name,
                human(m.download_size())
            ),
        }
        match me {
            Some(x) => println!(
                "  {:<20} measured here: {:.0} notes/hour, quality check {}{} ({} cores, load {}, {})",
                "",
                x.notes_per_hour,
                if x.quality_passed { "passed" } else { "failed" },
                if x.quality.is_empty() {
                    String::new()
                } else {
                    format!(": {}", x.quality)
                },
                x.cores,
                x.load,
                x.measured_at
            ),
            None => println!(
                "  {:<20} not measured on this machine yet (scripts/builtin-llm-bench)",
                ""
            ),
        }
    }
    println!(
        "\nUse one with `kasten llm builtin NAME` (`kasten llm builtin` alone: {DEFAULT_MODEL}). \
         Licenses: LICENSES/models.md."
    );
    Ok(())
}

async fn install(dir: &Path, m: &CatalogModel, json: bool) -> Result<()> {
    let installer = Installer::new(dir)?;
    // one the .deb carries (or another home holds) needs no second copy
    let env = |k: &str| std::env::var(k).ok();
    if let Some(p) = installed_path(m, env).filter(|p| *p != installer.target(m)) {
        if json {
            let v = json!({"name": m.name, "path": p.display().to_string(), "size": m.size, "sha256": m.sha256});
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            println!(
                "{} is already installed at {}\nuse it with `kasten llm builtin {}`",
                m.title,
                p.display(),
                m.name
            );
        }
        return Ok(());
    }
    let pb = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::new(m.download_size());
        pb.set_style(
            ProgressStyle::with_template(
                "{msg:>12} [{bar:32}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        pb
    } else {
        ProgressBar::hidden()
    };
    eprintln!(
        "installing {} ({}, {} in {} part(s)) into {}",
        m.title,
        m.license,
        human(m.download_size()),
        m.parts.len(),
        dir.display()
    );
    let bar = pb.clone();
    let progress = move |p: InstallProgress| match p {
        InstallProgress::Checking => bar.set_message("checking"),
        InstallProgress::Downloading {
            part, parts, done, ..
        } => {
            bar.set_message(format!("part {part}/{parts}"));
            bar.set_position(done);
        }
        InstallProgress::Unpacking { part, parts } => {
            bar.set_message(format!("check {part}/{parts}"))
        }
        InstallProgress::Verifying => bar.set_message("verifying"),
    };
    let path = tokio::select! {
        r = installer.install(m, &progress) => r,
        _ = kasten_engine::shutdown_signal() => {
            pb.abandon();
            bail!(
                "interrupted: `kasten llm install {}` continues where it stopped; \
                 `kasten llm remove {}` deletes what was downloaded",
                m.name, m.name
            );
        }
    };
    pb.finish_and_clear();
    let path = path.with_context(|| format!("cannot install {}", m.title))?;
    if json {
        let v = json!({
            "name": m.name,
            "path": path.display().to_string(),
            "size": m.size,
            "sha256": m.sha256,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "installed {} at {} (sha256 checked)\nuse it with `kasten llm builtin {}`",
            m.title,
            path.display(),
            m.name
        );
    }
    Ok(())
}
