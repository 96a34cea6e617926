//! The listeners' stream wrapper [`Activity`], which counts the reads and writes that
//! moved bytes, for the idle timeout.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How many times a connection has moved bytes, shared between the stream (which counts)
/// and its idle check (which compares counts taken a tick apart): no clock is read on
/// the hot path.
#[derive(Clone, Default)]
pub struct ActivityCount {
    moves: Arc<AtomicU64>,
}

impl ActivityCount {
    pub fn new() -> ActivityCount {
        ActivityCount::default()
    }

    fn touch(&self) {
        // One stream counts (it is polled through `&mut`), so a plain load and store
        // suffice; the idle check only needs to see that the count changed.
        let moves = self.moves.load(Ordering::Relaxed);
        self.moves.store(moves.wrapping_add(1), Ordering::Relaxed);
    }

    /// Whether the connection has moved any byte yet.
    pub fn any(&self) -> bool {
        self.moves.load(Ordering::Relaxed) != 0
    }

    /// A watch over this connection's quiet time, counted from `now`.
    pub fn watch(&self, now: Instant) -> IdleWatch {
        IdleWatch {
            activity: self.clone(),
            seen: self.moves.load(Ordering::Relaxed),
            since: now,
        }
    }
}

/// Measures how long a connection has been quiet from the checks it makes: a move seen
/// since the previous check restarts the quiet time at this check, so checks every
/// `period` find a connection idle at most one `period` late, as reading the clock on
/// every move and checking as often would.
pub struct IdleWatch {
    activity: ActivityCount,
    seen: u64,
    since: Instant,
}

impl IdleWatch {
    /// How long the connection has been quiet at `now`, as far as the checks tell.
    pub fn quiet_for(&mut self, now: Instant) -> Duration {
        let moves = self.activity.moves.load(Ordering::Relaxed);
        if moves != self.seen {
            self.seen = moves;
            self.since = now;
        }
        now.saturating_duration_since(self.since)
    }
}

/// A stream that counts its moves in an [`ActivityCount`].
pub struct Activity<S> {
    inner: S,
    count: ActivityCount,
}

impl<S> Activity<S> {
    pub fn new(inner: S, count: ActivityCount) -> Activity<S> {
        Activity { inner, count }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Activity<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.count.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Activity<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.count.touch();
        }
        polled
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.count.touch();
        }
        polled
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_connection_is_quiet_from_the_first_check_after_its_last_move() {
        use tokio::io::AsyncWriteExt;
        let activity = ActivityCount::new();
        let start = Instant::now();
        let mut watch = activity.watch(start);
        let second = Duration::from_secs(1);
        assert_eq!(watch.quiet_for(start + second), second);
        let mut stream = Activity::new(Vec::new(), activity.clone());
        stream.write_all(b"x").await.unwrap();
        // The move restarts the quiet time at the check that sees it...
        assert_eq!(watch.quiet_for(start + 2 * second), Duration::ZERO);
        assert_eq!(watch.quiet_for(start + 5 * second), 3 * second);
        // ...reads count too, and an empty read is no move.
        let mut reader = Activity::new(&b"y"[..], activity.clone());
        let mut byte = [0u8; 1];
        reader.read_exact(&mut byte).await.unwrap();
        assert_eq!(watch.quiet_for(start + 6 * second), Duration::ZERO);
        assert_eq!(reader.read(&mut byte).await.unwrap(), 0);
        assert_eq!(watch.quiet_for(start + 7 * second), second);
    }
}
