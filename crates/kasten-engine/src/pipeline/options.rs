//! What enrichment runs with and reports: the review policy, the pipeline options and
//! steps, the model profile, and the outcome of a job and of a pass.

use std::time::Duration;

use kasten_core::NoteId;
use kasten_llm::LlmClient;
use serde::{Deserialize, Serialize};

/// How LLM proposals take effect (the review issue adds accept/reject on top).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// Links: applied at once (and kept for review) or held until accepted.
    pub links: PolicyMode,
    /// Neighbour edits (evolution): likewise.
    pub edits: PolicyMode,
    /// Under `review`, links at or above this confidence are applied anyway.
    pub auto_accept_confidence: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyMode {
    Auto,
    Review,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            links: PolicyMode::Auto,
            edits: PolicyMode::Auto,
            auto_accept_confidence: None,
        }
    }
}

/// Pipeline settings.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    /// Neighbours shown to the LLM (A-Mem's k).
    pub k: usize,
    /// Attempts before a job ends `failed`.
    pub max_attempts: u32,
    /// How long a claimed job stays reserved for its worker.
    pub lease: Duration,
    /// Concurrent jobs in `run_pending`.
    pub workers: usize,
    /// Which prompts the model gets (setting `llm.profile`).
    pub profile: ModelProfile,
    /// Which A-Mem steps run (all by default; the evaluation's ablations switch them off).
    pub steps: Steps,
}

/// The steps of A-Mem's enrichment that run. Without construction a note keeps no
/// keywords, tags or context of the LLM's; without links the LLM proposes none; without
/// evolution older notes are never edited. With links and evolution both off, the
/// link/evolve call is not made at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steps {
    pub construction: bool,
    pub links: bool,
    pub evolution: bool,
}

impl Default for Steps {
    fn default() -> Self {
        Self {
            construction: true,
            links: true,
            evolution: true,
        }
    }
}

impl Steps {
    /// "full", or the steps left out ("no-construction+no-links").
    pub fn label(self) -> String {
        let off: Vec<&str> = [
            (self.construction, "no-construction"),
            (self.links, "no-links"),
            (self.evolution, "no-evolution"),
        ]
        .iter()
        .filter(|(on, _)| !on)
        .map(|(_, l)| *l)
        .collect();
        if off.is_empty() {
            "full".to_owned()
        } else {
            off.join("+")
        }
    }
}

impl Default for PipelineOptions {
    fn default() -> Self {
        Self {
            k: 10,
            max_attempts: 3,
            lease: Duration::from_secs(600),
            workers: 2,
            profile: ModelProfile::Auto,
            steps: Steps::default(),
        }
    }
}

/// What a model is trusted to do.
///
/// - `full`: A-Mem's prompts: free keywords, tags and context, links with reasons, and
///   evolution of the neighbours.
/// - `small`: guided prompts for small models (measured on SmolLM2-135M, see
///   docs/BENCHMARKS.md): keywords chosen from the note's own words, tags from the
///   memory's tags and a general list, a short context; at most three links, each to a
///   neighbour sharing a term and named by it; **no evolution** (a small model's rewrites
///   of other notes were junk).
/// - `links`: A-Mem's prompts for construction and links, **no evolution**: the link
///   prompt asks for links alone, so no tokens go to operations that would not be kept.
/// - `auto`: for a model of the catalog, what its measurements decided (its `full_prompts` and
///   `evolution`: `full` for one whose evolutions earned their place, none so far; `links`
///   for one that writes A-Mem's annotations and links well; else `small`); for another
///   GGUF file, `small` under 1.5 GB and `full` above; `full` for servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelProfile {
    Auto,
    Full,
    Links,
    Small,
}

impl ModelProfile {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Self::Auto),
            "full" => Some(Self::Full),
            "links" => Some(Self::Links),
            "small" => Some(Self::Small),
            _ => None,
        }
    }

    /// `auto` resolved for `llm`.
    pub fn resolve(self, llm: &LlmClient) -> Self {
        match self {
            Self::Auto => match llm.local() {
                Some(local) => {
                    let path = &local.options().path;
                    if let Some(m) = kasten_llm::catalog::model_of_file(path) {
                        return match (m.full_prompts, m.evolution) {
                            (true, true) => Self::Full,
                            (true, false) => Self::Links,
                            (false, _) => Self::Small,
                        };
                    }
                    let size = std::fs::metadata(path).map_or(0, |m| m.len());
                    if size < 1_500_000_000 {
                        Self::Small
                    } else {
                        Self::Full
                    }
                }
                None => Self::Full,
            },
            other => other,
        }
    }

    /// The steps of the pipeline this profile runs, in words (for `kasten llm` and notes).
    pub fn steps(self) -> &'static str {
        match self {
            Self::Small => {
                "construction (guided) and links; no evolution (a small model's rewrites of older notes are not kept)"
            }
            Self::Links => {
                "construction and links; no evolution (this model's rewrites of older notes are not asked for)"
            }
            _ => "construction, links and evolution",
        }
    }

    /// Whether the model gets the guided prompts of a small model (resolved first).
    pub fn guided(self) -> bool {
        self == Self::Small
    }

    /// Whether this profile (resolved first) runs evolution: only `full`.
    pub fn evolves(self) -> bool {
        matches!(self, Self::Full | Self::Auto)
    }

    /// The version of the prompts a note enriched under this profile (resolved first) with
    /// `steps` is recorded with: the guided prompts, A-Mem's with evolution, or A-Mem's
    /// asking for links alone (a profile without evolution, or the steps without it).
    pub fn prompt_version(self, steps: Steps) -> &'static str {
        if self.guided() {
            kasten_core::prompts::GUIDED_PROMPT_VERSION
        } else if steps.evolution && self.evolves() {
            kasten_core::prompts::PROMPT_VERSION
        } else {
            kasten_core::prompts::LINKS_PROMPT_VERSION
        }
    }
}

/// What happened to one job.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum JobOutcome {
    Done {
        note: NoteId,
        links: usize,
        updates: usize,
        tokens: u64,
    },
    Retrying {
        note: NoteId,
        error: String,
    },
    Failed {
        note: NoteId,
        error: String,
    },
    /// The note was deleted before its job ran.
    Gone {
        note: NoteId,
    },
}

/// Totals of a `run_pending` pass.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunSummary {
    pub done: usize,
    pub retrying: usize,
    pub failed: usize,
    pub tokens: u64,
    pub errors: Vec<String>,
    /// Store transactions run again after losing a write conflict to another writer
    /// (several processes on one SurrealDB server; see docs/SERVER.md). Not failures.
    pub conflict_retries: u64,
}

/// The setting key for the review policy.
pub(crate) const POLICY_SETTING: &str = "policy";

#[cfg(test)]
mod tests {
    use super::*;
    use kasten_core::prompts::{GUIDED_PROMPT_VERSION, LINKS_PROMPT_VERSION, PROMPT_VERSION};

    #[test]
    fn each_profile_is_named_runs_its_steps_and_records_its_prompts() {
        let all = Steps::default();
        let no_evolution = Steps {
            evolution: false,
            ..all
        };
        for (name, p, evolves, version) in [
            ("full", ModelProfile::Full, true, PROMPT_VERSION),
            ("links", ModelProfile::Links, false, LINKS_PROMPT_VERSION),
            ("small", ModelProfile::Small, false, GUIDED_PROMPT_VERSION),
        ] {
            assert_eq!(ModelProfile::parse(name), Some(p));
            assert_eq!(serde_json::to_value(p).ok(), Some(serde_json::json!(name)));
            assert_eq!(p.evolves(), evolves, "{name}");
            assert_eq!(p.guided(), name == "small", "{name}");
            assert_eq!(p.steps().contains("no evolution"), !evolves, "{name}");
            assert_eq!(p.prompt_version(all), version, "{name}");
        }
        // the full profile's ablation without evolution asks for links alone
        assert_eq!(
            ModelProfile::Full.prompt_version(no_evolution),
            LINKS_PROMPT_VERSION
        );
        assert_eq!(
            ModelProfile::Small.prompt_version(no_evolution),
            GUIDED_PROMPT_VERSION
        );
    }

    /// The app shows a profile's steps in the user's language by looking up the engine's
    /// English words in its dictionary: every profile's words must be there.
    #[test]
    fn the_app_can_translate_every_profiles_steps() {
        let en = include_str!("../../../../ui/src/i18n/en.ts");
        for p in [ModelProfile::Full, ModelProfile::Links, ModelProfile::Small] {
            let quoted = format!("\"{}\"", p.steps());
            assert!(en.contains(&quoted), "{quoted} is not in ui/src/i18n/en.ts");
        }
    }
}
