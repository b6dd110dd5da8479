//! Turning library results into MCP tool results.
//!
//! - Success: the tool's output struct, sent as `structuredContent` (with its `outputSchema`)
//!   and as JSON text.
//! - A library error (a refusal or an `io` failure): a tool result with `isError: true`, the
//!   text `"<code>: <message>"` and `structuredContent: {"error": {"code", "message"}}`.
//! - A malformed call (both `text` and `base64`, invalid base64): a JSON-RPC "invalid params"
//!   error.

use rmcp::ErrorData;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, JsonObject};
use safe_lanes::Code;
use serde_json::json;

/// Why a tool call did not succeed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Refused or failed: a tool result with `isError: true`.
    Refused(Box<CallToolResult>),
    /// Malformed: a JSON-RPC error.
    Malformed(Box<ErrorData>),
}

impl IntoCallToolResult for Failure {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        match self {
            Failure::Refused(result) => Ok((*result).into()),
            Failure::Malformed(error) => Err(*error),
        }
    }
}

/// A refusal result with one of the library's stable codes.
pub(crate) fn refusal(code: Code, message: &str) -> Failure {
    let code = code.as_str();
    let mut result =
        CallToolResult::structured_error(json!({ "error": { "code": code, "message": message } }));
    result.content = vec![ContentBlock::text(format!("{code}: {message}"))];
    Failure::Refused(Box::new(result))
}

impl From<safe_lanes::Error> for Failure {
    fn from(e: safe_lanes::Error) -> Self {
        refusal(e.code(), &e.to_string())
    }
}

/// A JSON-RPC "invalid params" error.
pub(crate) fn malformed(message: &str) -> Failure {
    Failure::Malformed(Box::new(ErrorData::invalid_params(
        message.to_owned(),
        None,
    )))
}

/// Parse a tool's arguments; arguments that do not fit its schema (a wrong type, a missing
/// field) are a JSON-RPC "invalid params" error, like every other malformed call.
pub(crate) fn arguments<T: serde::de::DeserializeOwned>(raw: JsonObject) -> Result<T, Failure> {
    serde_json::from_value(serde_json::Value::Object(raw))
        .map_err(|e| malformed(&format!("invalid arguments: {e}")))
}

/// The JSON Schema of a tool's arguments.
pub(crate) fn input_schema<T: schemars::JsonSchema + 'static>() -> std::sync::Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_input::<T>()
        .unwrap_or_else(|e| panic!("the argument types have valid schemas: {e}"))
}

/// Run blocking library work off the async runtime. A panic in it becomes an `io` refusal
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
