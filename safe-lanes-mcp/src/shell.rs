//! `shell_exec`'s progress notifications while a foreground command runs.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;
use safe_lanes::control::Mark;
use safe_lanes::desk::CommandReport;
use safe_lanes::{Code, Control};
use tokio::task::JoinHandle;

use crate::reply::{Failure, refusal};

/// How often a running command reports progress (the contract says at least every 5 s).
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// The most characters of the last output line a progress message quotes.
const LAST_LINE_CHARS: usize = 120;

/// Wait for `work` (a foreground command); while it runs, send the client progress every
/// [`PROGRESS_EVERY`] if the request asked for it with a `progressToken`.
pub(crate) async fn with_progress(
    mut work: JoinHandle<safe_lanes::Result<CommandReport>>,
    control: &Control,
    context: &RequestContext<RoleServer>,
) -> Result<CommandReport, Failure> {
    let token = context.meta.get_progress_token();
    let mut seen = Seen::default();
    loop {
        tokio::select! {
            done = &mut work => {
                return match done {
                    Ok(report) => Ok(report?),
                    Err(e) => {
                        tracing::error!(error = %e, "a shell command's thread panicked");
                        Err(refusal(Code::Io, "internal error: the command failed unexpectedly"))
                    }
                };
            }
            () = tokio::time::sleep(PROGRESS_EVERY), if token.is_some() => {
                let Some(token) = token.clone() else { continue };
                let elapsed = control.elapsed().as_secs_f64();
                let progress = ProgressNotificationParam::new(token, elapsed)
                    .with_message(seen.update(control));
                if let Err(e) = context.peer.notify_progress(progress).await {
                    tracing::debug!(error = %e, "a progress notification was not sent");
                }
            }
        }
    }
}

/// What progress messages have counted of a command's output.
#[derive(Debug, Default)]
struct Seen {
    mark: Mark,
    bytes: usize,
    last_line: String,
}

impl Seen {
    /// Take in the output new since the last message; say how far the command got.
    fn update(&mut self, control: &Control) -> String {
        let (new, mark) = control.output_since(self.mark);
        self.mark = mark;
        for text in [&new.stdout, &new.stderr] {
            self.bytes += text.len();
            if let Some(line) = text.lines().rev().find(|l| !l.trim().is_empty()) {
                self.last_line = line.chars().take(LAST_LINE_CHARS).collect();
            }
        }
        let elapsed = control.elapsed().as_secs();
        if self.last_line.is_empty() {
            format!("running for {elapsed} s, no output yet")
        } else {
            format!(
                "running for {elapsed} s, {} bytes of output; last line: {}",
                self.bytes, self.last_line
            )
        }
    }
}
