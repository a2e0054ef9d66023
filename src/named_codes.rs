//! The codes an error's text names. SDKs write the code of a failed call into the text of the error
//! they raise, and keep it as a field too, which a client may not read (the Python client does not
//! look into boto3's `ClientError.response` or azure-core's `HttpResponseError.error`), or which is
//! lost when an agent passes the error on as text. Read from the text, such a code counts as the
//! outcome's own when it sends none (see `Classifier::best`).
//!
//! One pass over the text finds every form's mark (it runs for each failure analysed afresh).

use aho_corasick::{AhoCorasick, MatchKind};
use std::sync::LazyLock;

/// The codes a text names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NamedCodes<'a> {
    /// The gRPC status code a grpc-go error string names: `rpc error: code = Unavailable desc = ...`.
    pub grpc: Option<i32>,
    /// The error code an SDK's text names, the first in the text.
    pub code: Option<&'a str>,
    /// The HTTP status a client library's text names: .NET's `HttpClient` (`EnsureSuccessStatusCode`,
    /// also PowerShell's `Invoke-WebRequest`) raises an `HttpRequestException` whose message is all that
    /// tells a refused status from a refused connection.
    pub http_status: Option<u16>,
}

/// Where a code is written, and what ends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// grpc-go's `rpc error: code = Unavailable desc = ...`; grpc-java's
    /// `StatusRuntimeException: UNAVAILABLE: io exception`.
    Grpc,
    /// .NET's `Response status code does not indicate success: 429 (Too Many Requests).`, or its resource
    /// key where a trimmed build left the texts out: `net_http_message_not_success_statuscode_reason, 404, Not Found`;
    /// the `Status: 402 (Payment Required)` line of System.ClientModel's `ClientResultException` (the
    /// OpenAI .NET SDK's) and Azure's `RequestFailedException`, after `Service request failed.`.
    Status,
    /// Ended by a byte: botocore's `An error occurred (ExpiredToken) when calling the ... operation`
    /// (boto3's `ClientError`, the AWS CLI), aws-sdk-go-v2's `... api error NoSuchKey: ...`.
    EndedBy(u8),
    /// A line of its own: azure-core's `Code: AuthorizationFailed` (its Resource Manager errors,
    /// after the message), azure-storage's `ErrorCode:BlobNotFound`.
    Line,
    /// The MCP TypeScript SDK's `MCP error -32602: ...` (its `McpError`, and what its servers send).
    JsonRpc,
}

/// Each form's mark, the text just before its code.
const MARKS: [(&str, Form); 12] = [
    ("rpc error: code = ", Form::Grpc),
    ("StatusRuntimeException: ", Form::Grpc),
    ("StatusException: ", Form::Grpc),
    ("does not indicate success: ", Form::Status),
    ("net_http_message_not_success_statuscode_reason, ", Form::Status),
    ("net_http_message_not_success_statuscode, ", Form::Status),
    ("\nStatus: ", Form::Status),
    ("An error occurred (", Form::EndedBy(b')')),
    ("api error ", Form::EndedBy(b':')),
    ("\nCode: ", Form::Line),
    ("\nErrorCode:", Form::Line),
    ("MCP error ", Form::JsonRpc),
];

/// gRPC's `UNKNOWN`: grpc-go gives it to every error that is not a status (a Go server's plain
/// error, the container runtime's as kubelet relays it), so the words after `desc =` say more than
/// it does (`code = Unknown desc = context deadline exceeded` is a timeout, not an internal error).
pub const GRPC_UNKNOWN: i32 = 2;

/// JSON-RPC's internal error, which the MCP SDKs give to any error a handler throws: its words say
/// more than it does, as gRPC's `Unknown`'s do.
const JSON_RPC_INTERNAL: &str = "-32603";

/// The codes `text` names, in one pass over it.
pub fn named_codes(text: &str) -> NamedCodes<'_> {
    // Leftmost-first, for its SIMD prefilter (Teddy): the standard semantics walk the automaton byte
    // by byte, about 2,000 instructions for a 200-byte message.
    static SEARCH: LazyLock<AhoCorasick> = LazyLock::new(|| {
        AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(MARKS.map(|(mark, _)| mark))
            .expect("the marks are tested")
    });
    let mut named = NamedCodes { grpc: leading_grpc_code(text), ..NamedCodes::default() };
    for found in SEARCH.find_iter(text) {
        let rest = &text[found.end()..];
        match MARKS[found.pattern().as_usize()].1 {
            Form::Grpc if named.grpc.is_none() => named.grpc = grpc_code(rest),
            Form::Grpc => {}
            Form::Status if named.http_status.is_none() => named.http_status = status(rest),
            Form::Status => {}
            form if named.code.is_none() => named.code = code(form, rest),
            _ => {}
        }
        if named.grpc.is_some() && named.code.is_some() && named.http_status.is_some() {
            break;
        }
    }
    named
}

/// The gRPC code a text begins with, written as grpc-java's `Status` writes it before its description
/// (`UNAVAILABLE: io exception`, the message of its `StatusRuntimeException`; Abseil's `Status` too):
/// the name in capitals and a colon. Not `UNKNOWN`, nor `OK`.
fn leading_grpc_code(text: &str) -> Option<i32> {
    let end = text.bytes().position(|b| !(b.is_ascii_uppercase() || b == b'_'))?;
    if !text[end..].starts_with(": ") {
        return None;
    }
    crate::classify::GRPC_CODE_NAMES[1..]
        .iter()
        .position(|name| *name == &text[..end])
        .map(|i| i as i32 + 1)
        .filter(|&code| code != GRPC_UNKNOWN)
}

/// The HTTP status written at the start of `rest`: three digits, 100 to 599, and no more.
fn status(rest: &str) -> Option<u16> {
    let digits = rest.get(..3)?;
    let alone = !rest[3..].starts_with(|c: char| c.is_ascii_digit());
    let status = digits.parse::<u16>().ok().filter(|s| (100..=599).contains(s))?;
    (alone && digits.bytes().all(|b| b.is_ascii_digit())).then_some(status)
}

/// The gRPC code named at the start of `rest` (`Unavailable`, `UNAVAILABLE`), but `Unknown`.
fn grpc_code(rest: &str) -> Option<i32> {
    let end = rest.find(|c: char| !(c.is_ascii_alphabetic() || c == '_')).unwrap_or(rest.len());
    crate::classify::grpc_code_from_name(&rest[..end]).filter(|&code| code != GRPC_UNKNOWN)
}

/// The code written in `form` at the start of `rest`, if it looks like one.
fn code(form: Form, rest: &str) -> Option<&str> {
    let code = match form {
        Form::EndedBy(end) => &rest[..rest.bytes().position(|b| b == end)?],
        Form::Line => rest[..rest.find(['\n', '\r']).unwrap_or(rest.len())].trim(),
        Form::JsonRpc => {
            let number = &rest[..rest.find(':')?];
            let digits = number.strip_prefix('-').unwrap_or(number);
            let fits = (1..=6).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit());
            return (fits && number != JSON_RPC_INTERNAL).then_some(number);
        }
        Form::Grpc | Form::Status => return None,
    };
    let fits = !code.is_empty()
        && code.len() <= 64
        && code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_');
    fits.then_some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(text: &str) -> Option<&str> {
        named_codes(text).code
    }

    #[test]
    fn each_sdks_form_gives_its_code() {
        // botocore's ClientError, aws-sdk-go-v2's operation error.
        assert_eq!(
            code_of("An error occurred (ExpiredToken) when calling the GetCallerIdentity operation: x"),
            Some("ExpiredToken")
        );
        assert_eq!(
            code_of("operation error S3: GetObject, https response error StatusCode: 404, api error NoSuchKey: x"),
            Some("NoSuchKey")
        );
        // azure-core's HttpResponseError from Resource Manager, and azure-storage's.
        assert_eq!(
            code_of("(AuthorizationFailed) The client 'x' does not have authorization\nCode: AuthorizationFailed\nMessage: The client"),
            Some("AuthorizationFailed")
        );
        assert_eq!(
            code_of(
                "The specified blob does not exist.\nRequestId:r\nTime:t\nErrorCode:BlobNotFound\r\nContent: <?xml"
            ),
            Some("BlobNotFound")
        );
        // The MCP TypeScript SDK's McpError.
        assert_eq!(code_of("MCP error -32602: Invalid params"), Some("-32602"));
        assert_eq!(code_of("MCP error -32001: Request timed out"), Some("-32001"));
    }

    #[test]
    fn what_only_looks_like_a_code_is_none() {
        for text in [
            "An error occurred (Bad Code!) when calling",
            "An error occurred (unclosed",
            "api error with no colon",
            "Code: at the very start is no line of its own",
            "x\nCode: two words",
            "x\nCode: ",
            "MCP error unknown: no number",
            "MCP error -1234567: too long",
            "MCP error -32602 without a colon",
            "nothing at all",
        ] {
            assert_eq!(code_of(text), None, "{text:?}");
        }
        // JSON-RPC's internal error is any error a handler threw: its words decide.
        assert_eq!(code_of("MCP error -32603: connect ECONNREFUSED 127.0.0.1:8080"), None);
    }

    #[test]
    fn the_first_code_in_the_text_is_the_one_and_a_grpc_code_is_apart() {
        assert_eq!(code_of("api error NoSuchKey: then An error occurred (AccessDenied) when"), Some("NoSuchKey"));
        // A mark whose code does not fit leaves the next one its chance.
        assert_eq!(code_of("An error occurred (no way) when; api error NoSuchBucket: x"), Some("NoSuchBucket"));
        let both = named_codes("rpc error: code = PermissionDenied desc = An error occurred (AccessDenied) when");
        assert_eq!(both, NamedCodes { grpc: Some(7), code: Some("AccessDenied"), http_status: None });
    }

    #[test]
    fn a_grpc_code_is_read_by_its_name_but_unknown() {
        assert_eq!(named_codes("rpc error: code = PermissionDenied desc = no").grpc, Some(7));
        assert_eq!(named_codes("rpc error: code = DeadlineExceeded desc = x").grpc, Some(4));
        assert_eq!(named_codes("no code here").grpc, None);
        assert_eq!(named_codes("rpc error: code = Unknown desc = no").grpc, None);
        assert_eq!(named_codes("rpc error: code = ").grpc, None);
    }

    #[test]
    fn grpc_javas_status_is_read_by_its_name_in_capitals() {
        // grpc-java's StatusRuntimeException: its message, and its toString() in a text.
        assert_eq!(named_codes("UNAVAILABLE: io exception").grpc, Some(14));
        assert_eq!(named_codes("NOT_FOUND: collection orders").grpc, Some(5));
        assert_eq!(named_codes("io.grpc.StatusRuntimeException: RESOURCE_EXHAUSTED: Quota exceeded").grpc, Some(8));
        assert_eq!(named_codes("io.grpc.StatusException: PERMISSION_DENIED: no").grpc, Some(7));
        for text in [
            "UNKNOWN: whatever the handler threw",
            "OK: fine",
            "Unavailable: not in capitals at the start",
            "UNAVAILABLE without a colon",
            "ERROR: relation \"orders\" does not exist",
            "WARNING: UNAVAILABLE: not at the start",
        ] {
            assert_eq!(named_codes(text).grpc, None, "{text:?}");
        }
    }

    #[test]
    fn dotnets_refused_status_is_read_from_its_text() {
        // dotnet/runtime's HttpResponseMessage.EnsureSuccessStatusCode, with and without a reason
        // phrase, and as its resource keys where a trimmed build dropped the texts.
        let status = |text: &str| named_codes(text).http_status;
        assert_eq!(status("Response status code does not indicate success: 429 (Too Many Requests)."), Some(429));
        assert_eq!(status("Response status code does not indicate success: 404."), Some(404));
        assert_eq!(status("net_http_message_not_success_statuscode_reason, 401, Unauthorized"), Some(401));
        assert_eq!(status("net_http_message_not_success_statuscode, 503"), Some(503));
        // System.ClientModel's ClientResultException, Azure's RequestFailedException.
        assert_eq!(status("Service request failed.\nStatus: 402 (Payment Required)"), Some(402));
        assert_eq!(status("Service request failed.\nStatus: 529 ()\nErrorCode: overloaded"), Some(529));
        for text in [
            "Response status code does not indicate success: 4290 (no such status).",
            "Response status code does not indicate success: 99 (too low).",
            "Response status code does not indicate success: 600.",
            "Response status code does not indicate success: OK.",
            "Response status code does not indicate success: 42",
            "status 429",
            "Status: 429 at the very start is no line of its own",
            "x\nStatus: pending",
        ] {
            assert_eq!(status(text), None, "{text:?}");
        }
    }

    #[test]
    fn text_that_is_not_ascii_after_a_mark_does_not_panic() {
        for text in [
            "An error occurred (é",
            "api error é",
            "x\nCode: é\n",
            "MCP error é:",
            "rpc error: code = é",
            "MCP error -1é:",
            "does not indicate success: 4é",
            "does not indicate success: é",
            "StatusRuntimeException: é",
            "NOT_FOUNDé: x",
        ] {
            let _ = named_codes(text);
        }
    }
}
