//! The operating-system error behind a failed write. SurrealDB reports a write that the
//! disk refused (full, a file-size limit, read-only) to the caller only as "the query was
//! not executed due to a failed transaction" and logs the cause (`File too large (os error
//! 27)`) at ERROR level. This tracing layer keeps the last such logged OS error so that the
//! CLI's error message can say what the disk said.

use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

static LAST: Mutex<Option<String>> = Mutex::new(None);

/// Records the message of every ERROR event that carries an OS error (`os error N`).
pub struct OsErrorLayer;

struct Message(String);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" || value.contains("os error") {
            self.push(value);
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let v = format!("{value:?}");
        if field.name() == "message" || v.contains("os error") {
            self.push(&v);
        }
    }
}

impl Message {
    fn push(&mut self, v: &str) {
        if !self.0.is_empty() {
            self.0.push_str(": ");
        }
        self.0.push_str(v);
    }
}

impl<S: Subscriber> Layer<S> for OsErrorLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if *event.metadata().level() != tracing::Level::ERROR {
            return;
        }
        let mut m = Message(String::new());
        event.record(&mut m);
        if let Some(cause) = os_error_of(&m.0)
            && let Ok(mut last) = LAST.lock()
        {
            *last = Some(cause);
        }
    }
}

/// The `… (os error N)` part of a log message, e.g. `File too large (os error 27)`.
fn os_error_of(msg: &str) -> Option<String> {
    let end = msg.find("(os error ")?;
    let close = msg[end..].find(')')? + end + 1;
    // the words before it, back to the previous separator
    let start = msg[..end]
        .rfind([':', '"', '(', '{', ',', '='])
        .map_or(0, |i| i + 1);
    let cause = msg[start..close].trim();
    (!cause.is_empty()).then(|| cause.to_owned())
}

/// The last OS error the storage engine logged in this process, if any.
pub fn last() -> Option<String> {
    LAST.lock().ok().and_then(|l| l.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_os_error_is_cut_out_of_the_log_message() {
        assert_eq!(
            os_error_of("failed to write block: File too large (os error 27)").as_deref(),
            Some("File too large (os error 27)")
        );
        assert_eq!(
            os_error_of(
                "Io(Os { code: 28, kind: StorageFull, message: \"No space left on device (os error 28)\" })"
            ),
            Some("No space left on device (os error 28)".to_owned())
        );
        // what surrealkv logs when a write hits a file-size limit
        assert_eq!(
            os_error_of(
                "An error occurred flushing the WAL buffer to disk: WAL error: IO error: \
                 kind=file too large, message=File too large (os error 27)"
            )
            .as_deref(),
            Some("File too large (os error 27)")
        );
        assert_eq!(os_error_of("transaction conflict"), None);
    }
}
