//! Writing a file atomically: readers see the old contents or the new, never a torn file,
//! and a failed write leaves the old file as it was.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically: a temporary file in the same directory is written,
/// flushed to disk (fsync), renamed over `path`, and the directory is fsynced so that the
/// rename itself survives a crash. The new file keeps the permissions of the file it
/// replaces (a new file gets the temporary file's, 0600, widened to 0644 on Unix). On any
/// error the temporary file is removed and `path` is untouched.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.file_name().is_none() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: not a file path", path.display()),
        ));
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".uopkit-tmp-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.flush()?;
    match std::fs::metadata(path) {
        Ok(m) => tmp.as_file().set_permissions(m.permissions())?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                tmp.as_file()
                    .set_permissions(std::fs::Permissions::from_mode(0o644))?;
            }
        }
        Err(e) => return Err(e),
    }
    tmp.as_file().sync_all()?;
    // On failure the temporary file is dropped (removed) and the target is untouched.
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::fs::File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_new_and_replaces_existing_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("case.json");
        write_atomic(&p, b"one").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        write_atomic(&p, b"two, longer").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two, longer");
        write_atomic(&p, b"").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"");
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("case.json")]);
    }

    #[cfg(unix)]
    #[test]
    fn keeps_the_permissions_of_the_replaced_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        write_atomic(&p, b"a").unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&p, b"b").unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o640
        );
    }

    #[test]
    fn a_failed_write_leaves_the_original_intact() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a non-empty directory: the rename fails after the temporary file
        // was written.
        let p = dir.path().join("target");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("inside"), b"keep").unwrap();
        assert!(write_atomic(&p, b"new").is_err());
        assert_eq!(std::fs::read(p.join("inside")).unwrap(), b"keep");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
        // A missing directory: nothing is created.
        let q = dir.path().join("missing").join("x.json");
        assert!(write_atomic(&q, b"new").is_err());
        assert!(!q.exists());
        // A path with no file name.
        assert!(write_atomic(Path::new("/"), b"x").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn an_unwritable_directory_leaves_the_original_intact() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("ro");
        std::fs::create_dir(&sub).unwrap();
        let p = sub.join("case.json");
        std::fs::write(&p, b"original").unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o555)).unwrap();
        let r = write_atomic(&p, b"replacement");
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Root may write anyway; then the write must have been complete.
        let now = std::fs::read(&p).unwrap();
        match r {
            Err(_) => assert_eq!(now, b"original"),
            Ok(()) => assert_eq!(now, b"replacement"),
        }
    }
}
