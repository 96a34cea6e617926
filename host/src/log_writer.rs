//! The log's writer: each thread appends whole lines to a buffer of its own, written out
//! when it fills and at least every 50 ms, so a busy gateway (one access line per request)
//! makes a few large writes a second instead of one write per line, and the data-plane
//! threads share no lock and no buffer on a request's path.

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;
use thread_local::ThreadLocal;

/// How long a line may wait in its thread's buffer.
const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// A thread's buffer is written out by the thread itself once it holds this much and
/// the output is free.
const WRITE_AT: usize = 64 * 1024;
/// A thread whose buffer grew to this much while the output was busy (a slow or stalled
/// log reader) waits for the output instead of growing it further: memory stays bounded
/// and no line is dropped.
const WAIT_AT: usize = 4 << 20;

type Target = Box<dyn Write + Send>;

/// What the threads share: the output, and every thread's buffer.
struct Shared {
    /// The output, with the flusher's spare buffer; whoever writes lines out holds it
    /// while taking them from a thread's buffer, so each thread's lines reach the
    /// output in the order it wrote them.
    output: Mutex<Output>,
    /// One buffer per thread that logged; only its own thread appends to it.
    buffers: ThreadLocal<Mutex<Vec<u8>>>,
}

struct Output {
    target: Target,
    /// Swapped with a thread's buffer when flushing, so neither allocates.
    spare: Vec<u8>,
}

/// Per-thread buffers in front of stderr or a file, flushed periodically. The
/// diagnostic log (`tracing_subscriber` makes one writer per line from it) and the
/// access log ([`crate::gateway::access_log`]) may share one. Lines are never cut or
/// interleaved; lines of different threads reach the output in batches, so they are in
/// order per thread (and within 50 ms of each other across threads).
#[derive(Clone)]
pub struct BatchedWriter {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for BatchedWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BatchedWriter")
    }
}

/// Flushes what is left when dropped (at the end of `main`).
pub struct FlushOnDrop(BatchedWriter);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A thread that panicked while holding a buffer left whole lines behind (a line is
    // copied in with one `extend`), so the buffers stay usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BatchedWriter {
    /// A buffer in front of stderr.
    pub fn stderr() -> (BatchedWriter, FlushOnDrop) {
        Self::start(Box::new(std::io::stderr()))
    }

    /// The writer over `target`, its flushing thread, and the guard that flushes at
    /// exit. The thread ends when every clone of the writer is gone.
    pub fn start(target: Target) -> (BatchedWriter, FlushOnDrop) {
        let writer = BatchedWriter {
            shared: Arc::new(Shared {
                output: Mutex::new(Output {
                    target,
                    spare: Vec::new(),
                }),
                buffers: ThreadLocal::new(),
            }),
        };
        let flusher = Arc::downgrade(&writer.shared);
        let spawned = std::thread::Builder::new()
            .name("botgate-log".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(FLUSH_EVERY);
                    let Some(shared) = flusher.upgrade() else {
                        break;
                    };
                    BatchedWriter { shared }.flush();
                }
            });
        if let Err(err) = spawned {
            eprintln!("no thread to flush the log ({err}); lines wait for a full buffer");
        }
        (writer.clone(), FlushOnDrop(writer))
    }

    /// Writes out what every thread's buffer holds.
    pub fn flush(&self) {
        let mut output = lock(&self.shared.output);
        let output = &mut *output;
        for buffer in self.shared.buffers.iter() {
            {
                let mut buffer = lock(buffer);
                if buffer.is_empty() {
                    continue;
                }
                std::mem::swap(&mut *buffer, &mut output.spare);
            }
            let _ = output.target.write_all(&output.spare);
            output.spare.clear();
        }
        let _ = output.target.flush();
    }

    /// Appends one whole line (with its `\n`).
    pub fn write_line(&self, line: &[u8]) {
        let mut buffer = self.buffer();
        buffer.extend_from_slice(line);
        self.written(buffer);
    }

    /// This thread's buffer.
    fn buffer(&self) -> MutexGuard<'_, Vec<u8>> {
        lock(
            self.shared
                .buffers
                .get_or(|| Mutex::new(Vec::with_capacity(WRITE_AT))),
        )
    }

    /// After a line went into `buffer`: writes the buffer out if it is full. Never
    /// waits for the output while holding the buffer (the flusher takes the output,
    /// then each buffer), and waits at all only when the buffer is at [`WAIT_AT`].
    fn written(&self, mut buffer: MutexGuard<'_, Vec<u8>>) {
        if buffer.len() < WRITE_AT {
            return;
        }
        let output = match self.shared.output.try_lock() {
            Ok(output) => Some(output),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        if let Some(mut output) = output {
            let _ = output.target.write_all(&buffer);
            buffer.clear();
        } else if buffer.len() >= WAIT_AT {
            // Only this thread appends to its buffer, and it waits here: no later line
            // of its can overtake these.
            let lines = std::mem::replace(&mut *buffer, Vec::with_capacity(WRITE_AT));
            drop(buffer);
            let _ = lock(&self.shared.output).target.write_all(&lines);
        }
    }
}

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        self.0.flush();
    }
}

/// One line's writer: holds this thread's buffer while the line is copied in.
pub struct LineWriter<'a> {
    writer: &'a BatchedWriter,
    buffer: Option<MutexGuard<'a, Vec<u8>>>,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Some(buffer) = &mut self.buffer {
            buffer.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // The flushing thread and a full buffer write; a line does not.
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.writer.written(buffer);
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for BatchedWriter {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            writer: self,
            buffer: Some(self.buffer()),
        }
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

    /// Each thread's numbered lines, read back from `output`: every line whole, and
    /// each thread's numbers in the order written.
    fn lines_by_thread(output: &[u8], threads: usize) -> Vec<Vec<usize>> {
        let text = std::str::from_utf8(output).expect("whole lines are UTF-8");
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "a cut line at the end"
        );
        let mut seen = vec![Vec::new(); threads];
        for line in text.lines() {
            let (thread, rest) = line.split_once(' ').expect("a thread number");
            let (number, padding) = rest.split_once(' ').expect("a line number");
            assert!(padding.bytes().all(|b| b == b'.'), "interleaved: {line:?}");
            seen[thread.parse::<usize>().unwrap()].push(number.parse().unwrap());
        }
        seen
    }

    fn numbered_line(thread: usize, number: usize) -> String {
        // Lengths vary, so buffers fill at different lines.
        format!("{thread} {number} {}\n", ".".repeat(number % 97))
    }

    #[test]
    fn every_threads_lines_arrive_whole_and_in_its_order() {
        const THREADS: usize = 4;
        const LINES: usize = 20_000;
        let target = Shared::default();
        let (writer, flush_on_drop) = BatchedWriter::start(Box::new(target.clone()));
        std::thread::scope(|scope| {
            for thread in 0..THREADS {
                let writer = &writer;
                scope.spawn(move || {
                    for number in 0..LINES {
                        writer.write_line(numbered_line(thread, number).as_bytes());
                    }
                });
            }
        });
        drop(flush_on_drop);
        let seen = lines_by_thread(&target.0.lock().unwrap(), THREADS);
        for (thread, numbers) in seen.iter().enumerate() {
            assert_eq!(
                *numbers,
                (0..LINES).collect::<Vec<_>>(),
                "thread {thread}'s lines lost or reordered"
            );
        }
    }

    #[test]
    fn a_full_buffer_is_written_by_its_thread_without_waiting_for_the_flusher() {
        let target = Shared::default();
        let (writer, _flush_on_drop) = BatchedWriter::start(Box::new(target.clone()));
        let mut written = 0;
        let mut number = 0;
        while written < WRITE_AT {
            let line = numbered_line(0, number);
            writer.write_line(line.as_bytes());
            written += line.len();
            number += 1;
        }
        assert!(
            target.0.lock().unwrap().len() >= WRITE_AT,
            "a full buffer waited for the flusher"
        );
    }

    /// A target whose writes wait while it is closed, and that says when one waits.
    #[derive(Clone, Default)]
    struct Gate {
        state: Arc<(Mutex<(bool, bool)>, std::sync::Condvar)>,
        written: Shared,
    }

    impl Write for Gate {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let (state, changed) = &*self.state;
            let mut state = state.lock().unwrap();
            // (open, a write is waiting)
            state.1 = true;
            changed.notify_all();
            while !state.0 {
                state = changed.wait(state).unwrap();
            }
            self.written.write(bytes)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_output_holds_up_no_writer_until_its_buffer_is_at_the_bound() {
        let gate = Gate::default();
        let (writer, flush_on_drop) = BatchedWriter::start(Box::new(gate.clone()));
        // The flusher takes the first line and waits in the closed output, holding it.
        writer.write_line(numbered_line(0, 0).as_bytes());
        {
            let (state, changed) = &*gate.state;
            let mut state = state.lock().unwrap();
            while !state.1 {
                state = changed.wait(state).unwrap();
            }
        }
        // Another thread writes well past a buffer's size but below the bound: it
        // finishes although the output is stalled.
        let (done, finished) = std::sync::mpsc::channel();
        let lines = {
            let writer = writer.clone();
            std::thread::spawn(move || {
                let mut written = 0;
                let mut number = 0;
                while written < WAIT_AT / 2 {
                    let line = numbered_line(1, number);
                    writer.write_line(line.as_bytes());
                    written += line.len();
                    number += 1;
                }
                let _ = done.send(());
                number
            })
        };
        assert!(
            finished.recv_timeout(Duration::from_secs(30)).is_ok(),
            "a writer waited for the stalled output below the bound"
        );
        let lines = lines.join().unwrap();
        {
            let (state, changed) = &*gate.state;
            state.lock().unwrap().0 = true;
            changed.notify_all();
        }
        drop(flush_on_drop);
        let seen = lines_by_thread(&gate.written.0.lock().unwrap(), 2);
        assert_eq!(seen[0], vec![0]);
        assert_eq!(seen[1], (0..lines).collect::<Vec<_>>(), "lost or reordered");
    }
}
