//! Turning library results into MCP tool results every client reads.
//!
//! - Success: the tool's output struct, sent as `structuredContent` (validating against its
//!   `outputSchema`) and as JSON text.
//! - A refusal, a failure or a bad argument: a tool result with `isError: true`, the text
//!   `"<code>: <message>"`, the code again in `_meta` under [`CODE_META`], and **no**
//!   `structuredContent` (a client validates structured content against the `outputSchema`
//!   even on errors, and an error object would not match it). The model reads it and can
//!   retry; nothing here is a JSON-RPC error, which hosts show as a fault of the call.

use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, JsonObject, MetaObject};
use rmcp::{ErrorData, Json};
use safe_lanes::Code;
use serde_json::Value;

/// The `_meta` key of an error result that holds its code.
pub(crate) const CODE_META: &str = "safe-lanes/code";

/// Why a tool call did not succeed: an error result (module docs).
#[derive(Debug)]
pub(crate) struct Failure(Box<CallToolResult>);

/// What a tool answers.
pub(crate) type Reply<T> = Result<Json<T>, Failure>;

impl IntoCallToolResult for Failure {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        Ok((*self.0).into())
    }
}

/// An error result with one of the library's stable codes.
pub(crate) fn refusal(code: Code, message: &str) -> Failure {
    let code = code.as_str();
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!("{code}: {message}"))]);
    let mut meta = MetaObject::new();
    meta.0.insert(CODE_META.to_owned(), Value::from(code));
    result.meta = Some(meta);
    Failure(Box::new(result))
}

/// An `invalid_argument` result: `message` names the argument.
pub(crate) fn invalid(message: &str) -> Failure {
    refusal(Code::InvalidArgument, message)
}

impl From<safe_lanes::Error> for Failure {
    fn from(e: safe_lanes::Error) -> Self {
        refusal(e.code(), &e.message().to_string())
    }
}

/// Arguments that agent hosts add to every tool on their own, accepted and ignored: Gemini CLI
/// adds `wait_for_previous` (and tells its model it must set it). Nothing else unknown is.
pub(crate) const HOST_ADDED: [&str; 1] = ["wait_for_previous"];

/// Parse a tool's arguments. Arguments that do not fit its schema (an unknown field, a wrong
/// type, a missing field, a number out of range) are `invalid_argument`, naming the field; the
/// [`HOST_ADDED`] ones are dropped first.
pub(crate) fn arguments<T: serde::de::DeserializeOwned>(mut raw: JsonObject) -> Result<T, Failure> {
    for added in HOST_ADDED {
        raw.remove(added);
    }
    serde_path_to_error::deserialize(Value::Object(raw)).map_err(|e| {
        let field = e.path().to_string();
        let why = e.into_inner();
        if field == "." {
            invalid(&why.to_string())
        } else {
            invalid(&format!("`{field}`: {why}"))
        }
    })
}

/// Run short library work (a few system calls) right here on the runtime's thread: a hand-off
/// to the blocking pool and back would cost more than the work. A panic in it becomes an `io`
/// error result, as in [`blocking`].
pub(crate) fn inline<T>(work: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|_| {
        tracing::error!("a tool call panicked");
        Err(refusal(
            Code::Io,
            "internal error: the operation failed unexpectedly",
        ))
    })
}

/// Run blocking library work off the async runtime. A panic in it becomes an `io` error result
/// instead of a request that never gets an answer.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(e) => {
            tracing::error!(error = %e, "a tool call panicked");
            Err(refusal(
                Code::Io,
                "internal error: the operation failed unexpectedly",
            ))
        }
    }
}
