//! JA4 over QUIC: the client's first (Initial) packets are decrypted with the keys every
//! QUIC v1 endpoint derives from the connection ID (RFC 9001 §5.2), their CRYPTO frames
//! put together into the ClientHello, and its JA4 (`q…`) kept for the connection quinn
//! is about to accept. Done in a wrapper around quinn's UDP socket, so quinn itself is
//! untouched; a datagram that is not a client's v1 Initial costs one byte's look.

use super::connection::canonical_address;
use super::ja4::{self, Transport};
use quinn::{AsyncUdpSocket, UdpPoller, udp::RecvMeta};
use ring::aead::{self, quic::HeaderProtectionKey};
use ring::hkdf;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// RFC 9001 §5.2: the salt of QUIC v1's Initial secrets.
const INITIAL_SALT: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad,
    0xcc, 0xbb, 0x7f, 0x0a,
];
/// The longest ClientHello put together.
const MAX_HELLO: usize = 16 * 1024;
/// Handshakes whose hello is being put together or waits for quinn, at most (with
/// `MAX_HELLO`, this bounds the memory at 16 MiB).
const MAX_CLIENTS: usize = 1024;
/// Of them, from one client (an IPv4 address, an IPv6 /64): twice the connections a
/// client may have under way, as a handshake sent a Retry leaves its first Initial's
/// entry too. A client past it loses its own oldest, and when all are taken the client
/// holding most loses its oldest: one client's flood never pushes out another's hello.
const MAX_PER_CLIENT: usize = 128;
/// How long a hello waits for its connection at least (longer when the handshake's
/// deadline is: [`ClientHellos::keep_for`]).
const MIN_AGE: Duration = Duration::from_secs(30);
/// The smallest datagram carrying a client's Initial (RFC 9000 §14.1); quinn drops
/// smaller ones, and so does this, before any cryptography.
const MIN_INITIAL_DATAGRAM: usize = 1200;

/// A handshake: the client's address and its first destination connection ID.
type Handshake = (SocketAddr, Vec<u8>);

/// JA4 fingerprints of QUIC clients, by handshake, from their Initial packets.
#[derive(Debug, Default)]
pub struct ClientHellos {
    state: Mutex<Hellos>,
    /// Seconds a hello waits for its connection beyond [`MIN_AGE`].
    longer: std::sync::atomic::AtomicU64,
}

#[derive(Debug, Default)]
struct Hellos {
    entries: HashMap<Handshake, Entry>,
    /// Handshakes in the order they were first seen, for letting the oldest go (an
    /// entry taken meanwhile, or seen again later, is left alone).
    order: VecDeque<(Handshake, Instant)>,
    /// Entries by client.
    per_client: HashMap<IpAddr, usize>,
}

#[derive(Debug)]
struct Entry {
    seen: Instant,
    hello: Progress,
}

#[derive(Debug)]
enum Progress {
    /// CRYPTO bytes by offset, while the hello is being sent.
    Pieces(BTreeMap<u64, Vec<u8>>),
    /// The fingerprint, waiting for its connection.
    Done(String),
}

fn client_of(address: SocketAddr) -> IpAddr {
    super::limits::client_network(canonical_address(address).ip())
}

impl Hellos {
    fn remove(&mut self, handshake: &Handshake) -> Option<Entry> {
        let entry = self.entries.remove(handshake)?;
        let client = client_of(handshake.0);
        if let Some(held) = self.per_client.get_mut(&client) {
            *held -= 1;
            if *held == 0 {
                self.per_client.remove(&client);
            }
        }
        Some(entry)
    }

    /// Where in `order` the oldest entry of a client `wanted` names is.
    fn oldest_of(&self, wanted: impl Fn(IpAddr) -> bool) -> Option<usize> {
        self.order.iter().position(|(handshake, seen)| {
            self.entries
                .get(handshake)
                .is_some_and(|entry| entry.seen == *seen)
                && wanted(client_of(handshake.0))
        })
    }

    /// Lets the entry at `index` of `order` go.
    fn remove_at(&mut self, index: usize) {
        if let Some((handshake, _)) = self.order.remove(index) {
            self.remove(&handshake);
        }
    }

    /// Lets the oldest entry go.
    fn pop_oldest(&mut self) {
        if let Some((handshake, seen)) = self.order.pop_front()
            && self
                .entries
                .get(&handshake)
                .is_some_and(|entry| entry.seen == seen)
        {
            self.remove(&handshake);
        }
    }

    /// Adds the CRYPTO frames of `handshake`'s Initial, seen at `now`; hellos older
    /// than `max_age` go.
    fn record(
        &mut self,
        handshake: Handshake,
        crypto: Vec<(u64, &[u8])>,
        now: Instant,
        max_age: Duration,
    ) {
        while self
            .order
            .front()
            .is_some_and(|(_, seen)| now.saturating_duration_since(*seen) > max_age)
        {
            self.pop_oldest();
        }
        if !self.entries.contains_key(&handshake) {
            let client = client_of(handshake.0);
            if self
                .per_client
                .get(&client)
                .is_some_and(|held| *held >= MAX_PER_CLIENT)
                && let Some(index) = self.oldest_of(|other| other == client)
            {
                self.remove_at(index);
            }
            // Spoofed Initials must not grow this without bound: the client holding
            // most loses its oldest.
            while self.entries.len() >= MAX_CLIENTS {
                let most = self.per_client.values().copied().max().unwrap_or(0);
                let per_client = &self.per_client;
                match self.oldest_of(|other| per_client.get(&other) == Some(&most)) {
                    Some(index) => self.remove_at(index),
                    None => self.pop_oldest(),
                }
            }
            *self.per_client.entry(client).or_default() += 1;
            self.order.push_back((handshake.clone(), now));
            // Entries taken or let go leave their place in `order`: dropped here, so
            // that it stays near the entries' number.
            if self.order.len() > 2 * MAX_CLIENTS {
                let entries = &self.entries;
                self.order.retain(|(handshake, seen)| {
                    entries
                        .get(handshake)
                        .is_some_and(|entry| entry.seen == *seen)
                });
                self.order.shrink_to(2 * MAX_CLIENTS);
            }
            self.entries.insert(
                handshake.clone(),
                Entry {
                    seen: now,
                    hello: Progress::Pieces(BTreeMap::new()),
                },
            );
        }
        let Some(Entry {
            hello: Progress::Pieces(pieces),
            ..
        }) = self.entries.get_mut(&handshake)
        else {
            return;
        };
        let mut held: usize = pieces.values().map(Vec::len).sum();
        for (offset, data) in crypto {
            let fits = usize::try_from(offset)
                .ok()
                .and_then(|o| o.checked_add(data.len()))
                .is_some_and(|end| end <= MAX_HELLO);
            if fits && held + data.len() <= MAX_HELLO {
                held += data.len();
                pieces.insert(offset, data.to_vec());
            }
        }
        match contiguous_hello(pieces) {
            Hello::Complete(hello) => match fingerprint(&hello) {
                Some(fingerprint) => {
                    if let Some(entry) = self.entries.get_mut(&handshake) {
                        entry.hello = Progress::Done(fingerprint);
                    }
                }
                None => {
                    self.remove(&handshake);
                }
            },
            Hello::TooLong => {
                self.remove(&handshake);
            }
            Hello::Incomplete => {}
        }
    }
}

impl ClientHellos {
    /// The fingerprint of the handshake from `address` to `original_cid`, once (the
    /// connection takes it, after its handshake, so the whole hello has arrived).
    pub fn take(&self, address: SocketAddr, original_cid: &[u8]) -> Option<String> {
        let mut state = self.state.lock().ok()?;
        match state.remove(&(address, original_cid.to_vec()))?.hello {
            Progress::Done(fingerprint) => Some(fingerprint),
            Progress::Pieces(_) => None,
        }
    }

    /// Looks at one datagram from `from`.
    fn datagram(&self, from: SocketAddr, datagram: &[u8]) {
        // Long header, fixed bit, type Initial (RFC 9000 §17.2), of a size and with a
        // connection ID quinn accepts.
        if datagram.len() < MIN_INITIAL_DATAGRAM
            || datagram.first().is_none_or(|b| b & 0xf0 != 0xc0)
            || !matches!(datagram.get(5), Some(8..=20))
        {
            return;
        }
        let Some((dcid, frames)) = open_initial(datagram) else {
            return;
        };
        let crypto = crypto_frames(&frames);
        if crypto.is_empty() {
            return;
        }
        let longer = self.longer.load(std::sync::atomic::Ordering::Relaxed);
        let max_age = MIN_AGE.max(Duration::from_secs(longer));
        if let Ok(mut state) = self.state.lock() {
            state.record((from, dcid), crypto, Instant::now(), max_age);
        }
    }

    /// Keeps hellos at least a second longer than `handshake_deadline`.
    pub fn keep_for(&self, handshake_deadline: Duration) {
        let seconds = handshake_deadline.as_secs().saturating_add(2);
        self.longer
            .store(seconds, std::sync::atomic::Ordering::Relaxed);
    }
}

/// What the pieces of a hello add up to.
#[derive(Debug, PartialEq, Eq)]
enum Hello {
    Complete(Vec<u8>),
    Incomplete,
    /// It declares more than `MAX_HELLO` bytes, or is no ClientHello.
    TooLong,
}

/// The ClientHello message when the pieces hold all of it from offset 0.
fn contiguous_hello(pieces: &BTreeMap<u64, Vec<u8>>) -> Hello {
    let mut bytes = Vec::new();
    for (&offset, data) in pieces {
        let offset = offset as usize;
        if offset > bytes.len() {
            break;
        }
        let overlap = bytes.len() - offset;
        if overlap < data.len() {
            bytes.extend_from_slice(&data[overlap..]);
        }
    }
    if bytes.len() < 4 {
        return Hello::Incomplete;
    }
    let len =
        4 + (usize::from(bytes[1]) << 16 | usize::from(bytes[2]) << 8 | usize::from(bytes[3]));
    if bytes[0] != 1 || len > MAX_HELLO {
        Hello::TooLong
    } else if bytes.len() >= len {
        bytes.truncate(len);
        Hello::Complete(bytes)
    } else {
        Hello::Incomplete
    }
}

fn fingerprint(hello: &[u8]) -> Option<String> {
    let (_, message) = tls_parser::parse_tls_message_handshake(hello).ok()?;
    ja4::from_message(&message, Transport::Quic)
}

/// A QUIC variable-length integer at `at`; the value and the next position.
fn varint(bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let first = *bytes.get(at)?;
    let len = 1usize << (first >> 6);
    let raw = bytes.get(at..at + len)?;
    let mut value = u64::from(first & 0x3f);
    for byte in &raw[1..] {
        value = value << 8 | u64::from(*byte);
    }
    Some((value, at + len))
}

/// TLS 1.3's HKDF-Expand-Label with an empty context.
fn expand_label(secret: &hkdf::Prk, label: &[u8], out: &mut [u8]) -> Option<()> {
    struct Len(usize);
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let length = (out.len() as u16).to_be_bytes();
    let full_label_len = [6 + label.len() as u8];
    let info: [&[u8]; 5] = [&length, &full_label_len, b"tls13 ", label, &[0]];
    secret.expand(&info, Len(out.len())).ok()?.fill(out).ok()
}

/// Removes header protection from and decrypts the first packet of `datagram` when it
/// is a client's QUIC v1 Initial; its destination connection ID and frames.
fn open_initial(datagram: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    if datagram.get(1..5)? != [0, 0, 0, 1] {
        return None;
    }
    let dcid_len = usize::from(*datagram.get(5)?);
    let dcid = datagram.get(6..6 + dcid_len)?;
    let mut at = 6 + dcid_len;
    let scid_len = usize::from(*datagram.get(at)?);
    at += 1 + scid_len;
    let (token_len, next) = varint(datagram, at)?;
    at = next.checked_add(usize::try_from(token_len).ok()?)?;
    let (length, pn_offset) = varint(datagram, at)?;
    let end = pn_offset.checked_add(usize::try_from(length).ok()?)?;
    let packet = datagram.get(..end)?;

    let initial = hkdf::Salt::new(hkdf::HKDF_SHA256, &INITIAL_SALT).extract(dcid);
    let mut client = [0u8; 32];
    expand_label(&initial, b"client in", &mut client)?;
    let client = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &client);
    let (mut key, mut iv, mut hp) = ([0u8; 16], [0u8; 12], [0u8; 16]);
    expand_label(&client, b"quic key", &mut key)?;
    expand_label(&client, b"quic iv", &mut iv)?;
    expand_label(&client, b"quic hp", &mut hp)?;

    let sample = packet.get(pn_offset + 4..pn_offset + 20)?;
    let mask = HeaderProtectionKey::new(&aead::quic::AES_128, &hp)
        .ok()?
        .new_mask(sample)
        .ok()?;
    let mut header = packet[..pn_offset + 4].to_vec();
    header[0] ^= mask[0] & 0x0f;
    let pn_len = usize::from(header[0] & 0x03) + 1;
    header.truncate(pn_offset + pn_len);
    let mut packet_number = 0u64;
    for i in 0..pn_len {
        header[pn_offset + i] ^= mask[1 + i];
        packet_number = packet_number << 8 | u64::from(header[pn_offset + i]);
    }
    let mut nonce = iv;
    for (i, byte) in packet_number.to_be_bytes().iter().enumerate() {
        nonce[4 + i] ^= byte;
    }
    let key = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_128_GCM, &key).ok()?);
    let mut payload = packet.get(pn_offset + pn_len..)?.to_vec();
    let plain = key
        .open_in_place(
            aead::Nonce::assume_unique_for_key(nonce),
            aead::Aad::from(&header),
            &mut payload,
        )
        .ok()?;
    Some((dcid.to_vec(), plain.to_vec()))
}

/// The CRYPTO frames among a client Initial's frames, as (offset, data).
fn crypto_frames(frames: &[u8]) -> Vec<(u64, &[u8])> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < frames.len() {
        match frames[at] {
            // PADDING, PING
            0x00 | 0x01 => at += 1,
            // ACK, ACK with ECN counts
            0x02 | 0x03 => {
                let ecn = frames[at] == 0x03;
                let Some(next) = skip_ack(frames, at + 1, ecn) else {
                    break;
                };
                at = next;
            }
            0x06 => {
                let Some((offset, next)) = varint(frames, at + 1) else {
                    break;
                };
                let Some((len, next)) = varint(frames, next) else {
                    break;
                };
                let Some(data) = frames.get(next..next + len as usize) else {
                    break;
                };
                found.push((offset, data));
                at = next + len as usize;
            }
            // Anything else ends what a ClientHello needs.
            _ => break,
        }
    }
    found
}

fn skip_ack(frames: &[u8], at: usize, ecn: bool) -> Option<usize> {
    let (_, at) = varint(frames, at)?; // largest acknowledged
    let (_, at) = varint(frames, at)?; // delay
    let (ranges, mut at) = varint(frames, at)?;
    let (_, next) = varint(frames, at)?; // first range
    at = next;
    for _ in 0..ranges {
        let (_, next) = varint(frames, at)?;
        let (_, next) = varint(frames, next)?;
        at = next;
    }
    if ecn {
        for _ in 0..3 {
            let (_, next) = varint(frames, at)?;
            at = next;
        }
    }
    Some(at)
}

/// quinn's UDP socket, with every received datagram shown to [`ClientHellos`].
#[derive(Debug)]
pub struct FingerprintingSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    hellos: Arc<ClientHellos>,
}

impl FingerprintingSocket {
    pub fn new(inner: Arc<dyn AsyncUdpSocket>, hellos: Arc<ClientHellos>) -> Self {
        FingerprintingSocket { inner, hellos }
    }
}

impl AsyncUdpSocket for FingerprintingSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &quinn::udp::Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let polled = self.inner.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(count)) = &polled {
            for (buf, meta) in bufs.iter().zip(meta.iter()).take(*count) {
                let received = &buf[..meta.len.min(buf.len())];
                // Several datagrams of `stride` bytes each (GRO).
                for datagram in received.chunks(meta.stride.max(1)) {
                    self.hellos.datagram(meta.addr, datagram);
                }
            }
        }
        polled
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_read_every_length() {
        // RFC 9000 §A.1's examples.
        assert_eq!(varint(&[0x25], 0), Some((37, 1)));
        assert_eq!(varint(&[0x7b, 0xbd], 0), Some((15_293, 2)));
        assert_eq!(varint(&[0x9d, 0x7f, 0x3e, 0x7d], 0), Some((494_878_333, 4)));
        assert_eq!(
            varint(&[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c], 0),
            Some((151_288_809_941_952_652, 8))
        );
        assert_eq!(varint(&[0x7b], 0), None);
    }

    #[test]
    fn a_hello_split_and_reordered_is_put_together() {
        let hello = [1u8, 0, 0, 6, 9, 9, 9, 9, 9, 9];
        let mut pieces = BTreeMap::new();
        pieces.insert(6, hello[6..].to_vec());
        assert_eq!(contiguous_hello(&pieces), Hello::Incomplete);
        pieces.insert(0, hello[..4].to_vec());
        assert_eq!(
            contiguous_hello(&pieces),
            Hello::Incomplete,
            "a gap remains"
        );
        pieces.insert(3, hello[3..8].to_vec());
        assert_eq!(contiguous_hello(&pieces), Hello::Complete(hello.to_vec()));
        let mut huge = BTreeMap::new();
        huge.insert(0, vec![1u8, 0xff, 0xff, 0xff]);
        assert_eq!(contiguous_hello(&huge), Hello::TooLong);
    }

    /// The first bytes of a ClientHello of 64 bytes: an entry still being sent.
    const HELLO_START: &[u8] = &[1, 0, 0, 60, 3, 3];

    fn handshake(client: &str, id: u8) -> Handshake {
        (client.parse().unwrap(), vec![id; 8])
    }

    fn held_by(hellos: &Hellos, client: &str) -> usize {
        let ip = client_of(client.parse().unwrap());
        hellos
            .entries
            .keys()
            .filter(|(address, _)| client_of(*address) == ip)
            .count()
    }

    fn record(hellos: &mut Hellos, handshake: Handshake, now: Instant) {
        hellos.record(handshake, vec![(0, HELLO_START)], now, MIN_AGE);
    }

    #[test]
    fn one_clients_flood_of_initials_leaves_other_clients_hellos() {
        let mut hellos = Hellos::default();
        let now = Instant::now();
        record(&mut hellos, handshake("192.0.2.1:443", 0), now);
        record(&mut hellos, handshake("[2001:db8::1]:443", 0), now);
        let flood = |n: usize, ipv6: bool| -> Handshake {
            let from = match ipv6 {
                // The same /64, another address.
                true => format!("[2001:db8::{:x}]:443", n + 2),
                false => format!("198.51.100.7:{}", 1024 + n),
            };
            (from.parse().unwrap(), (n as u64).to_be_bytes().to_vec())
        };
        for n in 0..2 * MAX_CLIENTS {
            record(&mut hellos, flood(n, false), now);
            record(&mut hellos, flood(n, true), now);
        }
        assert_eq!(held_by(&hellos, "198.51.100.7:1"), MAX_PER_CLIENT);
        assert_eq!(held_by(&hellos, "[2001:db8::1]:1"), MAX_PER_CLIENT);
        assert!(hellos.entries.contains_key(&handshake("192.0.2.1:443", 0)));
        // Past its share a client loses its own oldest: its newest are kept.
        assert!(!hellos.entries.contains_key(&flood(0, false)));
        assert!(
            hellos
                .entries
                .contains_key(&flood(2 * MAX_CLIENTS - 1, false))
        );

        // Many clients at once: those holding most lose theirs first.
        for n in 0..900 {
            let from = format!("10.0.{}.{}:443", n / 256, n % 256);
            record(&mut hellos, handshake(&from, 1), now);
        }
        assert_eq!(hellos.entries.len(), MAX_CLIENTS);
        assert!(hellos.entries.contains_key(&handshake("192.0.2.1:443", 0)));
        assert!(hellos.entries.contains_key(&handshake("10.0.0.0:443", 1)));
        assert!(held_by(&hellos, "198.51.100.7:1") < MAX_PER_CLIENT / 2);
        for n in 900..3 * MAX_CLIENTS {
            let from = format!("10.0.{}.{}:443", n / 256, n % 256);
            record(&mut hellos, handshake(&from, 1), now);
        }
        assert_eq!(hellos.entries.len(), MAX_CLIENTS);
        assert_eq!(hellos.per_client.values().sum::<usize>(), MAX_CLIENTS);
        assert!(hellos.order.len() <= 2 * MAX_CLIENTS);
    }

    #[test]
    fn hellos_taken_or_refused_leave_no_trace() {
        let mut hellos = Hellos::default();
        let now = Instant::now();
        for n in 0..20 * MAX_CLIENTS {
            // Not a ClientHello: let go as soon as it is seen.
            let handshake = (
                "192.0.2.1:443".parse().unwrap(),
                (n as u64).to_be_bytes().to_vec(),
            );
            hellos.record(
                handshake.clone(),
                vec![(0, &[2, 0, 0, 4, 0, 0, 0, 0])],
                now,
                MIN_AGE,
            );
            assert!(!hellos.entries.contains_key(&handshake));
            // Taken by its connection.
            record(&mut hellos, handshake.clone(), now);
            hellos.remove(&handshake);
        }
        assert!(hellos.entries.is_empty() && hellos.per_client.is_empty());
        assert!(
            hellos.order.len() <= 2 * MAX_CLIENTS + 1,
            "{}",
            hellos.order.len()
        );
    }

    #[test]
    fn a_hello_nobody_took_goes_after_its_time() {
        let mut hellos = Hellos::default();
        let start = Instant::now();
        let left = handshake("192.0.2.1:443", 1);
        let again = handshake("192.0.2.2:443", 2);
        record(&mut hellos, left.clone(), start);
        record(&mut hellos, again.clone(), start);
        // Taken, then seen again later: its first sighting's turn leaves it.
        hellos.remove(&again);
        let later = start + MIN_AGE / 2;
        record(&mut hellos, again.clone(), later);
        let past = start + MIN_AGE + Duration::from_secs(1);
        record(&mut hellos, handshake("192.0.2.3:443", 3), past);
        assert!(!hellos.entries.contains_key(&left));
        assert!(hellos.entries.contains_key(&again));
        assert_eq!(held_by(&hellos, "192.0.2.1:1"), 0);
        assert!(!hellos.per_client.contains_key(&client_of(left.0)));

        // A longer handshake deadline keeps them longer.
        let hellos = ClientHellos::default();
        hellos.keep_for(Duration::from_secs(120));
        let longer = hellos.longer.load(std::sync::atomic::Ordering::Relaxed);
        assert!(Duration::from_secs(longer) > Duration::from_secs(120));
    }

    #[test]
    fn other_datagrams_are_ignored() {
        let hellos = ClientHellos::default();
        let from: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        hellos.datagram(from, &[0x40, 1, 2, 3]);
        hellos.datagram(from, &[0xc0, 0, 0, 0, 2, 0]);
        hellos.datagram(from, &[0xc0; 1200]);
        // An Initial's shape, but smaller than quinn accepts: not even decrypted.
        let mut short = vec![0xc0, 0, 0, 0, 1, 8];
        short.resize(1199, 0);
        hellos.datagram(from, &short);
        assert_eq!(hellos.take(from, &[0; 8]), None);
    }
}
