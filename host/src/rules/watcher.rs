//! Hot reload: watches a rule-set directory and syncs the registry when it changes.

use super::registry::Registry;
use super::source::DirectorySource;
use notify::{RecursiveMode, Watcher as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the directory must be quiet before a sync, so that a file being copied
/// in is read whole.
const DEBOUNCE: Duration = Duration::from_millis(150);
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
        let (tx, rx) = mpsc::channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if event.is_ok() {
                    let _ = tx.send(());
                }
            })?;
        watcher.watch(source.dir(), RecursiveMode::NonRecursive)?;
        registry.sync(&source);

        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("botgate-ruleset-watch".into())
            .spawn(move || {
                while !stopping.load(Ordering::Relaxed) {
                    match rx.recv_timeout(RESYNC) {
                        Ok(()) => {
                            // Let a burst of events settle, then sync once.
                            while rx.recv_timeout(DEBOUNCE).is_ok() {}
                        }
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                    if stopping.load(Ordering::Relaxed) {
                        break;
                    }
                    registry.sync(&source);
                }
            })
            .expect("spawning the rule-set watcher");
        Ok(Watcher {
            stop,
            thread: Some(thread),
            watcher: Some(watcher),
        })
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
