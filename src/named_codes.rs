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
}

/// Where a code is written, and what ends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// grpc-go's `rpc error: code = Unavailable desc = ...`.
    Grpc,
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
const MARKS: [(&str, Form); 6] = [
    ("rpc error: code = ", Form::Grpc),
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
    let mut named = NamedCodes::default();
    for found in SEARCH.find_iter(text) {
        let rest = &text[found.end()..];
        match MARKS[found.pattern().as_usize()].1 {
            Form::Grpc if named.grpc.is_none() => named.grpc = grpc_code(rest),
            Form::Grpc => {}
            form if named.code.is_none() => named.code = code(form, rest),
            _ => {}
        }
        if named.grpc.is_some() && named.code.is_some() {
            break;
        }
    }
    named
}

/// The gRPC code named at the start of `rest`, but `Unknown`.
fn grpc_code(rest: &str) -> Option<i32> {
    let end = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
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
        Form::Grpc => return None,
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
        assert_eq!(both, NamedCodes { grpc: Some(7), code: Some("AccessDenied") });
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
    fn text_that_is_not_ascii_after_a_mark_does_not_panic() {
        for text in [
            "An error occurred (é",
            "api error é",
            "x\nCode: é\n",
            "MCP error é:",
            "rpc error: code = é",
            "MCP error -1é:",
        ] {
            let _ = named_codes(text);
        }
    }
}
