//! Hot reload: watches a rule-set directory and syncs the registry when it changes.

use super::registry::Registry;
use super::source::{DirectorySource, RulesetSource};
use notify::{RecursiveMode, Watcher as _};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the directory must be quiet before a sync, so that a file being copied
/// in is read whole.
const DEBOUNCE: Duration = Duration::from_millis(150);
/// The longest a stream of events may delay a sync.
const MAX_SETTLE: Duration = Duration::from_secs(2);
/// A full resync at this interval heals any missed event.
const RESYNC: Duration = Duration::from_secs(10);

/// A running watcher; dropping it stops the thread.
pub struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    watcher: Option<notify::RecommendedWatcher>,
}

impl Watcher {
    /// Syncs `registry` with `source` now, then on every change of its directory.
    pub fn start(registry: Arc<Registry>, source: DirectorySource) -> notify::Result<Watcher> {
        let dir = source.dir().to_path_buf();
        Watcher::start_with(registry, &dir, Arc::new(source))
    }

    /// Syncs `registry` with `source` (which reads `dir`, among others) now, then on
    /// every change of `dir`.
    pub fn start_with(
        registry: Arc<Registry>,
        dir: &Path,
        source: Arc<dyn RulesetSource>,
    ) -> notify::Result<Watcher> {
        let (tx, rx) = mpsc::channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Reading the directory opens it and its files: react only to changes of
                // component files, or a sync would trigger the next one.
                let relevant = match event {
                    Ok(event) => {
                        is_change(&event.kind)
                            && event
                                .paths
                                .iter()
                                .any(|p| DirectorySource::component_name(p).is_some())
                    }
                    // The watch itself is in trouble (queue overflow): resync to be safe.
                    Err(_) => true,
                };
                if relevant {
                    let _ = tx.send(());
                }
            })?;
        watcher.watch(dir, RecursiveMode::NonRecursive)?;
        registry.sync(source.as_ref());

        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("botgate-ruleset-watch".into())
            .spawn(move || {
                while !stopping.load(Ordering::Relaxed) {
                    match rx.recv_timeout(RESYNC) {
                        Ok(()) => {
                            // Let a burst of events settle (a bounded while), then sync once.
                            let settle_until = Instant::now() + MAX_SETTLE;
                            while Instant::now() < settle_until && rx.recv_timeout(DEBOUNCE).is_ok()
                            {
                            }
                        }
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                    if stopping.load(Ordering::Relaxed) {
                        break;
                    }
                    registry.sync(source.as_ref());
                }
            })
            .map_err(notify::Error::io)?;
        Ok(Watcher {
            stop,
            thread: Some(thread),
            watcher: Some(watcher),
        })
    }
}

/// Whether an event kind can change what the directory holds (not a mere read).
fn is_change(kind: &notify::EventKind) -> bool {
    use notify::EventKind::{Any, Create, Modify, Remove};
    use notify::event::ModifyKind;
    match kind {
        Create(_) | Remove(_) | Any => true,
        Modify(ModifyKind::Metadata(_)) => false,
        Modify(_) => true,
        _ => false,
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the notify watcher closes the channel and wakes the thread.
        drop(self.watcher.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
