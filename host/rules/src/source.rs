//! Where rule components come from: a pluggable source (a watched directory here; the
//! gateway adds the store's pushed components, `botgate_host::fleet`).

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

/// A problem reading one entry of a source; the other entries still load, and the
/// entry's previous version stays in service.
#[derive(Debug, Clone)]
pub struct SourceError {
    /// The component the entry holds, when known.
    pub name: Option<String>,
    pub origin: String,
    pub message: String,
}

/// What a source holds now.
#[derive(Debug, Default)]
pub struct Listing {
    pub blobs: Vec<RulesetBlob>,
    /// Entries that could not be read.
    pub errors: Vec<SourceError>,
}

/// Lists the components a registry should hold.
pub trait RulesetSource: Send + Sync {
    /// Every component the source holds now. An `Err` means the source as a whole could
    /// not be read (a missing directory, a store that does not answer): the registry
    /// then keeps what it has.
    fn list(&self) -> Result<Listing, SourceError>;
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
    fn list(&self) -> Result<Listing, SourceError> {
        let mut listing = Listing::default();
        let entries = std::fs::read_dir(&self.dir).map_err(|err| SourceError {
            name: None,
            origin: self.dir.display().to_string(),
            message: format!("cannot read the rule-set directory: {err}"),
        })?;
        for entry in entries {
            let entry = entry.map_err(|err| SourceError {
                name: None,
                origin: self.dir.display().to_string(),
                message: format!("cannot list the rule-set directory: {err}"),
            })?;
            let path = entry.path();
            let Some(name) = Self::component_name(&path) else {
                continue;
            };
            if !path.is_file() {
                continue;
            }
            match std::fs::read(&path) {
                Ok(bytes) => listing.blobs.push(RulesetBlob {
                    name: name.to_owned(),
                    bytes,
                    origin: path.display().to_string(),
                }),
                Err(err) => listing.errors.push(SourceError {
                    name: Some(name.to_owned()),
                    origin: path.display().to_string(),
                    message: format!("cannot read: {err}"),
                }),
            }
        }
        listing.blobs.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(listing)
    }

    fn describe(&self) -> String {
        format!("directory {}", self.dir.display())
    }
}
