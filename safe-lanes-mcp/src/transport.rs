//! Newline-delimited JSON-RPC over stdin/stdout that answers every unusable line, and bounds
//! what one client can make the server hold.
//!
//! rmcp's stdio transport drops a line that is not JSON without a word. This one answers it as
//! JSON-RPC asks: `-32700` (parse error) for a line that is not JSON, `-32600` (invalid request)
//! for JSON that is not a message or a line over [`Limits::max_line`], with the request's `id`
//! when it has one (for an over-long line, when the part read shows it: [`crate::prefix`]),
//! and `-32602` (invalid params) for a method this server answers whose params do not parse
//! (rmcp would take it for an unknown method). Blank lines are skipped.
//!
//! # Bounds
//!
//! - **One message**: a line is read into memory only up to [`Limits::max_line`] bytes; the
//!   rest of a longer line is skipped in small pieces and the line is answered `-32600`, so no
//!   line is ever buffered whole past the limit.
//! - **Requests in flight**: a request counts from the moment it is read until its answer is
//!   written. At most [`MAX_IN_FLIGHT`] requests, and at most [`Limits::in_flight_bytes`] bytes
//!   of their lines, are in flight at once; a request beyond either is answered at once with
//!   `-32000` ("server busy", with its `id`) and never reaches the server. The reader never
//!   waits for the server, so pings and cancellations are read even when it is busy.
//! - **Duplicate ids**: a request whose `id` is still in flight is answered `-32600`.
//! - **Cancellation**: `notifications/cancelled` for a request in flight is handed to the tool
//!   through [`Cancels`] (the tool stops its work: a command's process group is killed, a
//!   save publishes nothing), not to rmcp; the request keeps its place among the requests in
//!   flight until the tool has returned, and its answer is then dropped instead of written, as
//!   the cancellation asks. A client cannot free a place by cancelling work that still runs.
//!
//! Memory held for requests is therefore about [`Limits::in_flight_bytes`] at most, plus one
//! line being read.
//!
//! # One thread
//!
//! Standard input is read on the runtime's own thread, as it becomes readable (a pipe or a
//! socket, which an MCP client makes for the server alone, is made non-blocking; a terminal is
//! never changed), and every answer is written there too, each line in a single `write`. A
//! call then costs no hand-off between threads unless its tool needs the blocking pool. Where
//! standard input cannot be polled (a regular file), one plain thread reads it instead.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};

use futures::{Sink, Stream};
use rmcp::model::{
    CallToolRequestMethod, CallToolRequestParams, ClientJsonRpcMessage, ClientNotification,
    ClientRequest, ConstString, CustomRequest, GetExtensions, InitializeRequestParams,
    InitializeResultMethod, JsonRpcMessage, ListToolsRequestMethod, PaginatedRequestParams,
    PingRequestMethod, RequestId, ServerJsonRpcMessage,
};
use rustix::fs::FileType;
use safe_lanes::Control;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::unix::pipe;

use crate::lines::{Line, Lines};

/// The most requests in flight at once.
pub(crate) const MAX_IN_FLIGHT: usize = 32;
/// Parsed messages waiting for the server's loop (which takes them as fast as they come).
const QUEUE: usize = 4;
/// Room in a line for everything but the content of a request.
const LINE_OVERHEAD: u64 = 1 << 20;

/// The JSON-RPC error for a request beyond the bounds (implementation-defined server error).
const BUSY: i64 = -32000;

/// How much one client can make the server hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The longest line read.
    pub(crate) max_line: usize,
    /// The most bytes of request lines in flight at once.
    pub(crate) in_flight_bytes: usize,
}

impl Limits {
    /// The limits of a server whose content cap (`--max-bytes`) is `max_bytes`: a line may hold
    /// twice that (the content as base64 is 4/3 of it; as JSON text with escapes, more) and
    /// 1 MiB for the rest of the request; two such lines may be in flight at once.
    pub(crate) fn for_content_cap(max_bytes: u64) -> Self {
        let line = max_bytes.saturating_mul(2).saturating_add(LINE_OVERHEAD);
        let max_line = usize::try_from(line).unwrap_or(usize::MAX);
        Self {
            max_line,
            in_flight_bytes: max_line.saturating_mul(2),
        }
    }
}

/// The (sink, stream) pair rmcp serves over, on this process's stdin and stdout, and the
/// stdout thread: join it after the service ends so the last answers are written.
pub(crate) fn stdio(
    limits: Limits,
    cancels: Cancels,
) -> io::Result<(
    impl Sink<ServerJsonRpcMessage, Error = io::Error> + Send + Unpin + 'static,
    impl Stream<Item = ClientJsonRpcMessage> + Send + Unpin + 'static,
)> {
    let out = Out::default();
    let (to_server, messages) = tokio::sync::mpsc::channel::<ClientJsonRpcMessage>(QUEUE);
    let in_flight = Arc::new(Mutex::new(InFlight::default()));
    let reader = Reader {
        limits,
        to_server,
        out: out.clone(),
        in_flight: Arc::clone(&in_flight),
        cancels: cancels.clone(),
    };
    match polled_stdin() {
        Some(input) => {
            tokio::spawn(reader.read_polled(input));
        }
        None => {
            std::thread::Builder::new()
                .name("stdin".into())
                .spawn(move || reader.read_blocking(io::stdin().lock()))?;
        }
    }
    let sink = Box::pin(futures::sink::unfold(
        (out, in_flight, cancels),
        |(out, in_flight, cancels), message: ServerJsonRpcMessage| async move {
            let answered = match &message {
                JsonRpcMessage::Response(response) => Some(&response.id),
                JsonRpcMessage::Error(error) => error.id.as_ref(),
                _ => None,
            };
            if let Some(id) = answered {
                cancels.forget(id);
            }
            let cancelled = answered.is_some_and(|id| lock(&in_flight).finish(id));
            if !cancelled {
                out.line(serde_json::to_vec(&message).map_err(io::Error::other)?)?;
            }
            Ok::<_, io::Error>((out, in_flight, cancels))
        },
    ));
    let stream = Box::pin(futures::stream::unfold(
        messages,
        |mut messages| async move { messages.recv().await.map(|m| (m, messages)) },
    ));
    Ok((sink, stream))
}

/// Standard output, shared by the answers of the server and those of the reader.
#[derive(Clone, Debug, Default)]
struct Out(Arc<Mutex<()>>);

impl Out {
    /// Write `line` and a newline with one `write`.
    fn line(&self, mut line: Vec<u8>) -> io::Result<()> {
        line.push(b'\n');
        let _one_at_a_time = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut stdout = io::stdout().lock();
        stdout.write_all(&line)?;
        stdout.flush()
    }
}

/// Standard input, read on the runtime's thread (module docs), when it can be polled: a pipe
/// or a socket, which an MCP client makes for the server alone.
type PolledStdin = Box<dyn AsyncRead + Send + Unpin>;

/// Standard input as a [`PolledStdin`], or `None` (a regular file, a terminal), which a plain
/// thread then reads. It is made non-blocking: the client made the pipe or socket for this
/// server; a terminal, which the server may share with a shell, is never changed.
fn polled_stdin() -> Option<PolledStdin> {
    let stdin = io::stdin().as_fd().try_clone_to_owned().ok()?;
    let kind = FileType::from_raw_mode(rustix::fs::fstat(&stdin).ok()?.st_mode);
    match kind {
        FileType::Fifo => pipe::Receiver::from_owned_fd(stdin)
            .ok()
            .map(|pipe| Box::new(pipe) as PolledStdin),
        FileType::Socket => {
            let socket = std::os::unix::net::UnixStream::from(stdin);
            socket.set_nonblocking(true).ok()?;
            let socket = tokio::net::UnixStream::from_std(socket).ok()?;
            Some(Box::new(socket))
        }
        _ => None,
    }
}

/// How much is read from standard input at a time.
const CHUNK: usize = 64 * 1024;

/// The requests read and not yet answered.
#[derive(Debug, Default)]
struct InFlight {
    requests: HashMap<RequestId, Pending>,
    bytes: usize,
}

#[derive(Debug)]
struct Pending {
    /// The length of its line.
    bytes: usize,
    /// The client cancelled it: its answer is dropped.
    cancelled: bool,
}

/// Why a request was not let in.
enum Refused {
    Busy,
    DuplicateId,
}

impl InFlight {
    /// Count a request of `bytes` bytes in, or say why not.
    fn admit(&mut self, id: &RequestId, bytes: usize, limits: Limits) -> Result<(), Refused> {
        if self.requests.contains_key(id) {
            return Err(Refused::DuplicateId);
        }
        if self.requests.len() >= MAX_IN_FLIGHT
            || self.bytes.saturating_add(bytes) > limits.in_flight_bytes
        {
            return Err(Refused::Busy);
        }
        self.bytes += bytes;
        self.requests.insert(
            id.clone(),
            Pending {
                bytes,
                cancelled: false,
            },
        );
        Ok(())
    }

    /// Mark a request in flight as cancelled; whether it was in flight.
    fn cancel(&mut self, id: &RequestId) -> bool {
        self.requests
            .get_mut(id)
            .map(|pending| pending.cancelled = true)
            .is_some()
    }

    /// Count a request out as it is answered; whether its answer is to be dropped.
    fn finish(&mut self, id: &RequestId) -> bool {
        match self.requests.remove(id) {
            Some(pending) => {
                self.bytes -= pending.bytes;
                pending.cancelled
            }
            None => false,
        }
    }
}

fn lock(in_flight: &Mutex<InFlight>) -> std::sync::MutexGuard<'_, InFlight> {
    in_flight.lock().unwrap_or_else(|p| p.into_inner())
}

/// The stdin side: reads lines, answers the unusable ones, passes the rest on.
struct Reader {
    limits: Limits,
    to_server: tokio::sync::mpsc::Sender<ClientJsonRpcMessage>,
    out: Out,
    in_flight: Arc<Mutex<InFlight>>,
    cancels: Cancels,
}

impl Reader {
    /// Answer a line with a JSON-RPC error.
    fn answer(&self, id: Value, code: i64, message: String) {
        tracing::debug!(code, %message, "answering a line without the server");
        let response =
            json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } });
        let _ = self.out.line(response.to_string().into_bytes());
    }

    /// Read standard input on the runtime's thread until it ends (or the server is gone).
    async fn read_polled(self, mut input: PolledStdin) {
        let mut lines = Lines::new(self.limits.max_line);
        let mut buf = vec![0u8; CHUNK];
        let mut messages = Vec::new();
        loop {
            let n = input.read(&mut buf).await.unwrap_or(0);
            let chunk = &buf[..n];
            let mut take = |line| messages.extend(self.take(line));
            if n == 0 {
                std::mem::replace(&mut lines, Lines::new(0)).finish(&mut take);
            } else {
                lines.feed(chunk, &mut take);
            }
            for message in messages.drain(..) {
                if self.to_server.send(message).await.is_err() {
                    return;
                }
            }
            if n == 0 {
                return;
            }
        }
    }

    /// Read standard input on a thread of its own until it ends (or the server is gone).
    fn read_blocking(self, mut input: impl Read) {
        let mut lines = Lines::new(self.limits.max_line);
        let mut buf = vec![0u8; CHUNK];
        let mut messages = Vec::new();
        loop {
            let n = match input.read(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                read => read.unwrap_or(0),
            };
            let mut take = |line| messages.extend(self.take(line));
            if n == 0 {
                std::mem::replace(&mut lines, Lines::new(0)).finish(&mut take);
            } else {
                lines.feed(&buf[..n], &mut take);
            }
            for message in messages.drain(..) {
                if self.to_server.blocking_send(message).is_err() {
                    return;
                }
            }
            if n == 0 {
                return;
            }
        }
    }

    /// The message a line holds, if it goes on to the server; every other line is answered.
    fn take(&self, line: Line) -> Option<ClientJsonRpcMessage> {
        let line = match line {
            Line::Whole(line) => line,
            Line::TooLong(id) => {
                // Answered with its id when the part read shows it, so the request is not
                // left waiting.
                let max = self.limits.max_line;
                let why = format!("Invalid request: the line is longer than {max} bytes");
                self.answer(id, -32600, why);
                return None;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let bytes = line.len();
        let (line, spilled) = crate::spill::lift(line);
        let message = match serde_json::from_slice::<ClientJsonRpcMessage>(&line) {
            Ok(mut message) => {
                if let (Some(spilled), JsonRpcMessage::Request(request)) = (spilled, &mut message) {
                    request.request.extensions_mut().insert(spilled);
                }
                message
            }
            Err(e) => {
                match serde_json::from_slice::<Value>(&line) {
                    Err(_) => self.answer(Value::Null, -32700, format!("Parse error: {e}")),
                    Ok(value) => {
                        let id = match value.get("id") {
                            Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
                            _ => Value::Null,
                        };
                        self.answer(id, -32600, format!("Invalid request: {e}"));
                    }
                }
                return None;
            }
        };
        self.admit(&message, bytes).then_some(message)
    }

    /// Whether `message` goes on to the server; answers it when it does not.
    fn admit(&self, message: &ClientJsonRpcMessage, bytes: usize) -> bool {
        match message {
            JsonRpcMessage::Request(request) => {
                let id = || serde_json::to_value(&request.id).unwrap_or(Value::Null);
                if let Some(why) = malformed_params(&request.request) {
                    self.answer(id(), -32602, format!("Invalid params: {why}"));
                    return false;
                }
                let refused = lock(&self.in_flight).admit(&request.id, bytes, self.limits);
                match refused {
                    Ok(()) => true,
                    Err(Refused::Busy) => {
                        self.answer(
                            id(),
                            BUSY,
                            format!(
                                "Server busy: {MAX_IN_FLIGHT} requests (or {} bytes of them) \
                                 are in flight; send this one again once one is answered",
                                self.limits.in_flight_bytes
                            ),
                        );
                        false
                    }
                    Err(Refused::DuplicateId) => {
                        self.answer(
                            id(),
                            -32600,
                            "Invalid request: a request with this id is still in flight".into(),
                        );
                        false
                    }
                }
            }
            JsonRpcMessage::Notification(notification) => match &notification.notification {
                ClientNotification::CancelledNotification(cancelled) => {
                    let id = cancelled.params.request_id.as_ref();
                    let in_flight = id.filter(|id| lock(&self.in_flight).cancel(id));
                    // A cancellation of a request in flight goes to its tool, not to rmcp
                    // (which would drop the answer the place waits for): see the module docs.
                    if let Some(id) = in_flight {
                        self.cancels.cancel(id);
                    }
                    in_flight.is_none()
                }
                _ => true,
            },
            _ => true,
        }
    }
}

/// Why the params of a request for a method this server answers do not parse, if they do not.
/// rmcp takes such a request (`tools/call` whose `arguments` is a string, say) for a custom
/// method, which would be answered "method not found"; the method is known, its params are
/// not valid (`-32602`).
fn malformed_params(request: &ClientRequest) -> Option<String> {
    fn why<T: serde::de::DeserializeOwned>(custom: &CustomRequest) -> String {
        match custom.params_as::<T>() {
            Err(e) => e.to_string(),
            Ok(None) => "the params are missing".to_owned(),
            Ok(Some(_)) => "the params do not match the method".to_owned(),
        }
    }
    let ClientRequest::CustomRequest(custom) = request else {
        return None;
    };
    match custom.method.as_str() {
        CallToolRequestMethod::VALUE => Some(why::<CallToolRequestParams>(custom)),
        InitializeResultMethod::VALUE => Some(why::<InitializeRequestParams>(custom)),
        ListToolsRequestMethod::VALUE => Some(why::<PaginatedRequestParams>(custom)),
        PingRequestMethod::VALUE => Some("ping takes no params but `_meta`".to_owned()),
        _ => None,
    }
}

/// The requests in flight the client cancelled, shared by the transport (which reads the
/// cancellations) and the tools (which stop their work when told).
#[derive(Clone, Debug, Default)]
pub(crate) struct Cancels(Arc<Mutex<HashMap<RequestId, Watched>>>);

#[derive(Debug)]
enum Watched {
    /// Cancelled before its tool started watching.
    Cancelled,
    /// A tool's work, stopped on cancellation.
    Running(Control),
}

impl Cancels {
    /// Stop `control` when the client cancels the request `id` (at once, if it already has).
    /// The watch ends when the request is answered.
    pub(crate) fn watch(&self, id: &RequestId, control: &Control) {
        let mut map = self.lock();
        if let Some(Watched::Cancelled) = map.get(id) {
            control.stop(CANCELLED);
        }
        map.insert(id.clone(), Watched::Running(control.clone()));
    }

    /// The client cancelled the request `id`, which is in flight.
    fn cancel(&self, id: &RequestId) {
        match self.lock().entry(id.clone()) {
            Entry::Occupied(entry) => {
                if let Watched::Running(control) = entry.get() {
                    control.stop(CANCELLED);
                }
            }
            Entry::Vacant(entry) => {
                entry.insert(Watched::Cancelled);
            }
        }
    }

    /// The client went away: stop every request's work still running (each records how it
    /// ended as it returns).
    pub(crate) fn stop_all(&self, why: &str) {
        for watched in self.lock().values() {
            if let Watched::Running(control) = watched {
                control.stop(why);
            }
        }
    }

    /// The request `id` is answered: nothing is left to stop.
    fn forget(&self, id: &RequestId) {
        self.lock().remove(id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Watched>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why cancelled work stopped.
const CANCELLED: &str = "cancelled by the client";

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: i64) -> RequestId {
        RequestId::Number(n)
    }

    #[test]
    fn places_are_counted_in_and_out_and_a_cancelled_one_is_kept_until_it_ends() {
        let limits = Limits::for_content_cap(1000);
        let mut in_flight = InFlight::default();
        for n in 0..MAX_IN_FLIGHT as i64 {
            assert!(in_flight.admit(&id(n), 10, limits).is_ok());
        }
        assert!(matches!(
            in_flight.admit(&id(99), 10, limits),
            Err(Refused::Busy)
        ));
        assert!(matches!(
            in_flight.admit(&id(3), 10, limits),
            Err(Refused::DuplicateId)
        ));
        // Cancelling keeps the place; the answer frees it and is to be dropped.
        assert!(in_flight.cancel(&id(3)));
        assert!(matches!(
            in_flight.admit(&id(99), 10, limits),
            Err(Refused::Busy)
        ));
        assert!(in_flight.finish(&id(3)));
        assert!(in_flight.admit(&id(99), 10, limits).is_ok());
        // An answer to something not in flight changes nothing.
        assert!(!in_flight.finish(&id(1000)));
        assert!(!in_flight.cancel(&id(1000)));
        for n in 0..MAX_IN_FLIGHT as i64 {
            in_flight.finish(&id(n));
        }
        in_flight.finish(&id(99));
        assert_eq!((in_flight.requests.len(), in_flight.bytes), (0, 0));
    }

    #[test]
    fn bytes_in_flight_are_bounded_too() {
        let limits = Limits::for_content_cap(1000);
        assert_eq!(limits.max_line, 2000 + (1 << 20));
        let mut in_flight = InFlight::default();
        assert!(in_flight.admit(&id(1), limits.max_line, limits).is_ok());
        assert!(in_flight.admit(&id(2), limits.max_line, limits).is_ok());
        assert!(matches!(
            in_flight.admit(&id(3), 1, limits),
            Err(Refused::Busy)
        ));
        assert!(!in_flight.finish(&id(1)));
        assert!(in_flight.admit(&id(3), 1, limits).is_ok());
    }
}
