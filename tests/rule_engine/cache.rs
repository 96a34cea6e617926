//! The on-disk compiled-component cache: keyed by content and engine, reused across
//! registries, and healed when a file is corrupt.

use botgate_host::rules::{Registry, Sandbox, SandboxConfig};
use botgate_tests::guest_bytes;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn cwasm_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn fresh_registry(cache: &Path) -> Registry {
    Registry::new(
        Sandbox::new(SandboxConfig::default()).unwrap(),
        Some(cache.to_path_buf()),
    )
}

#[test]
fn compiled_code_is_written_once_and_reused() {
    let cache = tempfile::tempdir().unwrap();
    let bytes = guest_bytes("template");
    let first = fresh_registry(cache.path())
        .check("template", &bytes, "test")
        .unwrap();
    let files = cwasm_files(cache.path());
    assert_eq!(files.len(), 1);
    let name = files[0].file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with(first.hash()),
        "{name} is keyed by the content hash"
    );
    let written = std::fs::metadata(&files[0]).unwrap().ino();

    // A new engine with the same configuration reads the file instead of compiling.
    let second = fresh_registry(cache.path())
        .check("template", &bytes, "test")
        .unwrap();
    assert_eq!(second.hash(), first.hash());
    assert_eq!(cwasm_files(cache.path()), files);
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().ino(),
        written,
        "not rewritten (a rewrite renames a new file into place)"
    );
}

#[test]
fn corrupt_cache_file_is_recompiled() {
    let cache = tempfile::tempdir().unwrap();
    let bytes = guest_bytes("template");
    fresh_registry(cache.path())
        .check("template", &bytes, "test")
        .unwrap();
    let file = cwasm_files(cache.path()).remove(0);
    std::fs::write(&file, b"corrupt").unwrap();
    let loaded = fresh_registry(cache.path())
        .check("template", &bytes, "test")
        .unwrap();
    assert_eq!(loaded.name(), "template");
    assert!(
        std::fs::metadata(&file).unwrap().len() > 1000,
        "the file was rewritten"
    );
}

#[test]
fn a_cache_directory_others_can_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let cache = tempfile::tempdir().unwrap();
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    fresh_registry(cache.path())
        .check("template", &guest_bytes("template"), "test")
        .unwrap();
    assert!(
        cwasm_files(cache.path()).is_empty(),
        "no native code written to a shared directory"
    );
}
