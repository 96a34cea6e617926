//! Embeds what `botgate ruleset new` writes into a new rule-set project: the WIT
//! contract, the guest SDK and the normalisation it shares with the gateway, the
//! template rule set, and the guest workspace's lock file (the same dependency versions).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// (folder in this repository, folder in the new project).
const TREES: [(&str, &str); 4] = [
    ("../wit", "wit"),
    ("../rulesets/sdk/src", "botgate/sdk/src"),
    ("../api/normalise/src", "botgate/normalise/src"),
    ("../rulesets/template/src", "template/src"),
];

fn files(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files(&path, found);
        } else {
            found.push(path);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let mut out = String::from(
        "/// (path in the new project, content).\npub static FILES: &[(&str, &str)] = &[\n",
    );
    for (from, to) in TREES {
        let root = manifest.join(from);
        println!("cargo:rerun-if-changed={}", root.display());
        let mut found = Vec::new();
        files(&root, &mut found);
        for file in found {
            let relative = file.strip_prefix(&root).expect("under its root");
            let target = Path::new(to).join(relative);
            writeln!(
                out,
                "    ({:?}, include_str!({:?})),",
                target.display().to_string(),
                file.display().to_string()
            )
            .expect("writing to a string");
        }
    }
    let lock = manifest.join("../rulesets/Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    writeln!(
        out,
        "    (\"Cargo.lock\", include_str!({:?})),",
        lock.display().to_string()
    )
    .expect("writing to a string");
    out.push_str("];\n");
    let dest =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("scaffold_files.rs");
    std::fs::write(dest, out).expect("writing the scaffold's file list");
}
