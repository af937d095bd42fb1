//! A connection that ends after a stretch of silence. hyper closes an HTTP/1 connection that does not send a whole
//! request head in time, but nothing ends an HTTP/2 connection that goes quiet, nor one whose client stops reading
//! an answer: on the pod network such clients would keep the servers' connections (and their memory) for ever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `inner`, failing with `TimedOut` when its first byte does not come within `first`, or once no byte went in or out
/// for `limit`.
pub struct Idle<T> {
    inner: T,
    limit: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<T> Idle<T> {
    pub fn new(inner: T, first: Duration, limit: Duration) -> Idle<T> {
        Idle {
            inner,
            limit,
            deadline: Box::pin(tokio::time::sleep(first)),
        }
    }

    fn active(&mut self) {
        let limit = self.limit;
        self.deadline.as_mut().reset(Instant::now() + limit);
    }

    /// Pending while the connection may stay silent; the error once it has been silent too long.
    fn poll_silence<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no data for {:?}", self.limit),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Idle<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.active();
                }
                Poll::Ready(result)
            }
            Poll::Pending => this.poll_silence(cx),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Idle<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write(cx, data) {
            Poll::Ready(Ok(written)) => {
                if written > 0 {
                    this.active();
                }
                Poll::Ready(Ok(written))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
            // A client that does not read what it asked for: its answer waits in our buffers.
            Poll::Pending => this.poll_silence(cx),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_connection_whose_first_byte_does_not_come_fails_at_the_first_deadline() {
        let (near, _far) = tokio::io::duplex(64);
        let mut idle = Idle::new(near, Duration::from_millis(100), Duration::from_secs(60));
        let started = std::time::Instant::now();
        let mut buf = [0u8; 8];
        let err = idle.read(&mut buf).await.expect_err("silent");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn data_keeps_a_connection_alive() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut idle = Idle::new(near, Duration::from_millis(200), Duration::from_millis(200));
        tokio::spawn(async move {
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if far.write_all(b"x").await.is_err() {
                    return;
                }
            }
        });
        let mut buf = [0u8; 1];
        for _ in 0..5 {
            idle.read_exact(&mut buf).await.expect("a byte every 100 ms");
        }
    }

    #[tokio::test]
    async fn a_client_that_does_not_read_fails_the_writes_after_the_limit() {
        let (near, _far) = tokio::io::duplex(16);
        let mut idle = Idle::new(near, Duration::from_millis(100), Duration::from_millis(100));
        let err = idle.write_all(&[0u8; 1024]).await.expect_err("never read");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}
