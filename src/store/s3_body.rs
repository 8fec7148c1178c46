//! An upload's body from a file held in memory as chunks: each chunk sent as it lies, no copy into one
//! buffer, with its exact length (S3 wants a Content-Length) and rebuilt from the chunks on a retry.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use aws_sdk_s3::primitives::{ByteStream, SdkBody};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::encode::spool::Chunks;

/// The body of `chunks`: one piece as it is, several as a stream of them.
pub(super) fn body(chunks: Chunks) -> ByteStream {
    if let [one] = chunks.parts() {
        return ByteStream::from(one.clone());
    }
    ByteStream::new(SdkBody::retryable(move || SdkBody::from_body_1_x(ChunksBody::new(&chunks))))
}

struct ChunksBody {
    parts: std::vec::IntoIter<Bytes>,
    left: u64,
}

impl ChunksBody {
    fn new(chunks: &Chunks) -> Self {
        Self { parts: chunks.parts().to_vec().into_iter(), left: chunks.len() as u64 }
    }
}

impl Body for ChunksBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        Poll::Ready(this.parts.next().map(|part| {
            this.left -= part.len() as u64;
            Ok(Frame::data(part))
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::encode::spool::{Spool, SpoolData, SpoolOptions, CHUNK};

    #[tokio::test]
    async fn a_body_of_chunks_has_their_length_their_bytes_and_can_be_sent_again() {
        let whole: Vec<u8> = (0..2 * CHUNK as u32 + 5).map(|i| (i % 251) as u8).collect();
        let options = SpoolOptions { memory_threshold: 1 << 30, dir: ".".into(), usage: Default::default() };
        let mut spool = Spool::new(options);
        spool.write_all(&whole).unwrap();
        let sealed = spool.seal().unwrap();
        let SpoolData::Memory(chunks) = sealed.data() else { panic!("a spool under its threshold is in memory") };
        let (from, len) = (CHUNK - 3, CHUNK + 7);
        let part = chunks.slice(from, len);
        assert_eq!(part.parts().len(), 3);
        let sdk = body(part).into_inner();
        assert_eq!(sdk.content_length(), Some(len as u64));
        let again = sdk.try_clone().expect("a retry rebuilds the body");
        for body in [sdk, again] {
            let read = ByteStream::new(body).collect().await.unwrap().into_bytes();
            assert!(read.as_ref() == &whole[from..from + len]);
        }
    }
}
