//! Newline-delimited JSON-RPC over stdin/stdout that answers every unusable line.
//!
//! rmcp's stdio transport drops a line that is not JSON without a word. This one answers it as
//! JSON-RPC asks: `-32700` (parse error) for a line that is not JSON, `-32600` (invalid request)
//! for JSON that is not a message or a line over [`MAX_LINE`], with the request's `id` when it
//! has one. Blank lines are skipped.
//!
//! One plain thread reads stdin and one writes stdout (each line in a single `write`), so a
//! call costs a handful of thread hand-offs rather than one trip through the async runtime's
//! blocking pool per read and per write.

use std::io::{self, BufRead, Read, Write};
use std::sync::mpsc;

use futures::{Sink, Stream};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use serde_json::{Value, json};

/// The longest line read: room for a 50 MiB download as base64 inside a JSON-RPC request.
pub(crate) const MAX_LINE: usize = 96 << 20;

/// The (sink, stream) pair rmcp serves over, on this process's stdin and stdout, and the
/// stdout thread: join it after the service ends so the last answers are written.
pub(crate) fn stdio() -> io::Result<(
    (
        impl Sink<ServerJsonRpcMessage, Error = io::Error> + Send + Unpin + 'static,
        impl Stream<Item = ClientJsonRpcMessage> + Send + Unpin + 'static,
    ),
    std::thread::JoinHandle<()>,
)> {
    let (to_stdout, lines_out) = mpsc::channel::<Vec<u8>>();
    let writer = std::thread::Builder::new()
        .name("stdout".into())
        .spawn(move || write_lines(io::stdout(), lines_out))?;
    let (to_server, messages) = tokio::sync::mpsc::unbounded_channel::<ClientJsonRpcMessage>();
    let errors = to_stdout.clone();
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || read_lines(io::stdin().lock(), &to_server, &errors))?;
    let sink = Box::pin(futures::sink::unfold(
        to_stdout,
        |to_stdout, message: ServerJsonRpcMessage| async move {
            let line = serde_json::to_vec(&message).map_err(io::Error::other)?;
            to_stdout
                .send(line)
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed"))?;
            Ok::<_, io::Error>(to_stdout)
        },
    ));
    let stream = Box::pin(futures::stream::unfold(
        messages,
        |mut messages| async move { messages.recv().await.map(|m| (m, messages)) },
    ));
    Ok(((sink, stream), writer))
}

/// Write each line and a newline with one `write`, until the channel closes or stdout fails.
fn write_lines(out: impl Write, lines: mpsc::Receiver<Vec<u8>>) {
    let mut out = out;
    for mut line in lines {
        line.push(b'\n');
        if out.write_all(&line).and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}

/// Read lines until end of input, passing messages on and answering unusable lines.
fn read_lines(
    mut input: impl BufRead,
    to_server: &tokio::sync::mpsc::UnboundedSender<ClientJsonRpcMessage>,
    to_stdout: &mpsc::Sender<Vec<u8>>,
) {
    let answer = |id: Value, code: i64, message: String| {
        tracing::debug!(code, %message, "answering an unusable line");
        let response =
            json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } });
        let _ = to_stdout.send(response.to_string().into_bytes());
    };
    loop {
        let mut line = Vec::new();
        match (&mut input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() > MAX_LINE && !line.ends_with(b"\n") {
            if skip_rest_of_line(&mut input).is_err() {
                return;
            }
            answer(Value::Null, -32600, "Invalid request: line too long".into());
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<ClientJsonRpcMessage>(&line) {
            Ok(message) => {
                if to_server.send(message).is_err() {
                    return;
                }
            }
            Err(e) => match serde_json::from_slice::<Value>(&line) {
                Err(_) => answer(Value::Null, -32700, format!("Parse error: {e}")),
                Ok(value) => {
                    let id = match value.get("id") {
                        Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
                        _ => Value::Null,
                    };
                    answer(id, -32600, format!("Invalid request: {e}"));
                }
            },
        }
    }
}

/// Discard input up to and including the next newline.
fn skip_rest_of_line(input: &mut impl BufRead) -> io::Result<()> {
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                input.consume(n);
            }
        }
    }
}
