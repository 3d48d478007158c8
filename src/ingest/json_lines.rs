//! Logs kept one JSON object per line by the container runtime or a log
//! shipper: Docker's json-file driver (`{"log":"…\n","stream":"stderr",
//! "time":"…"}`, as found under /var/lib/docker/containers), Fluent Bit and
//! Vector exports (`log`, `message`), JSON loggers (`msg`), GCP's
//! `textPayload`, and servers that log their children's output as JSON
//! (text-generation-inference's `fields.message`). The message is what the
//! program printed: it is turned back into plain lines, each led by the
//! entry's time, so every later stage reads them as it reads any log.
//!
//! A message of several lines (a child's whole stderr in one entry) becomes
//! several lines; cited line numbers count the decoded lines.

use std::io::{self, BufRead, BufReader, Read};

use serde_json::Value;

/// The longest entry decoded: beyond it the bytes pass through as they are.
const MAX_ENTRY: u64 = 64 << 20;

/// Keys that hold the printed text, tried in this order.
const MESSAGE_KEYS: &[&str] = &["log", "message", "msg", "textPayload"];
/// Keys that hold the entry's time.
const TIME_KEYS: &[&str] = &["time", "timestamp", "@timestamp", "ts"];

/// Whether `head` (a file's first bytes) is a JSON-lines log: its first line
/// a whole JSON object holding printed text under a known key.
pub fn is_json_log(head: &[u8]) -> bool {
    let Some(end) = head.iter().position(|&b| b == b'\n') else {
        return false;
    };
    let first = head[..end].trim_ascii();
    first.starts_with(b"{")
        && serde_json::from_slice::<Value>(first)
            .ok()
            .is_some_and(|v| message_of(&v).is_some())
}

/// The printed text of one entry, if it has one.
fn message_of(v: &Value) -> Option<&str> {
    let obj = v.as_object()?;
    MESSAGE_KEYS
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
        .or_else(|| obj.get("fields")?.get("message")?.as_str())
}

fn time_of(v: &Value) -> Option<&str> {
    let obj = v.as_object()?;
    TIME_KEYS
        .iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
}

/// Reads a JSON-lines log as the plain text its entries hold.
pub struct JsonLogReader<R> {
    inner: BufReader<R>,
    line: Vec<u8>,
    out: Vec<u8>,
    pos: usize,
    /// The last text written ended its line: the next one starts a new
    /// line and gets the entry's time.
    at_line_start: bool,
}

impl<R: Read> JsonLogReader<R> {
    pub fn new(inner: R) -> Self {
        JsonLogReader {
            inner: BufReader::new(inner),
            line: Vec::new(),
            out: Vec::new(),
            pos: 0,
            at_line_start: true,
        }
    }

    /// Decodes the next entry into `out`; false at the end of the input.
    fn refill(&mut self) -> io::Result<bool> {
        self.line.clear();
        self.out.clear();
        self.pos = 0;
        // An entry is a line; a runaway one is read in bounded pieces and
        // passed on as they come (the line reader caps it downstream).
        if (&mut self.inner)
            .take(MAX_ENTRY)
            .read_until(b'\n', &mut self.line)?
            == 0
        {
            return Ok(false);
        }
        let entry = serde_json::from_slice::<Value>(self.line.trim_ascii()).ok();
        match entry
            .as_ref()
            .and_then(|v| Some((message_of(v)?, time_of(v), is_docker_entry(v))))
        {
            Some((text, time, docker)) => self.push_text(text, time, docker),
            // Not an entry (a line the shipper wrote as is): kept as is.
            None => {
                if !self.at_line_start {
                    self.out.push(b'\n');
                }
                self.out.extend_from_slice(&self.line);
                if !self.out.ends_with(b"\n") {
                    self.out.push(b'\n');
                }
                self.at_line_start = true;
            }
        }
        Ok(true)
    }

    /// Docker splits a long printed line over entries whose text does not
    /// end in a newline: they are joined, and only a line's first part is
    /// led by a time.
    fn push_text(&mut self, text: &str, time: Option<&str>, docker: bool) {
        for piece in text.split_inclusive('\n') {
            if self.at_line_start
                && let Some(t) = time
            {
                self.out.extend_from_slice(t.as_bytes());
                self.out.push(b' ');
            }
            self.out.extend_from_slice(piece.as_bytes());
            self.at_line_start = piece.ends_with('\n');
        }
        // An entry that is a whole line without its newline (loggers other
        // than Docker's print none): ended here.
        if !self.at_line_start && !text.is_empty() && !docker {
            self.out.push(b'\n');
            self.at_line_start = true;
        }
    }
}

/// Docker's json-file entries (`log` beside `stream`) are the only ones
/// that continue a line over entries; shippers that keep a `stream` field
/// (Vector's and Fluent Bit's Kubernetes sources) hold a whole line in
/// `message`.
fn is_docker_entry(v: &Value) -> bool {
    v.get("log").is_some_and(Value::is_string) && v.get("stream").is_some()
}

impl<R: Read> Read for JsonLogReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.out.len() {
            if !self.refill()? {
                if !self.at_line_start {
                    self.at_line_start = true;
                    self.out.clear();
                    self.out.push(b'\n');
                    self.pos = 0;
                    break;
                }
                return Ok(0);
            }
        }
        let n = buf.len().min(self.out.len() - self.pos);
        buf[..n].copy_from_slice(&self.out[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(input: &str) -> String {
        let mut out = String::new();
        JsonLogReader::new(input.as_bytes())
            .read_to_string(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn docker_json_file_entries_become_stamped_lines() {
        let log = "{\"log\":\"node1:1:2 [0] NCCL INFO x\\n\",\"stream\":\"stderr\",\"time\":\"2024-05-01T10:00:00.1Z\"}\n\
{\"log\":\"part one \",\"stream\":\"stderr\",\"time\":\"2024-05-01T10:00:01Z\"}\n\
{\"log\":\"and two\\n\",\"stream\":\"stderr\",\"time\":\"2024-05-01T10:00:01Z\"}\n";
        assert!(is_json_log(log.as_bytes()));
        assert_eq!(
            decode(log),
            "2024-05-01T10:00:00.1Z node1:1:2 [0] NCCL INFO x\n2024-05-01T10:00:01Z part one and two\n"
        );
    }

    #[test]
    fn a_message_of_several_lines_and_nested_fields_are_read() {
        let log = "{\"timestamp\":\"2024-02-13T22:19:07Z\",\"level\":\"ERROR\",\"fields\":{\"message\":\"Shard failed:\\n[E ProcessGroupNCCL.cpp:475] timeout\"}}\n";
        assert!(is_json_log(log.as_bytes()));
        assert_eq!(
            decode(log),
            "2024-02-13T22:19:07Z Shard failed:\n2024-02-13T22:19:07Z [E ProcessGroupNCCL.cpp:475] timeout\n"
        );
    }

    #[test]
    fn a_shippers_entries_with_a_stream_field_are_whole_lines_vector_0_3x() {
        let log = "{\"timestamp\": \"2025-03-11T01:55:03.2Z\", \"kubernetes\": {\"pod_name\": \"w-0\"}, \"stream\": \"stdout\", \"message\": \"first\"}\n\
{\"timestamp\": \"2025-03-11T01:55:04Z\", \"stream\": \"stdout\", \"message\": \"second\"}\n";
        assert!(is_json_log(log.as_bytes()));
        assert_eq!(
            decode(log),
            "2025-03-11T01:55:03.2Z first\n2025-03-11T01:55:04Z second\n"
        );
    }

    #[test]
    fn json_that_is_not_a_log_is_left_alone() {
        assert!(!is_json_log(b"{\"version\": \"2.4\", \"entries\": []}\n"));
        assert!(!is_json_log(b"{\n  \"log\": \"x\"\n}\n"));
        assert!(!is_json_log(b"plain text\n"));
    }

    #[test]
    fn lines_between_entries_are_kept() {
        let log = "{\"msg\":\"one\"}\nnot json\n{\"msg\":\"two\"}\n";
        assert_eq!(decode(log), "one\nnot json\ntwo\n");
    }
}
