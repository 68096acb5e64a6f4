//! The metrics file (`daemon.metrics_file`) written the way a root daemon must: never through anything another
//! user could have planted, and never over anything keepon did not write.
//!
//! The directory is opened once, at start; every write then works relative to it (`openat`, `renameat`), so a
//! directory swapped later does not redirect the daemon. Each write:
//!
//! 1. looks at what is at `PATH` without following it: nothing, the file this daemon put there last, or a
//!    regular file of the daemon's own user that holds keepon metrics (a previous run's) may be replaced; a
//!    symlink, a device node, a socket, a directory or any other file is left alone and the write refused;
//! 2. creates `PATH.tmp` with `O_CREAT | O_EXCL | O_NOFOLLOW` (mode 0644): if anything is already there, it is
//!    not followed — a leftover of the daemon's own (a regular file of its user with one link) is removed and
//!    the create tried once more; anything else refuses the write;
//! 3. writes the metrics, then renames `PATH.tmp` over `PATH` (a reader never sees half a file).
//!
//! A refusal names what is in the way; the daemon says it once and again only when the reason changes.

use std::ffi::CString;
use std::io::Write as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What the metrics of a keepon daemon begin with (the first line [`super::metrics::render`] writes).
const SIGNATURE: &[u8] = b"# HELP keepon_";

/// The metrics file of one daemon.
pub struct MetricsFile {
    dir: OwnedFd,
    name: CString,
    tmp: CString,
    path: PathBuf,
    /// Device and inode of the file this daemon last put at `PATH`.
    ours: Option<(u64, u64)>,
}

/// What sits at a name, looked at without following it.
enum Entry {
    Missing,
    Regular { dev: u64, ino: u64, uid: u32, links: u64 },
    Other(&'static str),
}

fn cstr(b: &[u8]) -> CString {
    CString::new(b).expect("no NUL in a path from the OS")
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

impl MetricsFile {
    /// Open the directory of `path` and check what is at `path` now (a configuration that names a device, a
    /// socket or somebody else's file is refused at start, naming it).
    pub fn open(path: &Path) -> Result<MetricsFile, String> {
        let bad = |why: &str| format!("daemon.metrics_file {}: {why}", path.display());
        let name = match path.file_name() {
            Some(n) if !path.as_os_str().as_bytes().ends_with(b"/") => n,
            _ => return Err(bad("names no file")),
        };
        let dir_path = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let dir_c = cstr(dir_path.as_os_str().as_bytes());
        // SAFETY: `dir_c` is a valid NUL-terminated string; the returned fd is owned below.
        let fd = unsafe { libc::open(dir_c.as_ptr(), libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(bad(&format!("cannot open its directory: {}", std::io::Error::last_os_error())));
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut tmp = name.as_bytes().to_vec();
        tmp.extend_from_slice(b".tmp");
        let f = MetricsFile { dir, name: cstr(name.as_bytes()), tmp: cstr(&tmp), path: path.to_owned(), ours: None };
        f.replaceable().map_err(|e| bad(&e))?;
        Ok(f)
    }

    /// A warning for the start line when other users may write the directory (they cannot make keepon write
    /// through what they plant, but they can replace or remove the metrics).
    pub fn shared_directory_warning(&self) -> Option<String> {
        let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
        // SAFETY: the fd is a valid open directory; `st` is valid for a write of a `stat`.
        if unsafe { libc::fstat(self.dir.as_raw_fd(), st.as_mut_ptr()) } != 0 {
            return None;
        }
        // SAFETY: fstat succeeded, so `st` is initialised.
        let st = unsafe { st.assume_init() };
        let others_write = st.st_mode & 0o002 != 0 || (st.st_mode & 0o020 != 0 && st.st_gid != 0);
        (others_write && st.st_mode & libc::S_ISVTX == 0).then(|| {
            format!(
                "daemon.metrics_file {}: its directory is writable by other users (mode {:o}): they can replace \
                 or remove the metrics (keepon never writes through what they put there); use a directory only \
                 the daemon's user may write",
                self.path.display(),
                st.st_mode & 0o7777
            )
        })
    }

    fn stat(&self, name: &CString) -> std::io::Result<Entry> {
        let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
        // SAFETY: valid directory fd, NUL-terminated name, `st` valid for a write.
        let rc =
            unsafe { libc::fstatat(self.dir.as_raw_fd(), name.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::ENOENT) { Ok(Entry::Missing) } else { Err(e) };
        }
        // SAFETY: fstatat succeeded, so `st` is initialised.
        let st = unsafe { st.assume_init() };
        Ok(match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => Entry::Regular { dev: st.st_dev, ino: st.st_ino, uid: st.st_uid, links: st.st_nlink },
            libc::S_IFLNK => Entry::Other("a symbolic link"),
            libc::S_IFCHR => Entry::Other("a character device"),
            libc::S_IFBLK => Entry::Other("a block device"),
            libc::S_IFSOCK => Entry::Other("a socket"),
            libc::S_IFIFO => Entry::Other("a FIFO"),
            libc::S_IFDIR => Entry::Other("a directory"),
            _ => Entry::Other("not a regular file"),
        })
    }

    /// The first bytes of the regular file at `PATH` (opened without following a link, without blocking).
    fn starts_with_signature(&self) -> bool {
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        // SAFETY: valid directory fd and NUL-terminated name.
        let fd = unsafe { libc::openat(self.dir.as_raw_fd(), self.name.as_ptr(), flags) };
        if fd < 0 {
            return false;
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let mut head = [0u8; SIGNATURE.len()];
        std::io::Read::read_exact(&mut &f, &mut head).is_ok() && head == SIGNATURE
    }

    /// May the write replace what is at `PATH`? (Err: what is there.)
    fn replaceable(&self) -> Result<(), String> {
        match self.stat(&self.name).map_err(|e| format!("cannot look at it: {e}"))? {
            Entry::Missing => Ok(()),
            Entry::Regular { dev, ino, .. } if self.ours == Some((dev, ino)) => Ok(()),
            Entry::Regular { uid, .. } if uid == euid() && self.starts_with_signature() => Ok(()),
            Entry::Regular { uid, .. } => Err(format!(
                "a regular file that does not hold keepon metrics of this daemon's user (owner uid {uid}) is there: \
                 not replacing it"
            )),
            Entry::Other(what) => Err(format!("{what} is there: not replacing it")),
        }
    }

    /// Create `PATH.tmp`, never following or reusing what someone else put there.
    fn create_tmp(&self) -> Result<std::fs::File, String> {
        let tmp_path = || format!("{}.tmp", self.path.display());
        for attempt in 0..2 {
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            // SAFETY: valid directory fd and NUL-terminated name; mode is a plain integer.
            let fd = unsafe { libc::openat(self.dir.as_raw_fd(), self.tmp.as_ptr(), flags, 0o644 as libc::c_uint) };
            if fd >= 0 {
                // SAFETY: `fd` is a new descriptor that nothing else owns.
                return Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }));
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) || attempt == 1 {
                return Err(format!("cannot create {}: {e}", tmp_path()));
            }
            match self.stat(&self.tmp) {
                Ok(Entry::Regular { uid, links: 1, .. }) if uid == euid() => {
                    // A leftover of this user's (a write cut short): remove it and try once more.
                    // SAFETY: valid directory fd and NUL-terminated name.
                    unsafe { libc::unlinkat(self.dir.as_raw_fd(), self.tmp.as_ptr(), 0) };
                }
                Ok(Entry::Regular { uid, links, .. }) => {
                    return Err(format!(
                        "{} exists and is not keepon's (owner uid {uid}, {links} links): refusing to write through \
                         it; remove it",
                        tmp_path()
                    ))
                }
                Ok(Entry::Other(what)) => {
                    return Err(format!("{} exists and is {what}: refusing to write through it; remove it", tmp_path()))
                }
                Ok(Entry::Missing) => {} // gone meanwhile: try again
                Err(e) => return Err(format!("cannot look at {}: {e}", tmp_path())),
            }
        }
        unreachable!("the loop returns on its second attempt")
    }

    /// Replace the metrics file with `text`; Err says what was refused or failed (nothing was written through
    /// anything found in the way).
    pub fn write(&mut self, text: &str) -> Result<(), String> {
        self.replaceable().map_err(|e| format!("{}: {e}", self.path.display()))?;
        let mut f = self.create_tmp()?;
        // Readable by node_exporter (another user) whatever the daemon's umask (the unit's is 0077).
        use std::os::unix::fs::PermissionsExt;
        let _ = f.set_permissions(std::fs::Permissions::from_mode(0o644));
        let unlink_tmp = |dir: &OwnedFd, tmp: &CString| {
            // SAFETY: valid directory fd and NUL-terminated name.
            unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
        };
        if let Err(e) = f.write_all(text.as_bytes()) {
            unlink_tmp(&self.dir, &self.tmp);
            return Err(format!("cannot write {}.tmp: {e}", self.path.display()));
        }
        let meta = f.metadata().map_err(|e| e.to_string())?;
        drop(f);
        // SAFETY: valid directory fd (both sides) and NUL-terminated names.
        let rc = unsafe {
            libc::renameat(self.dir.as_raw_fd(), self.tmp.as_ptr(), self.dir.as_raw_fd(), self.name.as_ptr())
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            unlink_tmp(&self.dir, &self.tmp);
            return Err(format!("cannot rename {}.tmp over it: {e}", self.path.display()));
        }
        use std::os::unix::fs::MetadataExt;
        self.ours = Some((meta.dev(), meta.ino()));
        Ok(())
    }

    /// The path, as configured.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const METRICS: &str = "# HELP keepon_info x\nkeepon_info 1\n";

    #[test]
    fn writes_and_rewrites_its_own_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.prom");
        let mut f = MetricsFile::open(&p).unwrap();
        f.write(METRICS).unwrap();
        f.write(&format!("{METRICS}keepon_x 2\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o644, "readable by others");
        assert!(std::fs::read_to_string(&p).unwrap().ends_with("keepon_x 2\n"));
        assert!(!d.path().join("m.prom.tmp").exists());
        // A previous run's file (this user's, keepon metrics) is taken over by a new daemon.
        let mut g = MetricsFile::open(&p).unwrap();
        g.write(METRICS).unwrap();
    }

    /// The attack of issue 29: a user who can write the directory plants `PATH.tmp` → a victim. The victim stays
    /// intact, the write is refused naming the link, and the metrics resume once it is gone.
    #[test]
    fn a_planted_symlink_is_never_followed() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let p = d.path().join("m.prom");
        let mut f = MetricsFile::open(&p).unwrap();
        assert!(f.shared_directory_warning().unwrap().contains("writable by other users"));
        std::os::unix::fs::symlink(&victim, d.path().join("m.prom.tmp")).unwrap();
        let e = f.write(METRICS).unwrap_err();
        assert!(e.contains("m.prom.tmp exists and is a symbolic link: refusing"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(!p.exists());
        std::fs::remove_file(d.path().join("m.prom.tmp")).unwrap();
        f.write(METRICS).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), METRICS);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    }

    /// Whatever sits at `PATH` that keepon did not write stays: a device node, a socket, a symlink, a
    /// configuration file; a leftover `PATH.tmp` of the daemon's own is cleaned up.
    #[test]
    fn never_replaces_what_it_did_not_write() {
        let d = tempfile::tempdir().unwrap();
        // A device node: refused at start.
        let e = MetricsFile::open(Path::new("/dev/null")).err().unwrap();
        assert!(e.contains("a character device is there: not replacing it"), "{e}");
        // A socket (the daemon's own, say).
        let sock = d.path().join("keepon.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = MetricsFile::open(&sock).err().unwrap();
        assert!(e.contains("a socket is there"), "{e}");
        // A configuration file.
        let cfg = d.path().join("keepon.toml");
        std::fs::write(&cfg, "[link]\n").unwrap();
        let e = MetricsFile::open(&cfg).err().unwrap();
        assert!(e.contains("does not hold keepon metrics"), "{e}");
        // A symlink planted at PATH after start: refused, its target untouched.
        let p = d.path().join("m.prom");
        let mut f = MetricsFile::open(&p).unwrap();
        f.write(METRICS).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&cfg, &p).unwrap();
        assert!(f.write(METRICS).unwrap_err().contains("a symbolic link is there"));
        assert_eq!(std::fs::read_to_string(&cfg).unwrap(), "[link]\n");
        // A leftover tmp of our own (a write cut short) does not stop the next write.
        std::fs::remove_file(&p).unwrap();
        std::fs::write(d.path().join("m.prom.tmp"), "half").unwrap();
        f.write(METRICS).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), METRICS);
        assert!(MetricsFile::open(&d.path().join("sub/")).is_err());
    }
}
