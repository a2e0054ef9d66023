//! The gRPC codec of the generated service and client: tonic-prost's, except that
//! a message is decoded from one contiguous slice of the received bytes.
//!
//! tonic hands a decoder the message as a `DecodeBuf`, a window over its receive
//! buffer, and prost reads every varint, tag and string through that window's
//! `Buf` methods, each a few calls deep. The received message is always one
//! contiguous chunk, so it is decoded from a plain `&[u8]`, whose reads prost
//! inlines, and the window is then advanced past it. On `Observe` the server
//! thread ran 14,363 instructions an outcome before and 13,072 after, the
//! client's threads 7,507 and 6,015 (callgrind, `benches/observe.rs`).

use prost::Message;
use std::marker::PhantomData;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::Status;

/// tonic-prost's codec with [`SliceDecoder`] (the generated code names it: see `build.rs`).
#[derive(Debug, Clone)]
pub struct ReboundCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for ReboundCodec<T, U> {
    fn default() -> Self {
        ReboundCodec(PhantomData)
    }
}

impl<T, U> Codec for ReboundCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = tonic_prost::ProstEncoder<T>;
    type Decoder = SliceDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        tonic_prost::ProstEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        SliceDecoder(PhantomData)
    }
}

/// Decodes a message from the contiguous bytes tonic received it in.
#[derive(Debug, Clone)]
pub struct SliceDecoder<U>(PhantomData<U>);

impl<U: Message + Default> Decoder for SliceDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        use prost::bytes::Buf;
        let len = buf.remaining();
        let decoded = match buf.chunk().get(..len) {
            Some(bytes) => {
                let decoded = U::decode(bytes);
                // All of it, whatever the result: what is left would be read as the next message.
                buf.advance(len);
                decoded
            }
            // Not one chunk (tonic's receive buffer always is): through the window, as tonic-prost does.
            None => U::decode(buf),
        };
        // As tonic-prost reports a message that does not decode.
        decoded.map(Some).map_err(|e| Status::internal(e.to_string()))
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;
    use prost::bytes::Bytes;
    use std::collections::HashMap;
    use tonic::codec::Streaming;

    /// An outcome with every kind of field set: strings, numbers, optional numbers, an enum, a map.
    fn outcome(n: u32) -> pb::Outcome {
        pb::Outcome {
            session_id: format!("run-{n}"),
            call_id: "call-7".into(),
            tool: "search".into(),
            message: "HTTPSConnectionPool(host='api.example.com', port=443): Read timed out. (read timeout=30) é"
                .into(),
            exception_type: "requests.exceptions.ReadTimeout".into(),
            http_status: 429,
            grpc_code: Some(8),
            duration_ms: 30_001,
            cost: 0.25,
            headers: HashMap::from([("retry-after".into(), "2".into()), ("x-request-id".into(), "abc".into())]),
            kind: pb::OutcomeKind::Timeout as i32,
            ..Default::default()
        }
    }

    /// The bytes of a gRPC request body holding `messages`, each framed as on the wire.
    fn framed(messages: &[Vec<u8>]) -> Bytes {
        let mut body = Vec::new();
        for m in messages {
            body.push(0);
            body.extend_from_slice(&u32::try_from(m.len()).expect("small").to_be_bytes());
            body.extend_from_slice(m);
        }
        body.into()
    }

    /// What tonic's stream decodes from `body` with the decoder, in one chunk as a pipelined stream sends it.
    async fn decoded(body: Bytes) -> (Vec<pb::Outcome>, Option<Status>) {
        let body = http_body_util::Full::new(body);
        let mut stream = Streaming::new_request(SliceDecoder::<pb::Outcome>(PhantomData), body, None, None);
        let mut messages = Vec::new();
        loop {
            match stream.message().await {
                Ok(Some(m)) => messages.push(m),
                Ok(None) => return (messages, None),
                Err(status) => return (messages, Some(status)),
            }
        }
    }

    #[tokio::test]
    async fn messages_in_one_chunk_decode_one_after_the_other() {
        let sent: Vec<pb::Outcome> = (0..3).map(outcome).collect();
        let (got, error) = decoded(framed(&sent.iter().map(Message::encode_to_vec).collect::<Vec<_>>())).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(got, sent);
    }

    #[tokio::test]
    async fn a_message_that_does_not_decode_ends_the_stream_as_tonic_prost_ends_it() {
        let mut broken = outcome(1).encode_to_vec();
        broken.truncate(broken.len() - 3);
        let (got, error) = decoded(framed(&[outcome(0).encode_to_vec(), broken])).await;
        assert_eq!(got, vec![outcome(0)]);
        let error = error.expect("an error");
        assert_eq!(error.code(), tonic::Code::Internal, "{error:?}");
        let expected = pb::Outcome::decode(&outcome(1).encode_to_vec()[..outcome(1).encoded_len() - 3]).unwrap_err();
        assert_eq!(error.message(), expected.to_string());
    }
}
