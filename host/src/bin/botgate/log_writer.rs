//! The log's writer: lines go into one buffer that is written to stderr when it fills
//! and at least every 50 ms, so a busy gateway (one access line per request) makes a
//! few large writes a second instead of one write per line, and no thread hands lines
//! to another.

use std::io::{BufWriter, Stderr, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a line may wait in the buffer.
const FLUSH_EVERY: Duration = Duration::from_millis(50);

/// A shared, periodically flushed stderr buffer; `tracing_subscriber` makes one writer
/// per line from it.
#[derive(Clone)]
pub struct BatchedStderr {
    buffer: Arc<Mutex<BufWriter<Stderr>>>,
}

/// Flushes what is left when dropped (at the end of `main`).
pub struct FlushOnDrop(BatchedStderr);

impl BatchedStderr {
    /// The writer, its flushing thread, and the guard that flushes at exit.
    pub fn start() -> (BatchedStderr, FlushOnDrop) {
        let writer = BatchedStderr {
            buffer: Arc::new(Mutex::new(BufWriter::with_capacity(
                64 * 1024,
                std::io::stderr(),
            ))),
        };
        let flusher = writer.clone();
        let spawned = std::thread::Builder::new()
            .name("botgate-log".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(FLUSH_EVERY);
                    flusher.flush();
                }
            });
        if let Err(err) = spawned {
            eprintln!("no thread to flush the log ({err}); lines are written as they come");
        }
        (writer.clone(), FlushOnDrop(writer))
    }

    fn flush(&self) {
        if let Ok(mut buffer) = self.buffer.lock() {
            let _ = buffer.flush();
        }
    }
}

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        self.0.flush();
    }
}

/// One line's writer: holds the buffer while the line is copied in.
pub enum LineWriter<'a> {
    Buffered(std::sync::MutexGuard<'a, BufWriter<Stderr>>),
    /// A thread panicked while holding the buffer: write unbuffered from then on.
    Direct(Stderr),
}

impl Write for LineWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            LineWriter::Buffered(buffer) => buffer.write(bytes),
            LineWriter::Direct(stderr) => stderr.write(bytes),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // The flushing thread and a full buffer write; a line does not.
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BatchedStderr {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        match self.buffer.lock() {
            Ok(guard) => LineWriter::Buffered(guard),
            Err(_) => LineWriter::Direct(std::io::stderr()),
        }
    }
}
