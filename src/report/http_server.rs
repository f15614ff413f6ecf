//! The exporter's server, built so that no client can stall it: one thread owns every socket
//! (non-blocking, `poll`), keeps each connection's request head up to the header limit with
//! deadlines, and hands complete GET/HEAD requests to a fixed pool of workers; their answers
//! come back to the socket thread, which writes them without blocking. A slow or silent client
//! therefore costs at most one buffer of the header limit, never a thread, and the number of
//! connections is bounded (the oldest unfinished one makes room for a new one).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::http::{self, Method, Parsed, Request, Response, Status};

/// The server's limits; [`Limits::default`] is what `pcieperf serve` uses (docs/metrics.md).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Most bytes of a request head kept per connection (431 beyond).
    pub header_limit_bytes: usize,
    /// A connection that sends nothing for this long while its head is incomplete is closed.
    pub idle_timeout: Duration,
    /// The whole request head must arrive within this time of the accept.
    pub head_timeout: Duration,
    /// A worker's answer must come within this time (a sysfs read that hangs).
    pub answer_timeout: Duration,
    /// The client must take the whole answer within this time.
    pub write_timeout: Duration,
    /// After the answer, what the client still sends (a body) is read and dropped for this long
    /// before closing, so the client reads the answer rather than a connection reset.
    pub linger: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
    /// Worker threads that run the handler.
    pub workers: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            header_limit_bytes: http::HEADER_LIMIT_BYTES,
            idle_timeout: Duration::from_secs(2),
            head_timeout: Duration::from_secs(5),
            answer_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(10),
            linger: Duration::from_secs(1),
            max_connections: 512,
            workers: 4,
        }
    }
}

/// What answers a GET or HEAD (for HEAD the body is left out by the server).
pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// How often the loop looks at the stop flag and the deadlines at the latest.
const POLL_SLICE: Duration = crate::cancel::POLL_SLICE;

/// Most connections accepted per wake-up, so reads and answers are not starved by a flood.
const ACCEPT_BATCH: usize = 64;

/// Bytes read from a socket at a time.
const READ_CHUNK_BYTES: usize = 4096;

/// Serve `listener` until `stop` is set; returns within about [`POLL_SLICE`] of that.
pub fn serve(listener: TcpListener, limits: &Limits, handler: Handler, stop: &AtomicBool) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let (waker, wake_signal) = UnixStream::pair()?;
    waker.set_nonblocking(true)?;
    wake_signal.set_nonblocking(true)?;
    let pool = WorkerPool::start(limits, handler, waker)?;
    let mut server = Server { listener, limits: limits.clone(), pool, connections: HashMap::new(), next_id: 0, accept_paused_until: None };
    while !stop.load(Ordering::SeqCst) {
        server.turn(&wake_signal)?;
    }
    Ok(())
}

/// Where a connection is in its one exchange.
enum Phase {
    /// Receiving the request head.
    Reading { head: Vec<u8>, last_byte: Instant },
    /// A worker is answering.
    Answering { head_only: bool },
    /// Sending the answer.
    Writing { out: Outgoing },
    /// Answer sent: dropping what the client still sends until it closes or the linger ends.
    Lingering,
}

struct Connection {
    stream: TcpStream,
    phase: Phase,
    /// When the connection entered its phase.
    since: Instant,
}

impl Connection {
    fn deadline(&self, limits: &Limits) -> Instant {
        match &self.phase {
            Phase::Reading { last_byte, .. } => (self.since + limits.head_timeout).min(*last_byte + limits.idle_timeout),
            Phase::Answering { .. } => self.since + limits.answer_timeout,
            Phase::Writing { .. } => self.since + limits.write_timeout,
            Phase::Lingering => self.since + limits.linger,
        }
    }

    /// A connection that may be closed to make room: one that is not owed an answer.
    fn evictable(&self) -> bool {
        matches!(self.phase, Phase::Reading { .. } | Phase::Lingering)
    }

    fn poll_events(&self) -> libc::c_short {
        match self.phase {
            Phase::Reading { .. } | Phase::Lingering => libc::POLLIN,
            Phase::Writing { .. } => libc::POLLOUT,
            Phase::Answering { .. } => 0,
        }
    }
}

/// An answer being written: head and body, and how much of them is gone.
struct Outgoing {
    head: Vec<u8>,
    body: Arc<[u8]>,
    sent_bytes: usize,
}

impl Outgoing {
    fn new(response: &Response, head_only: bool) -> Outgoing {
        let body = if head_only { Arc::from(Vec::new()) } else { Arc::clone(&response.body) };
        Outgoing { head: response.head_bytes(), body, sent_bytes: 0 }
    }

    /// Write what the socket takes; true once everything is sent.
    fn write_to(&mut self, stream: &mut TcpStream) -> io::Result<bool> {
        loop {
            let head_len = self.head.len();
            let rest = if self.sent_bytes < head_len { &self.head[self.sent_bytes..] } else { &self.body[self.sent_bytes - head_len..] };
            if rest.is_empty() {
                return Ok(true);
            }
            // `write`, not `write_vectored`: std sends with MSG_NOSIGNAL only in `write`, and
            // a client that hung up must not kill us, whatever SIGPIPE's disposition.
            match stream.write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent_bytes += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// What to do with a connection after it was served.
enum Next {
    Keep,
    Close,
    Submit(Request),
    Answer(Response),
}

struct Server {
    listener: TcpListener,
    limits: Limits,
    pool: WorkerPool,
    connections: HashMap<u64, Connection>,
    next_id: u64,
    /// Set when accepting failed for want of descriptors: the listener is left alone a slice.
    accept_paused_until: Option<Instant>,
}

impl Server {
    /// One wait and everything that became ready in it.
    fn turn(&mut self, wake_signal: &UnixStream) -> io::Result<()> {
        let now = Instant::now();
        let accepting = self.accept_paused_until.is_none_or(|until| now >= until);
        let mut fds = vec![pollfd(self.listener.as_raw_fd(), if accepting { libc::POLLIN } else { 0 }), pollfd(wake_signal.as_raw_fd(), libc::POLLIN)];
        let mut ids = Vec::with_capacity(self.connections.len());
        for (id, connection) in &self.connections {
            let events = connection.poll_events();
            if events != 0 {
                fds.push(pollfd(connection.stream.as_raw_fd(), events));
                ids.push(*id);
            }
        }
        poll(&mut fds, POLL_SLICE)?;
        if fds[1].revents != 0 {
            drain(wake_signal);
        }
        while let Ok((id, response)) = self.pool.answers.try_recv() {
            self.deliver(id, response);
        }
        for (fd, id) in fds[2..].iter().zip(ids) {
            if fd.revents != 0 {
                self.serve_ready(id);
            }
        }
        if fds[0].revents != 0 {
            self.accept_new();
        }
        self.close_expired(Instant::now());
        Ok(())
    }

    fn accept_new(&mut self) {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, _)) => self.admit(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if out_of_resources(&e) => {
                    // The listener would stay readable: wait a slice instead of spinning, and
                    // free a descriptor for the next try.
                    self.accept_paused_until = Some(Instant::now() + POLL_SLICE);
                    self.evict_oldest();
                    return;
                }
                // A connection reset before it was accepted, and the like: the next one.
                Err(_) => {}
            }
        }
    }

    fn admit(&mut self, stream: TcpStream) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        // Answers are written whole; no reason to wait for more.
        let _ = stream.set_nodelay(true);
        if self.connections.len() >= self.limits.max_connections && !self.evict_oldest() {
            // Every connection is owed an answer: this one is closed unanswered.
            return;
        }
        let now = Instant::now();
        let phase = Phase::Reading { head: Vec::new(), last_byte: now };
        self.connections.insert(self.next_id, Connection { stream, phase, since: now });
        self.next_id += 1;
    }

    /// Close the oldest connection that is not owed an answer; false when there is none.
    fn evict_oldest(&mut self) -> bool {
        let oldest = self.connections.iter().filter(|(_, c)| c.evictable()).min_by_key(|(_, c)| c.since).map(|(id, _)| *id);
        oldest.is_some_and(|id| self.connections.remove(&id).is_some())
    }

    fn serve_ready(&mut self, id: u64) {
        let Some(connection) = self.connections.get_mut(&id) else { return };
        let next = match &mut connection.phase {
            Phase::Reading { head, last_byte } => read_head(&mut connection.stream, head, last_byte, self.limits.header_limit_bytes),
            Phase::Writing { out } => match out.write_to(&mut connection.stream) {
                Ok(true) => {
                    // Our side is done: the FIN tells the client the answer is whole.
                    let _ = connection.stream.shutdown(Shutdown::Write);
                    connection.phase = Phase::Lingering;
                    connection.since = Instant::now();
                    Next::Keep
                }
                Ok(false) => Next::Keep,
                Err(_) => Next::Close,
            },
            Phase::Lingering => discard_input(&mut connection.stream),
            Phase::Answering { .. } => Next::Keep,
        };
        self.follow(id, next);
    }

    fn follow(&mut self, id: u64, next: Next) {
        match next {
            Next::Keep => {}
            Next::Close => {
                self.connections.remove(&id);
            }
            Next::Submit(request) => {
                let head_only = request.method == Method::Head;
                match self.pool.submit(id, request) {
                    Ok(()) => self.enter(id, Phase::Answering { head_only }),
                    Err(response) => self.respond(id, &response, head_only),
                }
            }
            Next::Answer(response) => self.respond(id, &response, false),
        }
    }

    /// A worker's answer for connection `id` (gone already if it timed out or was evicted).
    fn deliver(&mut self, id: u64, response: Response) {
        if let Some(Phase::Answering { head_only }) = self.connections.get(&id).map(|c| &c.phase) {
            let head_only = *head_only;
            self.respond(id, &response, head_only);
        }
    }

    fn respond(&mut self, id: u64, response: &Response, head_only: bool) {
        self.enter(id, Phase::Writing { out: Outgoing::new(response, head_only) });
        // The socket is almost always writable now: no need to wait a poll for it.
        self.serve_ready(id);
    }

    fn enter(&mut self, id: u64, phase: Phase) {
        if let Some(connection) = self.connections.get_mut(&id) {
            connection.phase = phase;
            connection.since = Instant::now();
        }
    }

    fn close_expired(&mut self, now: Instant) {
        let limits = &self.limits;
        self.connections.retain(|_, connection| connection.deadline(limits) > now);
    }
}

/// Read what arrived of a request head, up to the limit, and judge it.
fn read_head(stream: &mut TcpStream, head: &mut Vec<u8>, last_byte: &mut Instant, limit_bytes: usize) -> Next {
    let mut chunk = [0u8; READ_CHUNK_BYTES];
    // A client may send its request and shut its side (`printf … | nc`): still answered.
    let mut ended = false;
    while head.len() < limit_bytes && !ended {
        let room = (limit_bytes - head.len()).min(READ_CHUNK_BYTES);
        match stream.read(&mut chunk[..room]) {
            Ok(0) => ended = true,
            Ok(n) => {
                head.extend_from_slice(&chunk[..n]);
                *last_byte = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Next::Close,
        }
    }
    match http::parse_head(head, limit_bytes) {
        Parsed::Partial if ended => Next::Close,
        Parsed::Partial => Next::Keep,
        Parsed::Request(request) => Next::Submit(request),
        Parsed::Refused(response) => Next::Answer(response),
    }
}

/// Read and drop what the client sends after its answer; close at its end.
fn discard_input(stream: &mut TcpStream) -> Next {
    let mut chunk = [0u8; READ_CHUNK_BYTES];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return Next::Close,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Next::Close,
        }
    }
}

fn out_of_resources(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM))
}

fn pollfd(fd: i32, events: libc::c_short) -> libc::pollfd {
    libc::pollfd { fd, events, revents: 0 }
}

/// Wait until one of `fds` is ready or `timeout` passed (a signal ends the wait early).
fn poll(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<()> {
    let timeout_ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfd structures.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if ready < 0 {
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
    Ok(())
}

fn drain(mut wake_signal: &UnixStream) {
    let mut bytes = [0u8; 64];
    while matches!(wake_signal.read(&mut bytes), Ok(n) if n > 0) {}
}

struct Job {
    id: u64,
    request: Request,
}

/// A fixed number of threads running the handler; answers come back on `answers`, each
/// followed by a byte on the waker that ends the socket thread's poll.
struct WorkerPool {
    jobs: SyncSender<Job>,
    answers: Receiver<(u64, Response)>,
}

impl WorkerPool {
    fn start(limits: &Limits, handler: Handler, waker: UnixStream) -> io::Result<WorkerPool> {
        // Jobs come from connections, which are bounded: so is the queue.
        let (jobs, queue) = mpsc::sync_channel::<Job>(limits.max_connections);
        let queue = Arc::new(Mutex::new(queue));
        let (answer, answers) = mpsc::channel();
        let waker = Arc::new(waker);
        for index in 0..limits.workers.max(1) {
            let (queue, handler, answer, waker) = (Arc::clone(&queue), Arc::clone(&handler), answer.clone(), Arc::clone(&waker));
            std::thread::Builder::new().name(format!("serve-worker-{index}")).spawn(move || work(&queue, &handler, &answer, &waker))?;
        }
        Ok(WorkerPool { jobs, answers })
    }

    /// Queue a request; the answer to send at once when the queue is full.
    fn submit(&self, id: u64, request: Request) -> Result<(), Response> {
        match self.jobs.try_send(Job { id, request }) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => Err(Response::text(Status::Unavailable, "too many requests at once\n")),
        }
    }
}

/// One worker: answer jobs until the server is gone.
fn work(queue: &Mutex<Receiver<Job>>, handler: &Handler, answer: &Sender<(u64, Response)>, waker: &UnixStream) {
    loop {
        let job = match queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        let response = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&job.request)))
            .unwrap_or_else(|_| Response::text(Status::Internal, "the answer failed unexpectedly\n"));
        if answer.send((job.id, response)).is_err() {
            return;
        }
        // A full socket buffer already holds a wake-up: a failed write loses nothing.
        let _ = (&*waker).write(&[1]);
    }
}
