//! The log's writer: lines go into one buffer that is written out when it fills and at
//! least every 50 ms, so a busy gateway (one access line per request) makes a few large
//! writes a second instead of one write per line, and no thread hands lines to another.

use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How long a line may wait in the buffer.
const FLUSH_EVERY: Duration = Duration::from_millis(50);

type Target = Box<dyn Write + Send>;

/// A shared, periodically flushed buffer in front of stderr or a file. The diagnostic
/// log (`tracing_subscriber` makes one writer per line from it) and the access log
/// ([`crate::gateway::access_log`]) may share one.
#[derive(Clone)]
pub struct BatchedWriter {
    buffer: Arc<Mutex<BufWriter<Target>>>,
}

impl std::fmt::Debug for BatchedWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BatchedWriter")
    }
}

/// Flushes what is left when dropped (at the end of `main`).
pub struct FlushOnDrop(BatchedWriter);

impl BatchedWriter {
    /// A buffer in front of stderr.
    pub fn stderr() -> (BatchedWriter, FlushOnDrop) {
        Self::start(Box::new(std::io::stderr()))
    }

    /// The writer over `target`, its flushing thread, and the guard that flushes at
    /// exit. The thread ends when every clone of the writer is gone.
    pub fn start(target: Target) -> (BatchedWriter, FlushOnDrop) {
        let writer = BatchedWriter {
            buffer: Arc::new(Mutex::new(BufWriter::with_capacity(64 * 1024, target))),
        };
        let flusher = Arc::downgrade(&writer.buffer);
        let spawned = std::thread::Builder::new()
            .name("botgate-log".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(FLUSH_EVERY);
                    let Some(buffer) = flusher.upgrade() else {
                        break;
                    };
                    BatchedWriter { buffer }.flush();
                }
            });
        if let Err(err) = spawned {
            eprintln!("no thread to flush the log ({err}); lines wait for a full buffer");
        }
        (writer.clone(), FlushOnDrop(writer))
    }

    /// Writes out what the buffer holds.
    pub fn flush(&self) {
        let _ = self.lock().flush();
    }

    /// Appends one whole line (with its `\n`).
    pub fn write_line(&self, line: &[u8]) {
        let _ = self.lock().write_all(line);
    }

    /// The buffer; a thread that panicked while holding it left whole lines behind (a
    /// line is copied in with one `write_all`), so the buffer stays usable.
    fn lock(&self) -> MutexGuard<'_, BufWriter<Target>> {
        self.buffer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        self.0.flush();
    }
}

/// One line's writer: holds the buffer while the line is copied in.
pub struct LineWriter<'a>(MutexGuard<'a, BufWriter<Target>>);

impl Write for LineWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // The flushing thread and a full buffer write; a line does not.
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BatchedWriter {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter(self.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target that shares what it was given.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_are_held_until_the_flush_and_written_whole() {
        let target = Shared::default();
        let (writer, flush_on_drop) = BatchedWriter::start(Box::new(target.clone()));
        writer.write_line(b"one\n");
        writer.write_line(b"two\n");
        assert!(
            target.0.lock().unwrap().is_empty(),
            "written before a flush"
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while target.0.lock().unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "never flushed");
            std::thread::sleep(Duration::from_millis(5));
        }
        writer.write_line(b"three\n");
        drop(flush_on_drop);
        assert_eq!(&*target.0.lock().unwrap(), b"one\ntwo\nthree\n");
    }
}
