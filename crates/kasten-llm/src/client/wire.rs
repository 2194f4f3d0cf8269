//! The providers' wire formats: the chat request body per provider, a completion read
//! back, and streamed answers read line by line however they are cut.

use super::*;

#[derive(Default)]
pub(super) struct StreamState {
    pub(super) text: String,
    pub(super) model: Option<String>,
    pub(super) prompt: Option<u64>,
    pub(super) completion: Option<u64>,
    /// `[DONE]` (OpenAI) or `"done": true` (Ollama) was seen.
    pub(super) done: bool,
    /// An OpenAI `finish_reason` was seen (enough if the server omits `[DONE]`).
    pub(super) finished: bool,
}

pub(super) const RAW_LIMIT: usize = 2048;

impl LlmClient {
    /// Parses a whole streamed response body that arrived in `chunks`, exactly as
    /// [`LlmClient::chat_stream`] does while reading it. For the fuzz targets and tests:
    /// the result must not depend on where the chunks are cut.
    #[doc(hidden)]
    pub fn parse_stream_body(
        &self,
        chunks: &[&[u8]],
        on_token: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let (mut buf, mut st) = (Vec::new(), StreamState::default());
        for chunk in chunks {
            if st.done {
                break;
            }
            self.stream_chunk(&mut buf, chunk, &mut st, on_token)?;
        }
        self.stream_end(&buf, st, &[], on_token)
    }

    /// Parses a non-streaming response body as [`LlmClient::chat`] does (for the fuzz
    /// targets and tests).
    #[doc(hidden)]
    pub fn parse_response_body(&self, body: &str) -> Result<ChatResponse, LlmError> {
        self.parse_completion(body, &[])
    }

    /// Adds one piece of a stream to `buf` and handles every complete line in it (up to
    /// the end of the answer).
    pub(super) fn stream_chunk(
        &self,
        buf: &mut Vec<u8>,
        chunk: &[u8],
        st: &mut StreamState,
        on_token: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), LlmError> {
        buf.extend_from_slice(chunk);
        while let Some(pos) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            self.stream_line(&String::from_utf8_lossy(&line), st, on_token)?;
            if st.done {
                break;
            }
        }
        Ok(())
    }

    /// The stream has ended: handles a last line without a newline and checks that the
    /// answer was complete.
    pub(super) fn stream_end(
        &self,
        buf: &[u8],
        mut st: StreamState,
        messages: &[Message],
        on_token: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatResponse, LlmError> {
        if !st.done && !buf.is_empty() {
            self.stream_line(&String::from_utf8_lossy(buf), &mut st, on_token)?;
        }
        if !(st.done || st.finished) {
            return Err(LlmError::Protocol(
                "the stream ended before the answer was complete".into(),
            ));
        }
        Ok(ChatResponse {
            usage: Usage::from_counts(st.prompt, st.completion, messages, &st.text),
            model: st.model.unwrap_or_else(|| self.config.model.clone()),
            text: st.text,
        })
    }

    pub(super) fn chat_path(&self) -> &'static str {
        match self.config.provider {
            Provider::Openai | Provider::Local => "/chat/completions",
            Provider::Ollama => "/api/chat",
        }
    }

    pub(super) fn chat_body(
        &self,
        messages: &[Message],
        schema: Option<(&str, &Value)>,
        temperature: f32,
        max_tokens: Option<u32>,
        stream: bool,
    ) -> Value {
        // f32 → shortest decimal, so 0.2 is sent as 0.2 and not 0.20000000298023224
        let temperature: Value = temperature
            .to_string()
            .parse::<f64>()
            .map_or(Value::Null, Value::from);
        let mut b = Map::new();
        b.insert("model".into(), json!(self.config.model));
        b.insert("messages".into(), json!(messages));
        b.insert("stream".into(), json!(stream));
        match self.config.provider {
            Provider::Openai | Provider::Local => {
                b.insert("temperature".into(), temperature);
                if let Some(n) = max_tokens {
                    b.insert("max_tokens".into(), json!(n));
                }
                if let Some((name, schema)) = schema {
                    b.insert(
                        "response_format".into(),
                        json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": true}}),
                    );
                }
                if stream {
                    b.insert("stream_options".into(), json!({"include_usage": true}));
                }
            }
            Provider::Ollama => {
                let mut options = Map::new();
                options.insert("temperature".into(), temperature);
                if let Some(n) = max_tokens {
                    options.insert("num_predict".into(), json!(n));
                }
                b.insert("options".into(), Value::Object(options));
                if let Some((_, schema)) = schema {
                    b.insert("format".into(), schema.clone());
                }
            }
        }
        Value::Object(b)
    }

    pub(super) fn parse_completion(
        &self,
        body: &str,
        messages: &[Message],
    ) -> Result<ChatResponse, LlmError> {
        let v = parse_body(body)?;
        let (content, prompt, completion) = match self.config.provider {
            Provider::Openai | Provider::Local => (
                v.pointer("/choices/0/message/content"),
                v.pointer("/usage/prompt_tokens"),
                v.pointer("/usage/completion_tokens"),
            ),
            Provider::Ollama => (
                v.pointer("/message/content"),
                v.get("prompt_eval_count"),
                v.get("eval_count"),
            ),
        };
        let Some(text) = content.and_then(Value::as_str) else {
            let field = match self.config.provider {
                Provider::Openai | Provider::Local => "choices[0].message.content",
                Provider::Ollama => "message.content",
            };
            return Err(LlmError::Protocol(format!(
                "the response has no {field}: {}",
                clip(body, 300)
            )));
        };
        Ok(ChatResponse {
            usage: Usage::from_counts(
                prompt.and_then(Value::as_u64),
                completion.and_then(Value::as_u64),
                messages,
                text,
            ),
            text: text.to_owned(),
            model: self.model_of(&v),
        })
    }

    pub(super) fn model_of(&self, v: &Value) -> String {
        v.get("model")
            .and_then(Value::as_str)
            .unwrap_or(&self.config.model)
            .to_owned()
    }

    pub(super) fn stream_line(
        &self,
        line: &str,
        st: &mut StreamState,
        on_token: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), LlmError> {
        let line = line.trim();
        let data = match self.config.provider {
            // SSE: only `data:` lines matter (not comments, `event:`, blank separators)
            Provider::Openai | Provider::Local => match line.strip_prefix("data:").map(str::trim) {
                Some("[DONE]") => {
                    st.done = true;
                    return Ok(());
                }
                Some(data) => data,
                None => return Ok(()),
            },
            Provider::Ollama if line.is_empty() => return Ok(()),
            Provider::Ollama => line,
        };
        let v = parse_body(data)?;
        if st.model.is_none() {
            st.model = v.get("model").and_then(Value::as_str).map(str::to_owned);
        }
        let piece = match self.config.provider {
            Provider::Openai | Provider::Local => {
                if v.pointer("/choices/0/finish_reason")
                    .is_some_and(|f| !f.is_null())
                {
                    st.finished = true;
                }
                if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                    st.prompt = u.get("prompt_tokens").and_then(Value::as_u64);
                    st.completion = u.get("completion_tokens").and_then(Value::as_u64);
                }
                v.pointer("/choices/0/delta/content")
            }
            Provider::Ollama => {
                if v.get("done").and_then(Value::as_bool) == Some(true) {
                    st.done = true;
                    st.prompt = v.get("prompt_eval_count").and_then(Value::as_u64);
                    st.completion = v.get("eval_count").and_then(Value::as_u64);
                }
                v.pointer("/message/content")
            }
        };
        if let Some(piece) = piece.and_then(Value::as_str).filter(|p| !p.is_empty()) {
            st.text.push_str(piece);
            on_token(piece);
        }
        Ok(())
    }
}

/// A response body as JSON; an `error` object or string in it becomes a readable error.
pub(super) fn parse_body(text: &str) -> Result<Value, LlmError> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        LlmError::Protocol(format!(
            "the response is not JSON ({e}): {}",
            clip(text, 300)
        ))
    })?;
    match error_message(&v) {
        Some(msg) => Err(LlmError::Protocol(format!(
            "the server reported an error: {msg}"
        ))),
        None => Ok(v),
    }
}

/// `error.message` (OpenAI) or `error` (Ollama) of an error body.
pub(super) fn error_message(v: &Value) -> Option<String> {
    let err = v.get("error").filter(|e| !e.is_null())?;
    let msg = err.get("message").and_then(Value::as_str).or(err.as_str());
    Some(msg.map_or_else(|| err.to_string(), str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::tests::client;

    #[test]
    fn request_bodies_per_provider() {
        let msgs = [Message::user("hi")];
        let schema = json!({"type": "object"});
        let b = client(Provider::Openai).chat_body(
            &msgs,
            Some(("note", &schema)),
            0.2,
            Some(64),
            false,
        );
        assert_eq!(
            b["response_format"]["json_schema"],
            json!({"name": "note", "schema": schema, "strict": true})
        );
        assert_eq!(b["temperature"], json!(0.2));
        assert_eq!(b["max_tokens"], json!(64));
        assert_eq!(b["stream"], json!(false));
        let b =
            client(Provider::Ollama).chat_body(&msgs, Some(("note", &schema)), 0.0, Some(64), true);
        assert_eq!(b["format"], schema);
        assert_eq!(b["options"], json!({"temperature": 0.0, "num_predict": 64}));
        assert_eq!(b["stream"], json!(true));
        assert_eq!(b["messages"], json!([{"role": "user", "content": "hi"}]));
    }

    #[test]
    fn streams_parse_the_same_however_they_are_cut() {
        let c = client(Provider::Openai);
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"Grüße\"}}]}\n\n\
                    data: {\"choices\":[{\"delta\":{\"content\":\" [1]\"},\"finish_reason\":\"stop\"}]}\n\
                    data: [DONE]\n"
            .as_bytes();
        let whole = c.parse_stream_body(&[body], &mut |_| {}).unwrap();
        assert_eq!(whole.text, "Grüße [1]");
        for cut in 0..body.len() {
            let (a, b) = body.split_at(cut);
            let mut pieces = String::new();
            let r = c
                .parse_stream_body(&[a, b], &mut |p| pieces.push_str(p))
                .unwrap();
            assert_eq!(
                (r.text.as_str(), pieces.as_str()),
                ("Grüße [1]", "Grüße [1]")
            );
        }
        let cut_off = &body[..40];
        assert!(c.parse_stream_body(&[cut_off], &mut |_| {}).is_err());
    }

    #[test]
    fn server_errors_in_bodies_are_readable() {
        let e = parse_body(r#"{"error": {"message": "model not found"}}"#).unwrap_err();
        assert!(e.to_string().contains("model not found"), "{e}");
        let e = client(Provider::Openai)
            .parse_completion(r#"{"object": "x"}"#, &[])
            .unwrap_err();
        assert!(e.to_string().contains("choices[0].message.content"), "{e}");
    }
}
