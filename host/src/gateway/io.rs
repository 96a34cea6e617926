//! The listeners' stream wrappers: [`Activity`] counts the reads and writes that moved
//! bytes, for the idle timeout; [`CoalescedWrites`] gathers the writes of one turn of the
//! thread into one, for HTTP/2's many small answers on one connection.

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

/// The most a [`CoalescedWrites`] holds before it writes through; writes of this size
/// or more (a big body's frames) go straight on.
const COALESCE_LIMIT: usize = 32 * 1024;

/// Held bytes that fill a TLS record (16 KiB) leave at the first flush: a large body
/// gains nothing from waiting for other answers.
const COALESCE_FULL: usize = 16 * 1024;

/// The capacity a [`CoalescedWrites`] keeps between flushes: a connection that once sent a
/// large answer does not hold on to its buffer while idle.
const COALESCE_RETAINED: usize = 4 * 1024;

/// A stream whose writes wait for the thread's turn to end: the first flush after a write
/// yields (the task wakes itself and goes to the back of the queue), so the answers of
/// other streams of the same connection that became ready in the same turn join the
/// bytes held, and all leave in one write (one system call, and one TLS record up to
/// 16 KiB) at the second.
pub struct CoalescedWrites<S> {
    inner: S,
    held: Vec<u8>,
    /// The first `written` bytes of `held` have reached `inner`.
    written: usize,
    yielded: bool,
}

impl<S> CoalescedWrites<S> {
    pub fn new(inner: S) -> CoalescedWrites<S> {
        CoalescedWrites {
            inner,
            held: Vec::new(),
            written: 0,
            yielded: false,
        }
    }
}

impl<S: AsyncWrite + Unpin> CoalescedWrites<S> {
    /// Writes what is held to the inner stream.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.held.len() {
            let n = std::task::ready!(
                Pin::new(&mut self.inner).poll_write(cx, &self.held[self.written..])
            )?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.written = 0;
        self.held.clear();
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for CoalescedWrites<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for CoalescedWrites<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.len() >= COALESCE_LIMIT {
            // What is held leaves first, then this, unbuffered.
            std::task::ready!(this.poll_drain(cx))?;
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        }
        if this.held.len() + buf.len() > COALESCE_LIMIT {
            std::task::ready!(this.poll_drain(cx))?;
        }
        // Grown in powers of two up to the limit, never past it.
        let needed = this.held.len() + buf.len();
        if needed > this.held.capacity() {
            let capacity = needed.next_power_of_two().min(COALESCE_LIMIT);
            this.held.reserve_exact(capacity - this.held.len());
        }
        this.held.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.held.is_empty() && this.held.len() < COALESCE_FULL && !this.yielded {
            this.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        std::task::ready!(this.poll_drain(cx))?;
        this.yielded = false;
        if this.held.capacity() > COALESCE_RETAINED {
            this.held = Vec::new();
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
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

    /// An inner stream that records each write it is given.
    #[derive(Default)]
    struct Recorder {
        writes: Vec<Vec<u8>>,
        flushes: usize,
        shut: bool,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.get_mut().writes.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.get_mut().flushes += 1;
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.get_mut().shut = true;
            Poll::Ready(Ok(()))
        }
    }

    /// A waker that counts its wakes.
    struct Wakes(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn writes_wait_for_the_second_flush_and_leave_as_one() {
        let wakes = Arc::new(Wakes(Default::default()));
        let waker = std::task::Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut stream = CoalescedWrites::new(Recorder::default());
        let mut pinned = Pin::new(&mut stream);
        assert!(matches!(
            pinned.as_mut().poll_write(&mut cx, b"first "),
            Poll::Ready(Ok(6))
        ));
        // The first flush yields: the task is woken to come back after the others.
        assert!(pinned.as_mut().poll_flush(&mut cx).is_pending());
        assert_eq!(wakes.0.load(Ordering::Relaxed), 1);
        // What another stream's answer adds meanwhile joins the bytes held.
        assert!(matches!(
            pinned.as_mut().poll_write(&mut cx, b"second"),
            Poll::Ready(Ok(6))
        ));
        assert!(pinned.as_mut().get_mut().inner.writes.is_empty());
        assert!(matches!(
            pinned.as_mut().poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(stream.inner.writes, vec![b"first second".to_vec()]);
        assert_eq!(stream.inner.flushes, 1);
        // Nothing held: a flush goes straight through, without yielding.
        let mut pinned = Pin::new(&mut stream);
        assert!(matches!(
            pinned.as_mut().poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(wakes.0.load(Ordering::Relaxed), 1);
        assert_eq!(stream.inner.flushes, 2);
    }

    #[test]
    fn large_writes_go_straight_on_and_shutdown_sends_what_is_held() {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut stream = CoalescedWrites::new(Recorder::default());
        let mut pinned = Pin::new(&mut stream);
        let large = vec![7u8; COALESCE_LIMIT];
        assert!(matches!(
            pinned.as_mut().poll_write(&mut cx, b"head"),
            Poll::Ready(Ok(4))
        ));
        // What is held leaves first, then the large write, unbuffered.
        assert!(matches!(
            pinned.as_mut().poll_write(&mut cx, &large),
            Poll::Ready(Ok(n)) if n == COALESCE_LIMIT
        ));
        assert!(matches!(
            pinned.as_mut().poll_write(&mut cx, b"tail"),
            Poll::Ready(Ok(4))
        ));
        assert!(matches!(
            pinned.as_mut().poll_shutdown(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(
            stream.inner.writes,
            vec![b"head".to_vec(), large, b"tail".to_vec()]
        );
        assert!(stream.inner.shut);
        // A TLS record's worth held leaves at the first flush, without yielding; the
        // buffer it grew (never past the limit) is not kept once sent.
        let mut pinned = Pin::new(&mut stream);
        for _ in 0..3 {
            let frame = [1u8; 8 * 1024];
            assert!(matches!(
                pinned.as_mut().poll_write(&mut cx, &frame),
                Poll::Ready(Ok(_))
            ));
        }
        assert!(pinned.held.capacity() > COALESCE_RETAINED);
        assert!(pinned.held.capacity() <= COALESCE_LIMIT);
        assert!(matches!(
            pinned.as_mut().poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert!(stream.held.capacity() <= COALESCE_RETAINED);
        assert_eq!(stream.inner.writes.last().map(Vec::len), Some(24 * 1024));
    }
}
