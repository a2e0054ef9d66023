//! Listening: the gRPC address bound (TCP, or a Unix socket and its file), and
//! connections accepted within bounds: a pause after a failed accept, a cap on
//! the connections held at once, and a deadline for a connection's opening bytes.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, BufWriter, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::Connected;

/// How long a listener waits after an accept failed. It fails mostly when the
/// process is out of file descriptors, and trying again at once would spin a
/// core (tonic's accept loop and hyper's alike) until one is freed.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// How long a gRPC connection has to send its opening bytes: the HTTP/2
/// preface and the header of the SETTINGS frame that follows it (24 + 9 bytes),
/// which every client sends as soon as it connects. Keepalive pings only start
/// after them, so a connection that never sends them would hold its place for ever.
pub const OPENING_TIMEOUT: Duration = Duration::from_secs(10);

/// See `OPENING_TIMEOUT`.
const OPENING_BYTES: usize = 24 + 9;

/// A bound gRPC listener: TCP or a Unix socket.
#[derive(Debug)]
pub enum Listener {
    /// `host:port`.
    Tcp(TcpListener),
    /// `unix:/path`; the file is removed when the server stops.
    Unix(UnixListener, SocketFile),
}

/// The file of a Unix socket this process bound, told from a file another process bound at
/// the same path later (after this one stopped serving, or after someone removed the file):
/// only our own is removed when the server stops, so a sidecar that stops late does not take
/// its successor's socket away.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    /// The file's device and inode, read right after binding.
    id: Option<(u64, u64)>,
}

impl SocketFile {
    fn bound_at(path: PathBuf) -> SocketFile {
        let id = file_id(&path);
        SocketFile { path, id }
    }

    /// Where the socket is.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Removes the file, if it is still the one bound here.
    pub fn remove(&self) {
        if self.id.is_some() && file_id(&self.path) == self.id {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn file_id(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// A Unix socket's permissions: anyone who can reach its folder may dial it.
const SOCKET_MODE: u32 = 0o666;

impl Listener {
    /// Binds `host:port` or `unix:/path`.
    pub async fn bind(address: &str) -> std::io::Result<Listener> {
        if let Some(path) = address.strip_prefix("unix:") {
            let path = PathBuf::from(path);
            // A socket file left by a killed sidecar would make bind fail: it is removed. One a
            // process still serves on is not: taking it over would leave that process running
            // but unreachable, and for good once this one stopped and removed the file.
            if let Ok(meta) = std::fs::symlink_metadata(&path) {
                use std::os::unix::fs::FileTypeExt;
                if meta.file_type().is_socket() {
                    if tokio::net::UnixStream::connect(&path).await.is_ok() {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::AddrInUse,
                            format!(
                                "{} is in use: a process (another sidecar?) serves on it; stop it or listen elsewhere",
                                path.display()
                            ),
                        ));
                    }
                    std::fs::remove_file(&path)?;
                } else {
                    // Not ours to remove; bind would say only "Address already in use".
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        format!("{} exists and is not a socket: remove it or listen elsewhere", path.display()),
                    ));
                }
            }
            let listener = UnixListener::bind(&path)?;
            // Dialling takes write permission, and the agent beside the sidecar runs as another
            // user (the manifests' 10001 and 65532): the umask's 0755 locked it out. As
            // PostgreSQL's and MySQL's sockets, it is open to all; its folder says who gets to it.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(SOCKET_MODE))?;
            return Ok(Listener::Unix(listener, SocketFile::bound_at(path)));
        }
        Ok(Listener::Tcp(TcpListener::bind(address).await?))
    }

    /// The bound address as clients dial it (`127.0.0.1:43567` or `unix:/path`).
    pub fn address(&self) -> String {
        match self {
            Listener::Tcp(l) => l.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            Listener::Unix(_, file) => format!("unix:{}", file.path().display()),
        }
    }
}

/// `incoming`, waiting `ACCEPT_PAUSE` after each failed accept, which it logs.
pub fn paced<T, E: std::fmt::Display>(
    incoming: impl Stream<Item = Result<T, E>>,
    listener: &'static str,
) -> impl Stream<Item = Result<T, E>> {
    incoming.then(move |accepted| async move {
        if let Err(error) = &accepted {
            accept_failed(listener, error).await;
        }
        accepted
    })
}

/// What a connection's writes gather in before they go out together (see [`counted`]): the
/// largest frame h2 sends (16 KiB) with room for the frames before it, in one of the allocator's
/// size classes. Its pages are taken as writes first reach them: a connection past the HTTP/2
/// handshake holds one more (3,000 connections: 12.3 KiB each without the buffer, 16.6 with it).
const WRITE_BUFFER: usize = 20 * 1024;

/// The accepted connections of `incoming` while one of `places` is free, each
/// holding its place until it closes; past them, a connection is closed at once.
///
/// Each connection's writes gather in a buffer and go out when h2 flushes, and h2 is told that
/// the connection takes no vectored writes. With them, h2 wrote a DATA frame of 256 bytes or
/// more apart from what followed it: a failure's verdict (mostly 256 to 1,000 bytes) went out
/// in one write and the trailers that end its Report in another. Without them, h2 copies a
/// frame under 1 KiB into its own buffer, and writes a larger one as two chunks, its head
/// and its payload, which the buffer joins again. With ghz sending a success and a failure in
/// turn, the sidecar made 31,128 writes for 20,000 Reports, and 22,429 this way (`strace -c`).
/// On the Observe bench, whose verdicts go out many to a frame, its thread made 0.59 writes a
/// read where it made 0.72 (`perf stat`, 2 s of each): no vectored writes without the buffer
/// made it 1.18, two a frame of 1 KiB or more.
pub fn counted<IO: AsyncWrite, E>(
    incoming: impl Stream<Item = Result<IO, E>>,
    places: Arc<Semaphore>,
) -> impl Stream<Item = Result<Counted<BufWriter<IO>>, E>> {
    let mut refused = Refused::new("grpc");
    incoming.filter_map(move |accepted| match accepted.map(|io| (places.clone().try_acquire_owned(), io)) {
        Ok((Ok(place), io)) => {
            Some(Ok(Counted::awaiting_opening(BufWriter::with_capacity(WRITE_BUFFER, io), place, OPENING_TIMEOUT)))
        }
        Ok((Err(_), _dropped)) => {
            refused.note();
            None
        }
        Err(error) => Some(Err(error)),
    })
}

/// An accepted connection and its place among those served at once.
pub struct Counted<IO> {
    /// Declared before `io`, so it is given back before the connection is closed: a client
    /// that sees its connection end may connect again at once and find the place free.
    /// Given back early (`None`) when the connection is failed for a late opening.
    place: Option<OwnedSemaphorePermit>,
    io: IO,
    /// Until its opening bytes arrived: when they must have, and how many are still awaited.
    opening: Option<(Pin<Box<tokio::time::Sleep>>, usize)>,
}

impl<IO> Counted<IO> {
    /// `io` holding `place` until it is dropped.
    pub(crate) fn new(io: IO, place: OwnedSemaphorePermit) -> Self {
        Counted { place: Some(place), io, opening: None }
    }

    /// `io` holding `place`, and failing its reads once `within` is over unless its
    /// opening bytes arrived (an HTTP/2 connection's).
    fn awaiting_opening(io: IO, place: OwnedSemaphorePermit, within: Duration) -> Self {
        let deadline = Box::pin(tokio::time::sleep(within));
        Counted { opening: Some((deadline, OPENING_BYTES)), ..Counted::new(io, place) }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Counted<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Some((deadline, awaited)) = &mut this.opening {
            *awaited = awaited.saturating_sub(buf.filled().len() - before);
            if *awaited == 0 {
                this.opening = None;
            } else if polled.is_pending() && deadline.as_mut().poll(cx).is_ready() {
                let late = format!("no HTTP/2 preface within {} s", OPENING_TIMEOUT.as_secs());
                // Given back before the error reaches hyper, which may shut the socket down
                // (and the client see its end) before it drops the connection.
                this.place = None;
                return Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, late)));
            }
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Counted<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    /// False, though a socket can: see [`counted`]. The metrics endpoint's HTTP/1 connections
    /// are counted too, without the buffer: hyper then copies a response's head and body into
    /// one buffer, where it gave both to one vectored write, one write either way.
    fn is_write_vectored(&self) -> bool {
        false
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<IO: Connected + AsyncWrite> Connected for Counted<BufWriter<IO>> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.get_ref().connect_info()
    }
}

/// Connections closed for want of a place, logged at most every 10 s with how many.
pub(crate) struct Refused {
    listener: &'static str,
    since_logged: u64,
    logged_at: Option<Instant>,
}

impl Refused {
    pub(crate) fn new(listener: &'static str) -> Self {
        Refused { listener, since_logged: 0, logged_at: None }
    }

    pub(crate) fn note(&mut self) {
        self.since_logged += 1;
        if self.logged_at.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
            tracing::warn!(listener = self.listener, closed = self.since_logged, "connections past the cap closed");
            self.since_logged = 0;
            self.logged_at = Some(Instant::now());
        }
    }
}

/// Logs a failed accept and returns the pause to wait before the next.
pub(crate) fn accept_failed(listener: &'static str, error: &dyn std::fmt::Display) -> tokio::time::Sleep {
    tracing::warn!(listener, %error, "accept failed; trying again in 100 ms");
    tokio::time::sleep(ACCEPT_PAUSE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection that notes, as it closes, how many places were free.
    struct Closing {
        places: Arc<Semaphore>,
        free_at_close: Arc<std::sync::Mutex<Option<usize>>>,
    }

    impl Drop for Closing {
        fn drop(&mut self) {
            *self.free_at_close.lock().unwrap() = Some(self.places.available_permits());
        }
    }

    #[tokio::test]
    async fn a_unix_socket_may_be_dialled_by_another_user() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.sock");
        let _listener = Listener::bind(&format!("unix:{}", path.display())).await.unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666, "{mode:o}");
    }

    #[tokio::test]
    async fn a_file_that_is_not_a_socket_is_named_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, "kept").unwrap();
        let Err(err) = Listener::bind(&format!("unix:{}", path.display())).await else { panic!("bound") };
        assert!(
            err.to_string().ends_with("notes.txt exists and is not a socket: remove it or listen elsewhere"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "kept");
    }

    #[test]
    fn a_connection_gives_back_its_place_before_it_closes() {
        let places = Arc::new(Semaphore::new(1));
        let free_at_close = Arc::new(std::sync::Mutex::new(None));
        let io = Closing { places: places.clone(), free_at_close: free_at_close.clone() };
        let counted = Counted::new(io, places.clone().try_acquire_owned().unwrap());
        assert_eq!(places.available_permits(), 0);
        drop(counted);
        assert_eq!(*free_at_close.lock().unwrap(), Some(1), "the connection closed while it held its place");
    }

    #[tokio::test]
    async fn a_connection_failed_for_a_late_opening_has_given_back_its_place() {
        use tokio::io::AsyncReadExt;
        let places = Arc::new(Semaphore::new(1));
        let (_client, server) = tokio::io::duplex(64);
        let place = places.clone().try_acquire_owned().unwrap();
        let mut counted = Counted::awaiting_opening(server, place, Duration::from_millis(20));
        let read = counted.read(&mut [0u8; 64]).await;
        assert_eq!(read.map_err(|e| e.kind()), Err(std::io::ErrorKind::TimedOut));
        assert_eq!(places.available_permits(), 1, "the failed connection still holds its place");
    }

    #[tokio::test]
    async fn a_connection_that_sent_its_opening_keeps_its_place() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let places = Arc::new(Semaphore::new(1));
        let (mut client, server) = tokio::io::duplex(64);
        let place = places.clone().try_acquire_owned().unwrap();
        let mut counted = Counted::awaiting_opening(server, place, Duration::from_millis(20));
        client.write_all(&[0u8; OPENING_BYTES]).await.unwrap();
        let mut opening = [0u8; OPENING_BYTES];
        counted.read_exact(&mut opening).await.unwrap();
        tokio::time::sleep(Duration::from_millis(40)).await;
        client.write_all(b"late but fine").await.unwrap();
        assert_eq!(counted.read(&mut [0u8; 64]).await.unwrap(), 13);
        assert_eq!(places.available_permits(), 0);
    }
}
