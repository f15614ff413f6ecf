//! The exporter's HTTP/1.x, only what a scraper needs: a request head parsed (`httparse`) up to
//! a size limit, GET and HEAD answered, everything else refused. No request body is ever read
//! or waited for (`Expect: 100-continue` is not honoured) and every answer closes the
//! connection, so a client can never make the server wait for bytes it may never send.
//! The sockets are handled by [`super::http_server`].

use std::sync::Arc;

/// Most bytes of a request head (request line and header lines) kept per connection; a longer
/// head is answered 431.
pub const HEADER_LIMIT_BYTES: usize = 8 * 1024;

/// Most header lines in a request head; more are answered 431.
const MAX_HEADER_LINES: usize = 64;

/// The methods answered; the `Allow` header of a 405 names them.
const ALLOWED_METHODS: &str = "GET, HEAD";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    /// As GET, without the body.
    Head,
}

/// A request the handler answers: its method, target (path and query, as sent) and the media
/// types it accepts (its `Accept` header lines, joined), for content negotiation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    pub target: String,
    pub accept: Option<String>,
}

/// What the bytes of a request head received so far amount to.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// More bytes are needed, and the limit is not reached yet.
    Partial,
    /// A complete GET or HEAD, for the handler.
    Request(Request),
    /// Answered without the handler: a malformed head (400), another method (405), a head over
    /// the limits (431).
    Refused(Response),
}

/// Parse the head in `received` (the bytes of the connection so far, at most `limit_bytes`).
pub fn parse_head(received: &[u8], limit_bytes: usize) -> Parsed {
    let mut header_lines = [httparse::EMPTY_HEADER; MAX_HEADER_LINES];
    let mut request = httparse::Request::new(&mut header_lines);
    match request.parse(received) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) if received.len() >= limit_bytes => {
            let message = format!("request head over {limit_bytes} bytes\n");
            return Parsed::Refused(Response::text(Status::HeadTooLarge, &message));
        }
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(httparse::Error::TooManyHeaders) => {
            let message = format!("more than {MAX_HEADER_LINES} header lines\n");
            return Parsed::Refused(Response::text(Status::HeadTooLarge, &message));
        }
        Err(e) => return Parsed::Refused(Response::text(Status::BadRequest, &format!("malformed request: {e}\n"))),
    }
    let method = match request.method {
        Some("GET") => Method::Get,
        Some("HEAD") => Method::Head,
        _ => return Parsed::Refused(Response::text(Status::MethodNotAllowed, "only GET and HEAD are answered\n")),
    };
    let accept: Vec<&str> = request
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("accept"))
        .filter_map(|h| std::str::from_utf8(h.value).ok())
        .collect();
    let accept = (!accept.is_empty()).then(|| accept.join(","));
    Parsed::Request(Request { method, target: request.path.unwrap_or("/").to_string(), accept })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    HeadTooLarge,
    Internal,
    Unavailable,
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::HeadTooLarge => 431,
            Status::Internal => 500,
            Status::Unavailable => 503,
        }
    }

    fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::BadRequest => "Bad Request",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::HeadTooLarge => "Request Header Fields Too Large",
            Status::Internal => "Internal Server Error",
            Status::Unavailable => "Service Unavailable",
        }
    }
}

/// An answer. The body is shared: every request that coalesced on one scrape sends the same
/// bytes without a copy each.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: Status,
    pub content_type: &'static str,
    pub body: Arc<[u8]>,
}

impl Response {
    /// A plain-text answer, prefixed with the program's name so a person reading it knows who
    /// answered.
    pub fn text(status: Status, message: &str) -> Response {
        let body = format!("pcieperf exporter: {message}");
        Response { status, content_type: "text/plain; charset=utf-8", body: Arc::from(body.into_bytes()) }
    }

    /// The status line and headers. `Content-Length` is the body's length for HEAD too.
    pub fn head_bytes(&self) -> Vec<u8> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status.code(),
            self.status.reason(),
            self.content_type,
            self.body.len()
        );
        if self.status == Status::MethodNotAllowed {
            head.push_str(&format!("Allow: {ALLOWED_METHODS}\r\n"));
        }
        head.push_str("\r\n");
        head.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_status(head: &[u8]) -> Status {
        match parse_head(head, HEADER_LIMIT_BYTES) {
            Parsed::Refused(response) => response.status,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn get_and_head_are_requests_with_their_target() {
        let parsed = parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", HEADER_LIMIT_BYTES);
        assert_eq!(parsed, Parsed::Request(Request { method: Method::Get, target: "/metrics?x=1".into(), accept: None }));
        let parsed = parse_head(b"HEAD /metrics HTTP/1.0\r\n\r\n", HEADER_LIMIT_BYTES);
        assert_eq!(parsed, Parsed::Request(Request { method: Method::Head, target: "/metrics".into(), accept: None }));
    }

    #[test]
    fn a_head_without_its_blank_line_is_partial() {
        assert_eq!(parse_head(b"GET /metrics HTTP/1.1\r\nHost: a\r\n", HEADER_LIMIT_BYTES), Parsed::Partial);
        assert_eq!(parse_head(b"GE", HEADER_LIMIT_BYTES), Parsed::Partial);
    }

    #[test]
    fn other_methods_are_405_with_allow() {
        for method in ["POST", "PUT", "DELETE", "TRACE", "OPTIONS", "PATCH"] {
            let head = format!("{method} /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\n");
            let Parsed::Refused(response) = parse_head(head.as_bytes(), HEADER_LIMIT_BYTES) else { panic!("{method} was not refused") };
            assert_eq!(response.status.code(), 405, "{method}");
            let head = String::from_utf8(response.head_bytes()).unwrap();
            assert!(head.contains("\r\nAllow: GET, HEAD\r\n"), "{head}");
        }
    }

    #[test]
    fn a_head_that_reaches_the_limit_unfinished_is_431() {
        let mut head = b"GET /metrics HTTP/1.1\r\nX-Long: ".to_vec();
        head.resize(64, b'a');
        assert_eq!(parse_head(&head[..63], 64), Parsed::Partial);
        let Parsed::Refused(response) = parse_head(&head, 64) else { panic!("a full buffer was not refused") };
        assert_eq!(response.status, Status::HeadTooLarge);
        let lines: String = (0..MAX_HEADER_LINES + 1).map(|i| format!("X-{i}: v\r\n")).collect();
        assert_eq!(refused_status(format!("GET / HTTP/1.1\r\n{lines}\r\n").as_bytes()), Status::HeadTooLarge);
    }

    #[test]
    fn garbage_is_400() {
        assert_eq!(refused_status(b"\x16\x03\x01 hello\r\n\r\n"), Status::BadRequest);
    }

    #[test]
    fn the_head_states_length_and_close_and_head_requests_keep_the_length() {
        let response = Response::text(Status::NotFound, "metrics are at /metrics\n");
        let head = String::from_utf8(response.head_bytes()).unwrap();
        assert!(head.starts_with("HTTP/1.1 404 Not Found\r\n"), "{head}");
        assert!(head.contains(&format!("\r\nContent-Length: {}\r\n", response.body.len())), "{head}");
        assert!(head.contains("\r\nConnection: close\r\n") && head.ends_with("\r\n\r\n"), "{head}");
        assert!(!head.contains("Allow:"), "{head}");
    }
}
