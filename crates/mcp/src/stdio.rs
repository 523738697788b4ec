//! MCP over stdio: newline-delimited JSON-RPC, each line checked before
//! the MCP SDK reads it.

use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::server::McpServer;
use crate::wire::{MAX_MESSAGE_BYTES, WireError, check_message, leading_id};

/// The capacity of the in-process pipe between the line checker and the SDK.
const PIPE_BYTES: usize = 1 << 16;

/// Serving stopped before the client closed its side.
#[derive(Debug, thiserror::Error)]
#[error("the stdio session failed: {0}")]
pub struct StdioError(String);

/// Serves `server` on this process's stdin and stdout until stdin closes.
pub async fn serve_stdio(server: McpServer) -> Result<(), StdioError> {
    serve_lines(server, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves `server` over any pair of byte streams carrying one JSON-RPC
/// message per line, until `input` ends.
///
/// A line longer than [`MAX_MESSAGE_BYTES`], not JSON, or repeating a key
/// in one object never reaches the SDK: it is answered with a JSON-RPC
/// error line (its `id` when one can be read), and the session goes on.
pub async fn serve_lines<R, W>(server: McpServer, input: R, output: W) -> Result<(), StdioError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let (from_sdk, mut to_sdk) = tokio::io::split(ours);
    let (lines, mut outgoing) = mpsc::channel::<Vec<u8>>(64);

    // One writer, so a refusal is never written into the middle of a
    // message of the SDK's.
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = outgoing.recv().await {
            output.write_all(&line).await?;
            output.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });

    let sdk_lines = lines.clone();
    let relay = tokio::spawn(async move {
        let mut from_sdk = BufReader::new(from_sdk);
        loop {
            let mut line = Vec::new();
            if from_sdk.read_until(b'\n', &mut line).await? == 0 {
                return Ok::<_, std::io::Error>(());
            }
            if sdk_lines.send(line).await.is_err() {
                return Ok(());
            }
        }
    });

    let checker = tokio::spawn(async move {
        let mut input = BufReader::new(input);
        loop {
            let mut line = Vec::new();
            // At most one byte past the bound is read into memory; the
            // rest of an oversized line is skipped below.
            let limit = MAX_MESSAGE_BYTES as u64 + 2;
            let read = (&mut input)
                .take(limit)
                .read_until(b'\n', &mut line)
                .await?;
            if read == 0 {
                // The client closed its side: so does the SDK's input.
                to_sdk.shutdown().await?;
                return Ok::<_, std::io::Error>(());
            }
            let complete = line.last() == Some(&b'\n');
            let message = trim_line_end(&line);
            if message.len() > MAX_MESSAGE_BYTES {
                if !complete {
                    skip_rest_of_line(&mut input).await?;
                }
                let mut refusal = WireError::TooLarge.response(b"");
                // Answer the request's own id when its start names it, so
                // the client is not left waiting for an answer.
                if let (Some(id), Some(object)) = (leading_id(message), refusal.as_object_mut()) {
                    object.insert("id".to_owned(), id);
                }
                let _ = lines.send(json_line(&refusal)).await;
                continue;
            }
            if message.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match check_message(message) {
                Ok(()) => {
                    to_sdk.write_all(message).await?;
                    to_sdk.write_all(b"\n").await?;
                }
                Err(error) => {
                    let _ = lines.send(json_line(&error.response(message))).await;
                }
            }
        }
    });

    let service = server
        .serve(theirs)
        .await
        .map_err(|e| StdioError(e.to_string()))?;
    let waited = service.waiting().await;
    checker.abort();
    let _ = relay.await;
    let _ = writer.await;
    waited.map(|_| ()).map_err(|e| StdioError(e.to_string()))
}

fn trim_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

async fn skip_rest_of_line<R: AsyncRead + Unpin>(input: &mut BufReader<R>) -> std::io::Result<()> {
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(());
        }
        if let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            input.consume(end + 1);
            return Ok(());
        }
        let all = buffer.len();
        input.consume(all);
    }
}

fn json_line(value: &serde_json::Value) -> Vec<u8> {
    let mut line = value.to_string().into_bytes();
    line.push(b'\n');
    line
}
