//! A SASL front for a mock broker: librdkafka's mock cluster speaks no SASL,
//! so this TCP proxy does the broker's half of Kafka's SASL exchange (KIP-43,
//! KIP-152) for the PLAIN and SCRAM-SHA-256 (RFC 5802, KIP-84) mechanisms,
//! checks the credentials, and then relays bytes to the mock broker untouched.
//!
//! Per connection, as a Kafka broker with a `SASL_PLAINTEXT` listener does:
//! 1. `ApiVersions` is forwarded to the broker and its answer passed back with
//!    `SaslHandshake` (v0–1) and `SaslAuthenticate` (v0–1) added, so the
//!    client uses the framed exchange, in which a failure carries an error
//!    code and message;
//! 2. `SaslHandshake` is answered: `PLAIN` and `SCRAM-SHA-256` are accepted,
//!    any other mechanism gets `UNSUPPORTED_SASL_MECHANISM` with the list of
//!    enabled ones;
//! 3. `SaslAuthenticate` is answered (once for PLAIN, twice for SCRAM's
//!    client-first and client-final messages): right user and password, and
//!    the connection becomes a plain pipe to the broker; wrong ones get
//!    `SASL_AUTHENTICATION_FAILED` (with Kafka's own wording) and the
//!    connection is closed.
//!
//! Any other request before authentication closes the connection, as a real
//! broker does. This is a test fixture, not a broker: two mechanisms, SCRAM
//! without user names that need escaping or channel binding, and no
//! re-authentication (KIP-368), which librdkafka does not ask for unless the
//! broker gives a session lifetime (it is 0 here).

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use rand::distr::{Alphanumeric, SampleString};
use rand::RngExt;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

const API_VERSIONS: i16 = 18;
const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;

const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;
const SASL_AUTHENTICATION_FAILED: i16 = 58;

const PLAIN: &str = "PLAIN";
const SCRAM_SHA_256: &str = "SCRAM-SHA-256";
/// The mechanisms this front speaks.
const MECHANISMS: [&str; 2] = [PLAIN, SCRAM_SHA_256];

/// PBKDF2 rounds of the SCRAM credentials (Kafka's minimum).
const SCRAM_ITERATIONS: u32 = 4096;

/// The largest request read before authentication (a real broker's
/// `sasl.server.max.receive.size` default is 512 KiB).
const MAX_FRAME: usize = 512 * 1024;

/// A SASL front (PLAIN, SCRAM-SHA-256) for one broker, on a fresh loopback port, served by a
/// thread of its own. Dropping it stops listening and closes every connection.
pub struct SaslFront {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl SaslFront {
    /// Accepts on a fresh loopback port; each connection that authenticates
    /// as one of `users` (`(username, password)`) is relayed to `upstream`.
    pub fn start(upstream: SocketAddr, users: &[(&str, &str)]) -> io::Result<Self> {
        let users: Arc<Vec<(String, String)>> = Arc::new(
            users
                .iter()
                .map(|(u, p)| (u.to_string(), p.to_string()))
                .collect(),
        );
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("mock-kafka-sasl".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the SASL front");
                rt.block_on(serve(listener, upstream, users, stopped));
            })?;
        Ok(Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for SaslFront {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    upstream: SocketAddr,
    users: Arc<Vec<(String, String)>>,
    mut stopped: oneshot::Receiver<()>,
) {
    let Ok(listener) = TcpListener::from_std(listener) else {
        return;
    };
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => {
                if let Ok((client, _)) = accepted {
                    let users = users.clone();
                    conns.spawn(async move {
                        if let Err(e) = connection(client, upstream, &users).await {
                            tracing::debug!(error = %e, "SASL front: connection closed");
                        }
                    });
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// One client: the SASL exchange, then a pipe to the broker.
async fn connection(
    mut client: TcpStream,
    upstream: SocketAddr,
    users: &[(String, String)],
) -> io::Result<()> {
    let mut broker = TcpStream::connect(upstream).await?;
    client.set_nodelay(true)?;
    broker.set_nodelay(true)?;
    let mut auth = Auth::NoHandshake;
    loop {
        let frame = read_frame(&mut client).await?;
        let request = Request::parse(&frame)?;
        match request.api_key {
            API_VERSIONS => {
                write_frame(&mut broker, &frame).await?;
                let answer = read_frame(&mut broker).await?;
                let answer = with_sasl_apis(&answer, request.api_version).unwrap_or(answer);
                write_frame(&mut client, &answer).await?;
            }
            SASL_HANDSHAKE => {
                let mechanism = Reader::new(request.body).string()?;
                let error = match mechanism.as_str() {
                    PLAIN => {
                        auth = Auth::Plain;
                        0
                    }
                    SCRAM_SHA_256 => {
                        auth = Auth::ScramFirst;
                        0
                    }
                    _ => UNSUPPORTED_SASL_MECHANISM,
                };
                let mut body = Vec::new();
                body.extend(error.to_be_bytes());
                body.extend((MECHANISMS.len() as i32).to_be_bytes());
                for m in MECHANISMS {
                    put_string(&mut body, m);
                }
                write_frame(&mut client, &request.answer(&body)).await?;
                if error != 0 {
                    return Ok(());
                }
            }
            SASL_AUTHENTICATE => {
                let token = Reader::new(request.body).bytes()?;
                let step = match std::mem::replace(&mut auth, Auth::NoHandshake) {
                    Auth::NoHandshake => Step::Refused(
                        ILLEGAL_SASL_STATE,
                        "SaslAuthenticate before SaslHandshake".into(),
                    ),
                    Auth::Plain if plain_ok(token, users) => Step::Done(Vec::new()),
                    Auth::Plain => Step::Refused(
                        SASL_AUTHENTICATION_FAILED,
                        "Authentication failed: Invalid username or password".into(),
                    ),
                    Auth::ScramFirst => match scram_first(token, users) {
                        Some((server_first, state)) => {
                            auth = Auth::ScramFinal(state);
                            Step::Continue(server_first.into_bytes())
                        }
                        None => Step::Refused(SASL_AUTHENTICATION_FAILED, scram_failed()),
                    },
                    Auth::ScramFinal(state) => match scram_final(token, &state) {
                        Some(server_final) => Step::Done(server_final.into_bytes()),
                        None => Step::Refused(SASL_AUTHENTICATION_FAILED, scram_failed()),
                    },
                };
                let (error, message, bytes) = match &step {
                    Step::Continue(b) | Step::Done(b) => (0, None, &b[..]),
                    Step::Refused(code, m) => (*code, Some(m.as_str()), &[][..]),
                };
                let mut body = Vec::new();
                body.extend(error.to_be_bytes());
                match message {
                    None => body.extend((-1i16).to_be_bytes()),
                    Some(m) => put_string(&mut body, m),
                }
                body.extend((bytes.len() as i32).to_be_bytes());
                body.extend(bytes);
                if request.api_version >= 1 {
                    body.extend(0i64.to_be_bytes()); // no session lifetime
                }
                write_frame(&mut client, &request.answer(&body)).await?;
                match step {
                    Step::Continue(_) => {}
                    Step::Done(_) => break,
                    Step::Refused(..) => return Ok(()),
                }
            }
            other => {
                return Err(io::Error::other(format!(
                    "request {other} before SASL authentication"
                )))
            }
        }
    }
    tokio::io::copy_bidirectional(&mut client, &mut broker).await?;
    Ok(())
}

/// Where a connection is in the SASL exchange.
enum Auth {
    NoHandshake,
    Plain,
    ScramFirst,
    ScramFinal(Scram),
}

/// What one `SaslAuthenticate` leads to.
enum Step {
    /// Answered with these bytes; another round follows.
    Continue(Vec<u8>),
    /// Authenticated; the last answer carries these bytes.
    Done(Vec<u8>),
    /// Refused with this error code and message; the connection closes.
    Refused(i16, String),
}

/// What the server keeps between SCRAM's two rounds.
struct Scram {
    nonce: String,
    salted_password: Vec<u8>,
    /// `client-first-message-bare,server-first-message,`
    auth_message_start: String,
}

/// Kafka's message for a failed SCRAM login.
fn scram_failed() -> String {
    format!(
        "Authentication failed during authentication due to invalid credentials \
         with SASL mechanism {SCRAM_SHA_256}"
    )
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// SCRAM's first round: the client-first message (`n,,n=user,r=nonce`) of a
/// known user gets the server-first message (`r=nonce+ours,s=salt,i=4096`).
fn scram_first(token: &[u8], users: &[(String, String)]) -> Option<(String, Scram)> {
    let message = std::str::from_utf8(token).ok()?;
    // The GS2 header: no channel binding ("n"), no authorization identity.
    let bare = message.strip_prefix("n,,")?;
    let mut user = None;
    let mut client_nonce = None;
    for attr in bare.split(',') {
        match attr.split_once('=')? {
            ("n", v) => user = Some(v),
            ("r", v) => client_nonce = Some(v),
            _ => {}
        }
    }
    let (_, password) = users.iter().find(|(u, _)| Some(u.as_str()) == user)?;
    let mut rng = rand::rng();
    let nonce = format!(
        "{}{}",
        client_nonce?,
        Alphanumeric.sample_string(&mut rng, 24)
    );
    let salt: [u8; 16] = rng.random();
    let mut salted_password = vec![0; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(
        password.as_bytes(),
        &salt,
        SCRAM_ITERATIONS,
        &mut salted_password,
    );
    let server_first = format!("r={nonce},s={},i={SCRAM_ITERATIONS}", BASE64.encode(salt));
    let state = Scram {
        nonce,
        salted_password,
        auth_message_start: format!("{bare},{server_first},"),
    };
    Some((server_first, state))
}

/// SCRAM's second round: a client-final message (`c=biws,r=nonce,p=proof`)
/// whose proof shows the password gets the server-final message
/// (`v=signature`), which proves the server knew it too.
fn scram_final(token: &[u8], state: &Scram) -> Option<String> {
    let message = std::str::from_utf8(token).ok()?;
    let (without_proof, proof) = message.rsplit_once(",p=")?;
    let proof = BASE64.decode(proof).ok()?;
    let nonce = without_proof
        .split(',')
        .find_map(|a| a.strip_prefix("r="))?;
    if nonce != state.nonce {
        return None;
    }
    let auth_message = format!("{}{without_proof}", state.auth_message_start);
    let client_key = hmac_sha256(&state.salted_password, b"Client Key");
    let stored_key = Sha256::digest(&client_key);
    let signature = hmac_sha256(&stored_key, auth_message.as_bytes());
    if proof.len() != signature.len() {
        return None;
    }
    let claimed_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
    if Sha256::digest(&claimed_key) != stored_key {
        return None;
    }
    let server_key = hmac_sha256(&state.salted_password, b"Server Key");
    let server_signature = hmac_sha256(&server_key, auth_message.as_bytes());
    Some(format!("v={}", BASE64.encode(server_signature)))
}

/// Whether a PLAIN token (`[authzid] NUL user NUL password`) names one of
/// `users` with its password, and no other identity to act as.
fn plain_ok(token: &[u8], users: &[(String, String)]) -> bool {
    let parts: Vec<&[u8]> = token.split(|b| *b == 0).collect();
    let [authzid, user, password] = parts[..] else {
        return false;
    };
    (authzid.is_empty() || authzid == user)
        && users
            .iter()
            .any(|(u, p)| u.as_bytes() == user && p.as_bytes() == password)
}

/// A request's header fields this front needs, and its body (for the
/// non-flexible requests it answers: header v1).
struct Request<'a> {
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    body: &'a [u8],
}

impl<'a> Request<'a> {
    fn parse(frame: &'a [u8]) -> io::Result<Self> {
        let mut r = Reader::new(frame);
        let api_key = r.i16()?;
        let api_version = r.i16()?;
        let correlation_id = r.i32()?;
        let client_id_len = r.i16()?;
        if client_id_len > 0 {
            r.take(client_id_len as usize)?;
        }
        Ok(Self {
            api_key,
            api_version,
            correlation_id,
            body: r.rest(),
        })
    }

    /// A response frame (header v0: the correlation id) with `body`.
    fn answer(&self, body: &[u8]) -> Vec<u8> {
        let mut frame = self.correlation_id.to_be_bytes().to_vec();
        frame.extend(body);
        frame
    }
}

/// The broker's ApiVersions response (header v0, any version) with the SASL
/// requests added; `None` when it is an error or cannot be read, to be passed
/// on as it is.
fn with_sasl_apis(answer: &[u8], version: i16) -> Option<Vec<u8>> {
    const ADDED: [(i16, i16, i16); 2] = [(SASL_HANDSHAKE, 0, 1), (SASL_AUTHENTICATE, 0, 1)];
    let mut r = Reader::new(answer);
    r.i32().ok()?; // correlation id
    if r.i16().ok()? != 0 {
        return None;
    }
    let count_at = r.pos;
    let flexible = version >= 3;
    let count = if flexible {
        r.uvarint().ok()?.checked_sub(1)?
    } else {
        u64::try_from(r.i32().ok()?).ok()?
    };
    let count_end = r.pos;
    for _ in 0..count {
        let key = r.i16().ok()?;
        if ADDED.iter().any(|(k, _, _)| *k == key) {
            return None; // the broker speaks SASL itself
        }
        r.take(4).ok()?;
        if flexible {
            r.skip_tagged_fields().ok()?;
        }
    }
    let entries_end = r.pos;
    let mut out = answer[..count_at].to_vec();
    let new_count = count + ADDED.len() as u64;
    if flexible {
        put_uvarint(&mut out, new_count + 1);
    } else {
        out.extend(i32::try_from(new_count).ok()?.to_be_bytes());
    }
    out.extend(&answer[count_end..entries_end]);
    for (key, min, max) in ADDED {
        out.extend(key.to_be_bytes());
        out.extend(min.to_be_bytes());
        out.extend(max.to_be_bytes());
        if flexible {
            out.push(0); // no tagged fields
        }
    }
    out.extend(&answer[entries_end..]);
    Some(out)
}

/// Reads one size-prefixed Kafka frame (without its size).
async fn read_frame(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let size = s.read_i32().await?;
    let size = usize::try_from(size)
        .ok()
        .filter(|n| *n <= MAX_FRAME)
        .ok_or_else(|| io::Error::other(format!("frame of {size} bytes")))?;
    let mut frame = vec![0; size];
    s.read_exact(&mut frame).await?;
    Ok(frame)
}

async fn write_frame(s: &mut TcpStream, frame: &[u8]) -> io::Result<()> {
    let size = i32::try_from(frame.len()).map_err(io::Error::other)?;
    s.write_all(&size.to_be_bytes()).await?;
    s.write_all(frame).await
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as i16).to_be_bytes());
    out.extend(s.as_bytes());
}

fn put_uvarint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Big-endian reads over a frame, failing on a short one.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| io::Error::other("short Kafka frame"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    fn i16(&mut self) -> io::Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }

    fn i32(&mut self) -> io::Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn uvarint(&mut self) -> io::Result<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(io::Error::other("varint too long"))
    }

    fn skip_tagged_fields(&mut self) -> io::Result<()> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?; // tag
            let size = self.uvarint()?;
            self.take(usize::try_from(size).map_err(io::Error::other)?)?;
        }
        Ok(())
    }

    /// A STRING (int16 length).
    fn string(&mut self) -> io::Result<String> {
        let n = self.i16()?;
        let n = usize::try_from(n).map_err(|_| io::Error::other("null string"))?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(io::Error::other)
    }

    /// BYTES (int32 length).
    fn bytes(&mut self) -> io::Result<&'a [u8]> {
        let n = self.i32()?;
        let n = usize::try_from(n).map_err(|_| io::Error::other("null bytes"))?;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> Vec<(String, String)> {
        vec![("alice".into(), "s3cret".into())]
    }

    #[test]
    fn plain_accepts_only_the_right_password_for_the_user_itself() {
        assert!(plain_ok(b"\0alice\0s3cret", &users()));
        assert!(plain_ok(b"alice\0alice\0s3cret", &users()));
        assert!(!plain_ok(b"\0alice\0wrong", &users()));
        assert!(!plain_ok(b"\0bob\0s3cret", &users()));
        assert!(!plain_ok(b"bob\0alice\0s3cret", &users()));
        assert!(!plain_ok(b"\0alice\0s3cret\0", &users()));
    }

    #[test]
    fn sasl_apis_are_added_to_a_flexible_and_a_classic_api_versions_answer() {
        // v3: correlation 7, no error, 1 api (Produce 0-9, no tags), throttle 0, no tags.
        let v3 = [
            &7i32.to_be_bytes()[..],
            &0i16.to_be_bytes(),
            &[2],
            &0i16.to_be_bytes(),
            &0i16.to_be_bytes(),
            &9i16.to_be_bytes(),
            &[0],
            &0i32.to_be_bytes(),
            &[0],
        ]
        .concat();
        let out = with_sasl_apis(&v3, 3).unwrap();
        let mut r = Reader::new(&out);
        assert_eq!(r.i32().unwrap(), 7);
        assert_eq!(r.i16().unwrap(), 0);
        assert_eq!(r.uvarint().unwrap(), 4);
        let mut keys = Vec::new();
        for _ in 0..3 {
            keys.push((r.i16().unwrap(), r.i16().unwrap(), r.i16().unwrap()));
            r.skip_tagged_fields().unwrap();
        }
        assert_eq!(keys, [(0, 0, 9), (17, 0, 1), (36, 0, 1)]);
        assert_eq!(r.rest(), &[0, 0, 0, 0, 0]);

        // v1: int32 count, no tags, throttle at the end.
        let v1 = [
            &7i32.to_be_bytes()[..],
            &0i16.to_be_bytes(),
            &1i32.to_be_bytes(),
            &3i16.to_be_bytes(),
            &0i16.to_be_bytes(),
            &12i16.to_be_bytes(),
            &0i32.to_be_bytes(),
        ]
        .concat();
        let out = with_sasl_apis(&v1, 1).unwrap();
        assert_eq!(out.len(), v1.len() + 12);
        assert_eq!(&out[6..10], &3i32.to_be_bytes());
        assert_eq!(&out[16..22], &[0, 17, 0, 0, 0, 1]);
        assert_eq!(&out[out.len() - 4..], &0i32.to_be_bytes());
    }

    #[test]
    fn an_error_answer_is_passed_on_as_it_is() {
        let err = [
            &7i32.to_be_bytes()[..],
            &35i16.to_be_bytes(),
            &0i32.to_be_bytes(),
        ]
        .concat();
        assert_eq!(with_sasl_apis(&err, 4), None);
    }
}
