//! Where rule components come from: a pluggable source (a watched directory today;
//! the store, for cluster-wide uploads, later).

use std::path::{Path, PathBuf};

/// One component as a source holds it.
#[derive(Debug, Clone)]
pub struct RulesetBlob {
    /// The name the operator gave it (the file stem): it must match `info().name`.
    pub name: String,
    pub bytes: Vec<u8>,
    /// Where it came from, for logs (`/etc/botgate/rulesets/wordpress.wasm`).
    pub origin: String,
}

/// A problem reading one entry of a source; the other entries still load.
#[derive(Debug, Clone)]
pub struct SourceError {
    pub origin: String,
    pub message: String,
}

/// Lists the components a registry should hold.
pub trait RulesetSource: Send + Sync {
    /// Every component the source holds now, and the entries it could not read.
    fn list(&self) -> (Vec<RulesetBlob>, Vec<SourceError>);
    /// A short description for logs.
    fn describe(&self) -> String;
}

/// A directory of `<name>.wasm` files. Other files (and hidden or temporary files such as
/// `.wordpress.wasm.tmp`) are ignored, so a component can be written atomically by
/// writing a temporary file and renaming it into place.
#[derive(Debug, Clone)]
pub struct DirectorySource {
    dir: PathBuf,
}

impl DirectorySource {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DirectorySource { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The component name of `path`, when it is a file this source reads.
    pub fn component_name(path: &Path) -> Option<&str> {
        if path.extension()? != "wasm" {
            return None;
        }
        let stem = path.file_stem()?.to_str()?;
        (!stem.starts_with('.')).then_some(stem)
    }
}

impl RulesetSource for DirectorySource {
    fn list(&self) -> (Vec<RulesetBlob>, Vec<SourceError>) {
        let mut blobs = Vec::new();
        let mut errors = Vec::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) => {
                errors.push(SourceError {
                    origin: self.dir.display().to_string(),
                    message: format!("cannot read the rule-set directory: {err}"),
                });
                return (blobs, errors);
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(name) = Self::component_name(&path) else {
                continue;
            };
            if !path.is_file() {
                continue;
            }
            match std::fs::read(&path) {
                Ok(bytes) => blobs.push(RulesetBlob {
                    name: name.to_owned(),
                    bytes,
                    origin: path.display().to_string(),
                }),
                Err(err) => errors.push(SourceError {
                    origin: path.display().to_string(),
                    message: format!("cannot read: {err}"),
                }),
            }
        }
        blobs.sort_by(|a, b| a.name.cmp(&b.name));
        (blobs, errors)
    }

    fn describe(&self) -> String {
        format!("directory {}", self.dir.display())
    }
}
