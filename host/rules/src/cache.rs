//! Compiles rule components once: an in-memory map and an on-disk cache of compiled
//! code, both keyed by the component's content hash and the engine's compatibility hash.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::PoisonError;
use wasmtime::Engine;
use wasmtime::component::Component;

/// The SHA-256 of a component's bytes, in hex.
pub fn content_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates `dir` (mode 0700) if needed and checks that only this user can write it:
/// it will hold native code that is loaded without further checks.
pub fn trusted_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::metadata(dir)?;
    if meta.mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "writable by group or others (mode {:o})",
            meta.mode() & 0o777
        )));
    }
    // A file this process creates is owned by its effective user.
    let probe = tempfile::NamedTempFile::new_in(dir)?;
    let me = probe.as_file().metadata()?.uid();
    if meta.uid() != me {
        return Err(std::io::Error::other(format!(
            "owned by uid {}, not by this process's uid {me}",
            meta.uid()
        )));
    }
    Ok(())
}

/// A compiler with a cache. Compiled code on disk is trusted: the cache directory must
/// be writable only by botgate (it holds native code).
pub struct ComponentCache {
    dir: Option<PathBuf>,
    engine_hash: String,
    memory: Mutex<HashMap<String, Component>>,
}

impl ComponentCache {
    /// A cache for `engine`, persisted under `dir` when given.
    /// A directory that fails [`trusted_dir`] is not used: components are then compiled
    /// in memory only, and a warning says why.
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let dir = dir.and_then(|dir| match trusted_dir(&dir) {
            Ok(()) => Some(dir),
            Err(why) => {
                tracing::warn!(dir = %dir.display(), %why, "not using the compiled-component cache directory");
                None
            }
        });
        ComponentCache {
            dir,
            engine_hash: format!("{:016x}", hasher.finish()),
            memory: Mutex::new(HashMap::new()),
        }
    }

    /// The compiled component for `bytes` (whose SHA-256 is `hash`): from memory, from
    /// disk, or compiled now and written to disk.
    pub fn compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        hash: &str,
    ) -> wasmtime::Result<Component> {
        if let Some(component) = self
            .memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(hash)
        {
            return Ok(component.clone());
        }
        let component = match self.disk_path(hash) {
            Some(path) => match Self::read_disk(engine, &path) {
                Some(component) => component,
                None => {
                    let component = Component::new(engine, bytes)?;
                    Self::write_disk(&component, &path);
                    component
                }
            },
            None => Component::new(engine, bytes)?,
        };
        self.memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(hash.to_owned(), component.clone());
        Ok(component)
    }

    /// Forgets compiled components that are no longer referenced by `keep`.
    pub fn retain(&self, keep: &[&str]) {
        self.memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|hash, _| keep.contains(&hash.as_str()));
    }

    fn disk_path(&self, hash: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join(format!("{hash}-{}.cwasm", self.engine_hash)))
    }

    fn read_disk(engine: &Engine, path: &Path) -> Option<Component> {
        if !path.exists() {
            return None;
        }
        // SAFETY: the file was written by `write_disk` from `Component::serialize` for an
        // engine with the same compatibility hash (it is in the file name), in a cache
        // directory that only botgate writes. Wasmtime still checks the header and
        // refuses files from another engine configuration.
        match unsafe { Component::deserialize_file(engine, path) } {
            Ok(component) => Some(component),
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "ignoring unreadable compiled component; recompiling");
                None
            }
        }
    }

    fn write_disk(component: &Component, path: &Path) {
        let write = || -> std::io::Result<()> {
            let dir = path
                .parent()
                .ok_or_else(|| std::io::Error::other("cache path without a directory"))?;
            let bytes = component
                .serialize()
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            let tmp = tempfile::NamedTempFile::new_in(dir)?;
            std::fs::write(tmp.path(), bytes)?;
            tmp.persist(path).map_err(|e| e.error)?;
            Ok(())
        };
        if let Err(err) = write() {
            tracing::warn!(path = %path.display(), error = %err, "could not write the compiled-component cache");
        }
    }
}
