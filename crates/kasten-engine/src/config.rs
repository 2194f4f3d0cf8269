//! The engine's configuration in force: the LLM, its label or why there is none, the
//! pipeline options, the embedder.

use super::*;

impl Engine {
    /// The store, for the engine's own tests; everything else goes through the engine.
    #[cfg(test)]
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    pub fn embedder(&self) -> &dyn Embedder {
        self.embedder.as_ref()
    }

    /// The embedder, to open another engine with it without loading the model again.
    pub fn shared_embedder(&self) -> Arc<dyn Embedder> {
        Arc::clone(&self.embedder)
    }

    /// Sets the LLM (None: enrichment waits) and the pipeline options.
    pub fn configure(&mut self, llm: Option<LlmClient>, pipeline: PipelineOptions) {
        self.llm_label = llm
            .as_ref()
            .map_or_else(|| "none".to_owned(), |c| c.config().model.clone());
        self.llm_problem = None;
        self.llm = llm;
        self.pipeline = pipeline;
    }

    /// Uses the LLM `choice` names (see [`settings`]); its profile decides the prompts.
    pub fn configure_choice(&mut self, choice: LlmChoice, mut pipeline: PipelineOptions) {
        pipeline.profile = choice.profile;
        self.llm = choice.client;
        self.llm_label = choice.label;
        self.llm_problem = choice.problem;
        self.pipeline = pipeline;
    }

    /// The LLM in use, in words ("built-in Qwen2.5-Coder-0.5B", "Ollama qwen2.5:7b", "none").
    pub fn llm_label(&self) -> &str {
        &self.llm_label
    }

    /// Why no LLM is in use, in words a user can act on.
    pub fn llm_missing_reason(&self) -> String {
        self.llm_problem
            .clone()
            .unwrap_or_else(|| LlmConfig::missing_reason().to_owned())
    }

    /// The pipeline options in force.
    pub fn pipeline_options(&self) -> &PipelineOptions {
        &self.pipeline
    }

    /// Which A-Mem steps enrichment runs from now on (the evaluation's ablations).
    pub fn set_steps(&mut self, steps: Steps) {
        self.pipeline.steps = steps;
    }

    /// The LLM client, if one is configured.
    pub fn llm_client(&self) -> Option<&LlmClient> {
        self.llm.as_ref()
    }
}
