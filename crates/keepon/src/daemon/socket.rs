//! The daemon's socket path: claimed only when free or stale, removed on exit only if it is still ours.

use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// A listening socket bound at a path, remembered by device and inode so that only this socket file is
/// ever removed.
pub struct BoundSocket {
    /// The listener.
    pub listener: UnixListener,
    path: PathBuf,
    id: (u64, u64),
}

/// Bind at `path`. Refuses when a daemon answers there (connect succeeds), when the path exists and is not
/// a socket, or when a socket there cannot be probed; removes only a stale socket (connect refused).
pub fn claim(path: &Path, mode: u32) -> Result<BoundSocket, String> {
    let shown = path.display();
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(format!("daemon.socket {shown}: cannot inspect it: {e}")),
        Ok(m) if !m.file_type().is_socket() => {
            return Err(format!("daemon.socket {shown} exists and is not a socket; refusing to replace it"));
        }
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => return Err(format!("daemon.socket {shown}: a daemon is already serving there")),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                std::fs::remove_file(path)
                    .map_err(|e| format!("daemon.socket {shown}: cannot remove the stale socket: {e}"))?;
            }
            Err(e) => {
                return Err(format!(
                    "daemon.socket {shown} is a socket that cannot be probed ({e}); refusing to replace it"
                ))
            }
        },
    }
    let listener = UnixListener::bind(path).map_err(|e| format!("daemon.socket {shown}: cannot bind: {e}"))?;
    let m = std::fs::symlink_metadata(path).map_err(|e| format!("cannot inspect {shown}: {e}"))?;
    let bound = BoundSocket { listener, path: path.into(), id: (m.dev(), m.ino()) };
    match listener_setup(&bound, mode) {
        Ok(()) => Ok(bound),
        Err(e) => {
            bound.close();
            Err(e)
        }
    }
}

fn listener_setup(b: &BoundSocket, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    b.listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    std::fs::set_permissions(&b.path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set the mode of {}: {e}", b.path.display()))
}

impl BoundSocket {
    /// Close the listener and remove the socket file if it is still the one this daemon bound.
    pub fn close(self) {
        let BoundSocket { listener, path, id } = self;
        drop(listener);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| (m.dev(), m.ino()) == id) {
            let _ = std::fs::remove_file(&path);
        }
    }
}
