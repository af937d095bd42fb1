//! A cap on the size of every answer a client reads. kube's client collects a whole body before decoding it (and
//! keeps the text of an error answer in its error), so a server that answers with hundreds of megabytes — a tenant's
//! workload apiserver that streams an endless Node list — would take the operator's memory with it (issue 23: 2.7
//! GiB). With this layer an answer announced larger than the cap fails before its body is read, and one that grows
//! past it fails at the frame that crosses it: at most the cap plus one frame is ever held per request.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tower::{BoxError, Layer, Service};

/// An answer ran past the cap.
#[derive(Debug, thiserror::Error)]
#[error("the answer is larger than {limit} bytes, more than CAPOV reads from this server")]
pub struct ResponseTooLarge {
    pub limit: u64,
}

impl ResponseTooLarge {
    /// Whether `err` is this cap (kube wraps it as a service error).
    pub fn caused(err: &kube::Error) -> bool {
        matches!(err, kube::Error::Service(source) if source.downcast_ref::<ResponseTooLarge>().is_some())
    }
}

/// Fails every answer larger than `.0` bytes.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimitLayer(pub u64);

impl<S> Layer<S> for BodyLimitLayer {
    type Service = BodyLimit<S>;

    fn layer(&self, inner: S) -> BodyLimit<S> {
        BodyLimit { inner, limit: self.0 }
    }
}

#[derive(Clone, Debug)]
pub struct BodyLimit<S> {
    inner: S,
    limit: u64,
}

type Answer<B> = http::Response<LimitedBody<B>>;

impl<S, Req, B> Service<http::Request<Req>> for BodyLimit<S>
where
    S: Service<http::Request<Req>, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Response = Answer<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Answer<B>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<Req>) -> Self::Future {
        let limit = self.limit;
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await.map_err(Into::into)?;
            let announced = response
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.parse::<u64>().ok());
            if announced.is_some_and(|length| length > limit) {
                return Err(ResponseTooLarge { limit }.into());
            }
            Ok(response.map(|body| LimitedBody { body, read: 0, limit }))
        })
    }
}

/// An answer's body that fails once more than `limit` bytes of it have arrived.
pub struct LimitedBody<B> {
    body: B,
    read: u64,
    limit: u64,
}

impl<B> Body for LimitedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let frame = match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(Some(Err(err))) => return Poll::Ready(Some(Err(err.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        if let Some(data) = frame.data_ref() {
            this.read = this.read.saturating_add(data.len() as u64);
            if this.read > this.limit {
                return Poll::Ready(Some(Err(ResponseTooLarge { limit: this.limit }.into())));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::kube::clients::with_timeouts;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A plain-http server on loopback that answers every request with `head` and then `body` chunks, `chunks`
    /// times (None: for ever).
    async fn server(head: &'static str, chunk: &'static [u8], chunks: Option<usize>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    let _ = socket.read(&mut request).await;
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let mut sent = 0;
                    while chunks.is_none_or(|chunks| sent < chunks) {
                        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
                        if socket.write_all(&framed).await.is_err() {
                            return;
                        }
                        sent += 1;
                    }
                    let _ = socket.write_all(b"0\r\n\r\n").await;
                });
            }
        });
        url
    }

    fn client(url: &str, limit: u64) -> kube::Client {
        let config = with_timeouts(kube::Config::new(url.parse().expect("url")));
        kube::client::ClientBuilder::try_from(config)
            .expect("builder")
            .with_layer(&BodyLimitLayer(limit))
            .build()
    }

    async fn get(client: &kube::Client) -> Result<String, kube::Error> {
        let request = http::Request::get("/api/v1/nodes").body(Vec::new()).expect("request");
        client.request_text(request).await
    }

    const CHUNKED_OK: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
    const CHUNKED_ERROR: &str =
        "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";

    #[tokio::test]
    async fn an_endless_answer_fails_at_the_cap() {
        let url = server(CHUNKED_OK, &[b' '; 16 * 1024], None).await;
        let err = get(&client(&url, 1 << 20)).await.expect_err("endless");
        assert!(ResponseTooLarge::caused(&err), "{err:?}");
    }

    #[tokio::test]
    async fn an_endless_error_answer_fails_at_the_cap_and_its_text_is_not_kept() {
        let url = server(CHUNKED_ERROR, &[b'x'; 16 * 1024], None).await;
        let err = get(&client(&url, 1 << 20)).await.expect_err("endless");
        assert!(ResponseTooLarge::caused(&err), "{err:?}");
        assert!(err.to_string().len() < 200, "{err}");
    }

    #[tokio::test]
    async fn an_announced_length_over_the_cap_fails_before_the_body_is_read() {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 300000000\r\n\r\n";
        let url = server(head, b"", Some(0)).await;
        let err = get(&client(&url, 1 << 20)).await.expect_err("announced");
        assert!(ResponseTooLarge::caused(&err), "{err:?}");
    }

    #[tokio::test]
    async fn an_answer_within_the_cap_passes_whole() {
        let url = server(CHUNKED_OK, b"{\"kind\":\"NodeList\"}", Some(1)).await;
        assert_eq!(
            get(&client(&url, 1 << 20)).await.expect("answer"),
            "{\"kind\":\"NodeList\"}"
        );
    }
}
