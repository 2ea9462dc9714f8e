//! The application label of a flow from its first payload bytes, the port as a marked
//! fallback (docs/specs/flow-record.md, `app` and `app_source`).
//!
//! Input: what the flow meter keeps of each direction (`FlowConfig::payload_bytes`): the
//! transport payload of its first packets back to back, at most [`PREFIX_BYTES`] of each
//! direction. Each protocol is recognised by the fixed bytes its first message starts with
//! (a request line, a magic number, a header whose fields must hold values few other
//! protocols give them), so that a small prefix suffices and a flow costs one pass over at
//! most `2 × PREFIX_BYTES` bytes, once, when its record is written. Where the first bytes are
//! not distinctive enough on their own (DNS-shaped messages, NTP, DHCP, RADIUS), the
//! protocol's port must be one of the flow's ports too, as nDPI requires. Nothing matched:
//! the well-known port of the flow's responder (else initiator) names the application, with
//! [`AppSource::Port`].
//!
//! ```
//! use trawl_app::classify::classify;
//! use trawl_flow::{App, AppSource};
//! let l = classify(6, 50000, 8080, b"GET /index.html HTTP/1.1\r\n", b"HTTP/1.1 200 OK").unwrap();
//! assert_eq!((l.app, l.source), (App::Http, AppSource::Payload));
//! let l = classify(6, 50000, 22, b"", b"").unwrap();
//! assert_eq!((l.app, l.source), (App::Ssh, AppSource::Port));
//! ```
pub use trawl_flow::{App, AppLabel, AppSource};

/// Payload bytes of each direction the classifier looks at (and the flow meter keeps per
/// direction for it: `2 × PREFIX_BYTES` bytes per table slot).
pub const PREFIX_BYTES: usize = 32;

/// The label of a flow: `proto` (6 TCP, 17 UDP), the initiator's and responder's ports, and
/// the first payload bytes each sent (`fwd` by the initiator). `None`: no payload rule and no
/// well-known port. Only the first [`PREFIX_BYTES`] of each direction count, however many are
/// given, so that a label never depends on how much payload a meter keeps beyond them.
pub fn classify(
    proto: u8,
    src_port: u16,
    dst_port: u16,
    fwd: &[u8],
    rev: &[u8],
) -> Option<AppLabel> {
    let (fwd, rev) = (prefix(fwd), prefix(rev));
    let f = Flow {
        ports: [dst_port, src_port],
        fwd,
        rev,
    };
    let payload = match proto {
        6 => tcp(&f),
        17 => udp(&f),
        _ => None,
    };
    if let Some(app) = payload {
        return Some(AppLabel {
            app,
            source: AppSource::Payload,
        });
    }
    port(proto, dst_port)
        .or_else(|| port(proto, src_port))
        .map(|app| AppLabel {
            app,
            source: AppSource::Port,
        })
}

/// The part of a direction's bytes the rules may look at.
fn prefix(p: &[u8]) -> &[u8] {
    &p[..p.len().min(PREFIX_BYTES)]
}

/// What the rules look at.
struct Flow<'a> {
    /// Responder's port first.
    ports: [u16; 2],
    fwd: &'a [u8],
    rev: &'a [u8],
}

impl Flow<'_> {
    fn has_port(&self, ports: &[u16]) -> bool {
        self.ports.iter().any(|p| ports.contains(p))
    }

    /// Either direction satisfies `rule`.
    fn either(&self, rule: impl Fn(&[u8]) -> bool) -> bool {
        rule(self.fwd) || rule(self.rev)
    }
}

fn tcp(f: &Flow<'_>) -> Option<App> {
    let (c, s) = (f.fwd, f.rev);
    // Banners and requests with text first: the protocols that may later turn into TLS
    // (STARTTLS, PostgreSQL's SSLRequest) are named by what they start with.
    if f.either(|p| p.starts_with(b"SSH-")) {
        return Some(App::Ssh);
    }
    if f.either(|p| p.starts_with(b"\x13BitTorrent protocol")) {
        return Some(App::Bittorrent);
    }
    if sip_message(c) || sip_message(s) {
        return Some(App::Sip);
    }
    if http_request(c) || (c.is_empty() && s.starts_with(b"HTTP/1.")) {
        return Some(App::Http);
    }
    if tls_hello(c, 1) || tls_hello(s, 2) || sslv2_client_hello(c) {
        return Some(App::Tls);
    }
    if let Some(app) = text_mail_or_ftp(f) {
        return Some(app);
    }
    if f.either(smb) {
        return Some(App::Smb);
    }
    // NetBIOS session service: session request, positive/negative response, keep-alive.
    if f.has_port(&[139]) && f.either(|p| p.len() >= 4 && matches!(p[0], 0x81..=0x85)) {
        return Some(App::Netbios);
    }
    if rdp(c) && !f.has_port(&[102]) {
        return Some(App::Rdp);
    }
    if c.get(4..).is_some_and(kerberos) || s.get(4..).is_some_and(kerberos) {
        return Some(App::Kerberos);
    }
    if f.either(ldap) {
        return Some(App::Ldap);
    }
    if mqtt_connect(c) {
        return Some(App::Mqtt);
    }
    if postgres_startup(c) {
        return Some(App::Postgresql);
    }
    if mysql_greeting(s) {
        return Some(App::Mysql);
    }
    if redis_command(c) {
        return Some(App::Redis);
    }
    if f.has_port(&[53]) && (dns_tcp(c) || dns_tcp(s)) {
        return Some(App::Dns);
    }
    // Syslog over TCP (RFC 6587): a message, or its octet count first.
    if syslog(c)
        || c.iter().position(|&b| b == b' ').is_some_and(|sp| {
            (1..=5).contains(&sp) && c[..sp].iter().all(u8::is_ascii_digit) && syslog(&c[sp + 1..])
        })
    {
        return Some(App::Syslog);
    }
    None
}

fn udp(f: &Flow<'_>) -> Option<App> {
    let (c, s) = (f.fwd, f.rev);
    if quic(c) || quic(s) {
        return Some(App::Quic);
    }
    if sip_message(c) || sip_message(s) {
        return Some(App::Sip);
    }
    if f.either(ssdp) {
        return Some(App::Ssdp);
    }
    if let Some(app) = dns_family(f) {
        return Some(app);
    }
    if f.has_port(&[67, 68]) && (dhcp(c) || dhcp(s)) {
        return Some(App::Dhcp);
    }
    if f.has_port(&[123]) && (ntp(c) || ntp(s)) {
        return Some(App::Ntp);
    }
    if f.either(stun) {
        return Some(App::Stun);
    }
    if f.either(dtls) {
        return Some(App::Dtls);
    }
    if f.either(kerberos) {
        return Some(App::Kerberos);
    }
    if f.either(snmp) {
        return Some(App::Snmp);
    }
    if f.either(ldap) {
        return Some(App::Ldap);
    }
    if f.has_port(&[1812, 1813, 1645, 1646]) && f.either(radius) {
        return Some(App::Radius);
    }
    // RDP's UDP transport: a SYN datagram starts with snSourceAck -1 (MS-RDPEUDP 3.1.5.1.1).
    if f.has_port(&[3389]) && f.either(|p| p.len() >= 8 && p[..4] == [0xff; 4]) {
        return Some(App::Rdp);
    }
    if f.has_port(&[138]) && f.either(|p| p.len() >= 14 && (0x10..=0x16).contains(&p[0])) {
        return Some(App::Netbios);
    }
    if f.either(bittorrent_udp) {
        return Some(App::Bittorrent);
    }
    if f.either(syslog) {
        return Some(App::Syslog);
    }
    if rtp(c) && (s.is_empty() || rtp(s)) && f.ports.iter().all(|&p| p >= 1024) {
        return Some(App::Rtp);
    }
    None
}

/// `p` starts with `lit`, ASCII letters in any case.
fn starts_ci(p: &[u8], lit: &[u8]) -> bool {
    p.len() >= lit.len() && p[..lit.len()].eq_ignore_ascii_case(lit)
}

const HTTP_METHODS: [&[u8]; 12] = [
    b"GET ",
    b"POST ",
    b"HEAD ",
    b"PUT ",
    b"DELETE ",
    b"OPTIONS ",
    b"CONNECT ",
    b"PATCH ",
    b"TRACE ",
    b"PROPFIND ",
    b"MKCOL ",
    b"PRI ",
];

/// An HTTP/1.x request line's start: a method, then an origin-form (`/`), absolute-form
/// (`http://`), asterisk-form or, after CONNECT, authority-form target (RTSP's `rtsp://` and
/// SIP's `sip:` are not HTTP).
fn http_request(p: &[u8]) -> bool {
    let Some(m) = HTTP_METHODS.iter().find(|m| p.starts_with(m)) else {
        return false;
    };
    let target = &p[m.len()..];
    match target.first() {
        Some(b'/' | b'*') => true,
        Some(_) if **m == *b"CONNECT " => true,
        Some(_) => starts_ci(target, b"http://") || starts_ci(target, b"https://"),
        None => false,
    }
}

const SIP_METHODS: [&[u8]; 14] = [
    b"INVITE ",
    b"REGISTER ",
    b"OPTIONS ",
    b"ACK ",
    b"BYE ",
    b"CANCEL ",
    b"SUBSCRIBE ",
    b"NOTIFY ",
    b"MESSAGE ",
    b"INFO ",
    b"PRACK ",
    b"REFER ",
    b"UPDATE ",
    b"PUBLISH ",
];

/// A SIP request line (method, then a `sip:`, `sips:` or `tel:` URI) or status line.
fn sip_message(p: &[u8]) -> bool {
    if p.starts_with(b"SIP/2.0 ") {
        return true;
    }
    SIP_METHODS.iter().any(|m| {
        p.starts_with(m) && {
            let uri = &p[m.len()..];
            starts_ci(uri, b"sip:") || starts_ci(uri, b"sips:") || starts_ci(uri, b"tel:")
        }
    })
}

/// A TLS handshake record (type 22, version 3.0-3.4) whose first message is of `hello_type`
/// (1 ClientHello, 2 ServerHello).
fn tls_hello(p: &[u8], hello_type: u8) -> bool {
    p.len() >= 6 && p[0] == 22 && p[1] == 3 && p[2] <= 4 && p[5] == hello_type
}

/// An SSL 2.0-format ClientHello (two-byte length with the high bit, message type 1, a 3.x or
/// 2.0 version), as old clients sent to reach SSL 3.0 and TLS servers.
fn sslv2_client_hello(p: &[u8]) -> bool {
    p.len() >= 5
        && p[0] & 0x80 != 0
        && p[2] == 1
        && ((p[3] == 3 && p[4] <= 3) || (p[3] == 0 && p[4] == 2))
}

/// Server-first text protocols: SMTP and FTP (both greet with `220`), POP3 (`+OK`), IMAP
/// (`* OK`); or, without the greeting, the client's first command.
fn text_mail_or_ftp(f: &Flow<'_>) -> Option<App> {
    let (c, s) = (f.fwd, f.rev);
    let smtp_cmd = starts_ci(c, b"EHLO ") || starts_ci(c, b"HELO ");
    let ftp_cmd = ["USER ", "AUTH TLS", "AUTH SSL", "FEAT", "SYST", "OPTS "]
        .iter()
        .any(|k| starts_ci(c, k.as_bytes()));
    if s.starts_with(b"220") && matches!(s.get(3), Some(b' ' | b'-')) {
        let banner = &s[4..];
        let has = |w: &[u8]| banner.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w));
        return Some(if smtp_cmd {
            App::Smtp
        } else if ftp_cmd || has(b"FTP") {
            App::Ftp
        } else if has(b"SMTP") || has(b"mail") || f.has_port(&[25, 465, 587, 2525]) {
            App::Smtp
        } else if f.has_port(&[21]) {
            App::Ftp
        } else {
            return None;
        });
    }
    if s.starts_with(b"+OK") {
        return Some(App::Pop3);
    }
    if s.starts_with(b"* OK") || s.starts_with(b"* PREAUTH") || s.starts_with(b"* BYE") {
        return Some(App::Imap);
    }
    if !s.is_empty() {
        return None;
    }
    // Only the client was seen.
    if smtp_cmd {
        return Some(App::Smtp);
    }
    if ["CAPA", "APOP ", "STLS"]
        .iter()
        .any(|k| starts_ci(c, k.as_bytes()))
    {
        return Some(App::Pop3);
    }
    imap_command(c).then_some(App::Imap)
}

/// `TAG CAPABILITY|LOGIN|STARTTLS|AUTHENTICATE|ID|NOOP`: an IMAP client's first command.
fn imap_command(p: &[u8]) -> bool {
    let Some(sp) = p.iter().position(|&b| b == b' ') else {
        return false;
    };
    let tag_ok = sp > 0
        && p[..sp]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'.');
    let rest = &p[sp + 1..];
    tag_ok
        && [
            "CAPABILITY",
            "LOGIN ",
            "STARTTLS",
            "AUTHENTICATE ",
            "ID ",
            "NOOP",
        ]
        .iter()
        .any(|k| starts_ci(rest, k.as_bytes()))
}

/// A NetBIOS session message carrying SMB 1, 2/3 or an SMB 3 transform header.
fn smb(p: &[u8]) -> bool {
    p.len() >= 8 && p[0] == 0 && matches!(&p[4..8], b"\xffSMB" | b"\xfeSMB" | b"\xfdSMB")
}

/// TPKT (version 3) carrying an X.224 Connection Request: RDP's first message.
fn rdp(p: &[u8]) -> bool {
    p.len() >= 6 && p[0] == 3 && p[1] == 0 && p[4] >= 6 && p[5] == 0xe0
}

/// The length octets of a BER element at `p[0]`: how many bytes they take, or `None`.
fn ber_len(p: &[u8]) -> Option<usize> {
    match *p.first()? {
        n if n < 0x80 => Some(1),
        0x81..=0x84 => Some(1 + usize::from(p[0] - 0x80)),
        _ => None,
    }
}

/// A Kerberos message (RFC 4120): an APPLICATION tag of a request, reply or error (AS-REQ 10,
/// AS-REP 11, TGS-REQ 12, TGS-REP 13, KRB-ERROR 30), its length, then a SEQUENCE.
fn kerberos(p: &[u8]) -> bool {
    if !matches!(p.first(), Some(0x6a..=0x6d | 0x7e)) {
        return false;
    }
    ber_len(&p[1..]).is_some_and(|n| p.get(1 + n) == Some(&0x30))
}

/// An LDAP message: SEQUENCE, message ID (INTEGER of 1-4 bytes), then an APPLICATION-tagged
/// operation (bind 0x60, search 0x63, ..., unbind 0x42, abandon 0x50).
fn ldap(p: &[u8]) -> bool {
    if p.first() != Some(&0x30) {
        return false;
    }
    let Some(n) = ber_len(&p[1..]) else {
        return false;
    };
    let at = 1 + n;
    match (p.get(at), p.get(at + 1)) {
        (Some(0x02), Some(&len @ 1..=4)) => {
            let op = p.get(at + 2 + usize::from(len));
            matches!(op, Some(0x60..=0x78 | 0x42 | 0x50))
        }
        _ => false,
    }
}

/// SNMP v1/v2c (SEQUENCE, version INTEGER 0 or 1, community OCTET STRING) or v3 (version 3,
/// then the header SEQUENCE).
fn snmp(p: &[u8]) -> bool {
    if p.first() != Some(&0x30) {
        return false;
    }
    let Some(n) = ber_len(&p[1..]) else {
        return false;
    };
    let v = &p[(1 + n).min(p.len())..];
    v.len() >= 4
        && v[0] == 0x02
        && v[1] == 0x01
        && matches!((v[2], v[3]), (0 | 1, 0x04) | (3, 0x30))
}

/// MQTT CONNECT: fixed header 0x10, remaining length (1-4 bytes), protocol name `MQTT` (3.1.1,
/// 5) or `MQIsdp` (3.1).
fn mqtt_connect(p: &[u8]) -> bool {
    if p.first() != Some(&0x10) {
        return false;
    }
    let Some(len_bytes) = p[1..].iter().take(4).position(|b| b & 0x80 == 0) else {
        return false;
    };
    let name = &p[(2 + len_bytes).min(p.len())..];
    name.starts_with(b"\x00\x04MQTT") || name.starts_with(b"\x00\x06MQIsdp")
}

/// PostgreSQL's first client message: StartupMessage (length, protocol 3.0) or SSLRequest,
/// GSSENCRequest or CancelRequest (length 8 or 16, magic code).
fn postgres_startup(p: &[u8]) -> bool {
    if p.len() < 8 {
        return false;
    }
    let len = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
    let code = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
    match code {
        0x0003_0000 => (8..=10_000).contains(&len),
        80_877_103 | 80_877_104 => len == 8,
        80_877_102 => len == 16,
        _ => false,
    }
}

/// MySQL's server greeting: packet length (3 bytes LE), sequence 0, protocol version 10, a
/// version string starting with a digit.
fn mysql_greeting(p: &[u8]) -> bool {
    p.len() >= 6 && {
        let len = u32::from_le_bytes([p[0], p[1], p[2], 0]);
        (20..=1024).contains(&len) && p[3] == 0 && p[4] == 10 && p[5].is_ascii_digit()
    }
}

/// A Redis RESP command: an array of bulk strings (`*N\r\n$L\r\n`).
fn redis_command(p: &[u8]) -> bool {
    let Some(rest) = p.strip_prefix(b"*") else {
        return false;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    (1..=4).contains(&digits) && rest[digits..].starts_with(b"\r\n$")
}

/// DNS over TCP: the 2-byte length, then a message ([`dns_shape`]).
fn dns_tcp(p: &[u8]) -> bool {
    p.len() >= 14 && u16::from_be_bytes([p[0], p[1]]) >= 12 && dns_shape(&p[2..])
}

/// DNS-format messages on UDP: DNS (53), mDNS (5353), LLMNR (5355), NetBIOS name service (137),
/// named by the port (the format is the same).
fn dns_family(f: &Flow<'_>) -> Option<App> {
    let app = [
        (53, App::Dns),
        (5353, App::Mdns),
        (5355, App::Llmnr),
        (137, App::Netbios),
    ]
    .into_iter()
    .find(|(port, _)| f.has_port(&[*port]))?
    .1;
    (dns_shape(f.fwd) || dns_shape(f.rev)).then_some(app)
}

/// A DNS message header with plausible counts (a query holds a question; a response a
/// question or, mDNS, answers) and opcode (query, inverse query, status, notify, update),
/// and, when the prefix holds it, a first question name of valid labels.
fn dns_shape(p: &[u8]) -> bool {
    if p.len() < 12 {
        return false;
    }
    let flags = u16::from_be_bytes([p[2], p[3]]);
    let count = |i: usize| u16::from_be_bytes([p[i], p[i + 1]]);
    let (qd, an, ns, ar) = (count(4), count(6), count(8), count(10));
    let response = flags & 0x8000 != 0;
    let opcode = (flags >> 11) & 0xf;
    let z_ok = opcode != 0 || flags & 0x0040 == 0;
    let counts_ok = qd <= 4
        && an <= 256
        && ns <= 256
        && ar <= 256
        && (qd >= 1 || ((response || opcode == 1) && an + ns + ar >= 1) || opcode == 5);
    if !(matches!(opcode, 0 | 1 | 2 | 4 | 5) && z_ok && counts_ok) {
        return false;
    }
    if qd == 0 {
        return true;
    }
    // The first name's labels, as far as the prefix goes: lengths below 64 or a pointer.
    let mut at = 12;
    while let Some(&len) = p.get(at) {
        match len {
            0 => return true,
            1..=63 => at += 1 + usize::from(len),
            0xc0..=0xff => return true,
            _ => return false,
        }
    }
    true
}

/// QUIC long-header packets of v1, v2, IETF drafts and Google QUIC (`Q0xx`, `T0xx`), and
/// Google QUIC's older public header with the version flag.
fn quic(p: &[u8]) -> bool {
    if p.len() < 7 {
        return false;
    }
    if p[0] & 0xc0 == 0xc0 {
        let v = u32::from_be_bytes([p[1], p[2], p[3], p[4]]);
        let google = matches!(p[1], b'Q' | b'T') && p[2] == b'0' && p[3].is_ascii_digit();
        // 0x?a?a?a?a: the versions reserved to force version negotiation (RFC 9000 15).
        return matches!(v, 1 | 0x6b33_43cf)
            || v >> 8 == 0xff_0000
            || v >> 4 == 0x0fac_eb00
            || v & 0x0f0f_0f0f == 0x0a0a_0a0a
            || google;
    }
    // gQUIC public header: flags with the version bit (0x01), an 8-byte connection ID (0x08),
    // then `Q0xx`.
    p[0] & 0x09 == 0x09
        && p[0] & 0x80 == 0
        && p.len() >= 13
        && p[9] == b'Q'
        && p[10] == b'0'
        && p[11].is_ascii_digit()
}

/// `M-SEARCH *` and `NOTIFY *` over HTTP/1.1 (UPnP discovery), or an answer to one on 1900.
fn ssdp(p: &[u8]) -> bool {
    p.starts_with(b"M-SEARCH * HTTP/1.") || p.starts_with(b"NOTIFY * HTTP/1.")
}

/// BOOTP/DHCP: op 1 or 2, Ethernet hardware type and length.
fn dhcp(p: &[u8]) -> bool {
    p.len() >= 4 && matches!(p[0], 1 | 2) && p[1] == 1 && p[2] == 6
}

/// NTP: version 1-4, any mode but 0 (symmetric, client, server, broadcast, control,
/// private: `ntpdc`'s monlist).
fn ntp(p: &[u8]) -> bool {
    p.len() >= 4 && matches!((p[0] >> 3) & 7, 1..=4) && p[0] & 7 != 0
}

/// STUN (RFC 5389): message type with the top two bits clear, a length in whole 4-byte
/// words, the magic cookie. Or classic STUN (RFC 3489, no cookie): a binding request or
/// response, then a known attribute type (MAPPED-ADDRESS .. the RFC 5389 ones, or the
/// comprehension-optional ones from 0x8000) at byte 20.
fn stun(p: &[u8]) -> bool {
    if p.len() < 8 || p[0] & 0xc0 != 0 || p[3] & 3 != 0 {
        return false;
    }
    if p[4..8] == [0x21, 0x12, 0xa4, 0x42] {
        return true;
    }
    let ty = u16::from_be_bytes([p[0], p[1]]);
    let len = u16::from_be_bytes([p[2], p[3]]);
    let attr = p.get(20..22).map(|a| u16::from_be_bytes([a[0], a[1]]));
    matches!(ty, 0x0001 | 0x0101 | 0x0111)
        && (8..=1024).contains(&len)
        && attr.is_some_and(|a| matches!(a, 0x0001..=0x002f | 0x8000..=0x802f))
}

/// DTLS 1.0/1.2/1.3 records: content type 20-25, version 0xfeff, 0xfefd or 0xfefc.
fn dtls(p: &[u8]) -> bool {
    p.len() >= 13 && (20..=25).contains(&p[0]) && p[1] == 0xfe && matches!(p[2], 0xff | 0xfd | 0xfc)
}

/// RADIUS: a code of RFC 2865/2866/5176 and a length between 20 and 4096.
fn radius(p: &[u8]) -> bool {
    p.len() >= 20 && matches!(p[0], 1..=5 | 11..=13 | 40..=45) && {
        let len = u16::from_be_bytes([p[2], p[3]]);
        (20..=4096).contains(&len)
    }
}

/// BitTorrent over UDP: a DHT message (a bencoded dictionary, `d1:a` query, `d1:r` response,
/// `d1:e` error, or `d1:t` / `d1:y` keys first) or a uTP SYN (type 4, version 1).
fn bittorrent_udp(p: &[u8]) -> bool {
    let dht = ["d1:ad2:id20:", "d1:rd2:id20:", "d1:el", "d1:t", "d1:y1:"]
        .iter()
        .any(|k| p.starts_with(k.as_bytes()));
    let utp_syn = p.len() == 20 && p[0] == 0x41 && p[1] <= 2;
    dht || utp_syn
}

/// Syslog over UDP (RFC 3164/5424): `<PRI>` with PRI up to 191, then text.
fn syslog(p: &[u8]) -> bool {
    let Some(rest) = p.strip_prefix(b"<") else {
        return false;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    (1..=3).contains(&digits)
        && rest.get(digits) == Some(&b'>')
        && std::str::from_utf8(&rest[..digits])
            .ok()
            .and_then(|d| d.parse::<u16>().ok())
            .is_some_and(|pri| pri <= 191)
        && rest
            .get(digits + 1)
            .is_some_and(|b| b.is_ascii_graphic() || *b == b' ')
}

/// RTP version 2, a static audio/video payload type or a dynamic one (RTCP's 200-204 read
/// as marker and payload type are 72-76: not RTP), a header of at least 12 bytes.
fn rtp(p: &[u8]) -> bool {
    p.len() >= 12 && p[0] >> 6 == 2 && matches!(p[1] & 0x7f, 0..=34 | 96..=127)
}

/// The well-known ports: the fallback when the payload names nothing.
fn port(proto: u8, port: u16) -> Option<App> {
    Some(match (proto, port) {
        (6, 80 | 8080 | 8000 | 3128) => App::Http,
        (6, 443 | 465 | 636 | 853 | 993 | 995 | 8443) => App::Tls,
        (17, 443) => App::Quic,
        (6 | 17, 53) => App::Dns,
        (6, 22) => App::Ssh,
        (6, 25 | 587) => App::Smtp,
        (6, 143) => App::Imap,
        (6, 110) => App::Pop3,
        (6, 21) => App::Ftp,
        (6 | 17, 5060) => App::Sip,
        (6, 6881..=6889) | (17, 6881) => App::Bittorrent,
        (6, 445 | 139) => App::Smb,
        (6 | 17, 3389) => App::Rdp,
        (17, 123) => App::Ntp,
        (17, 67 | 68) => App::Dhcp,
        (6, 1883) => App::Mqtt,
        (6 | 17, 88) => App::Kerberos,
        (6 | 17, 389) => App::Ldap,
        (6, 5432) => App::Postgresql,
        (6, 3306) => App::Mysql,
        (6, 6379) => App::Redis,
        (17, 5353) => App::Mdns,
        (17, 5355) => App::Llmnr,
        (17, 137 | 138) => App::Netbios,
        (17, 1900) => App::Ssdp,
        (6 | 17, 3478) => App::Stun,
        (17, 161 | 162) => App::Snmp,
        (17, 514) => App::Syslog,
        (17, 1812 | 1813) => App::Radius,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(proto: u8, sport: u16, dport: u16, fwd: &[u8], rev: &[u8]) -> Option<(App, AppSource)> {
        classify(proto, sport, dport, fwd, rev).map(|l| (l.app, l.source))
    }

    fn payload(proto: u8, sport: u16, dport: u16, fwd: &[u8], rev: &[u8]) -> Option<App> {
        match app(proto, sport, dport, fwd, rev) {
            Some((a, AppSource::Payload)) => Some(a),
            _ => None,
        }
    }

    #[test]
    fn parse_tcp_first_messages() {
        let cases: &[(&[u8], &[u8], App)] = &[
            (b"GET / HTTP/1.1\r\nHost: x\r\n", b"", App::Http),
            (b"CONNECT example.com:443 HTTP/1.1", b"", App::Http),
            (b"", b"HTTP/1.1 200 OK\r\n", App::Http),
            (
                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
                b"",
                App::Tls,
            ),
            (
                b"",
                b"\x16\x03\x03\x00\x5a\x02\x00\x00\x56\x03\x03",
                App::Tls,
            ),
            (b"\x80\x2e\x01\x03\x01\x00\x15", b"", App::Tls),
            (b"SSH-2.0-OpenSSH_8.9\r\n", b"SSH-2.0-OpenSSH_8.2", App::Ssh),
            (b"EHLO client\r\n", b"220 mx ESMTP Postfix\r\n", App::Smtp),
            (b"USER anonymous\r\n", b"220 (vsFTPd 3.0.3)\r\n", App::Ftp),
            (b"USER bob\r\n", b"+OK POP3 ready\r\n", App::Pop3),
            (b"a1 CAPABILITY\r\n", b"* OK IMAP4rev1 ready\r\n", App::Imap),
            (b"a1 LOGIN bob pw\r\n", b"", App::Imap),
            (b"INVITE sip:bob@example.com SIP/2.0\r\n", b"", App::Sip),
            (b"\x13BitTorrent protocol\x00\x00", b"", App::Bittorrent),
            (b"\x00\x00\x00\x85\xffSMBr\x00\x00\x00\x00", b"", App::Smb),
            (b"\x00\x00\x00\x66\xfeSMB\x40\x00", b"", App::Smb),
            (
                b"\x03\x00\x00\x2b\x26\xe0\x00\x00\x00\x00\x00Cookie: mstshash=a",
                b"",
                App::Rdp,
            ),
            (
                b"\x00\x00\x00\x9c\x6a\x81\x99\x30\x81\x96",
                b"",
                App::Kerberos,
            ),
            (
                b"\x30\x0c\x02\x01\x01\x60\x07\x02\x01\x03\x04\x00\x80\x00",
                b"",
                App::Ldap,
            ),
            (b"\x10\x23\x00\x04MQTT\x04\x02\x00\x3c", b"", App::Mqtt),
            (b"\x00\x00\x00\x08\x04\xd2\x16\x2f", b"", App::Postgresql),
            (
                b"\x00\x00\x00\x29\x00\x03\x00\x00user\x00",
                b"",
                App::Postgresql,
            ),
            (b"", b"\x4a\x00\x00\x00\x0a5.7.33\x00", App::Mysql),
            (b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n", App::Redis),
            (b"<167>2016-05-24T09:50:52 host", b"", App::Syslog),
            (b"57 <34>1 2003-10-11T22:14:15", b"", App::Syslog),
        ];
        for (fwd, rev, want) in cases {
            assert_eq!(
                payload(6, 40000, 9999, fwd, rev),
                Some(*want),
                "{fwd:?} / {rev:?}"
            );
        }
        // NetBIOS session request on 139.
        assert_eq!(
            payload(6, 40000, 139, b"\x81\x00\x00\x44\x20CKFDENECFDEFFCFG", b""),
            Some(App::Netbios)
        );
    }

    #[test]
    fn parse_udp_first_messages() {
        let dns_query: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03www\x07example\x03com\x00\x00\x01\x00\x01";
        let cases: &[(u16, &[u8], App)] = &[
            (53, dns_query, App::Dns),
            (5353, dns_query, App::Mdns),
            (5355, dns_query, App::Llmnr),
            (443, b"\xc3\x00\x00\x00\x01\x08\x83\x94\xc8\xf0\x3e\x51\x57\x08", App::Quic),
            (443, b"\x0d\x12\x34\x56\x78\x9a\xbc\xde\xf0Q046\x01", App::Quic),
            (5060, b"REGISTER sip:example.com SIP/2.0\r\n", App::Sip),
            (1900, b"M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250", App::Ssdp),
            (67, b"\x01\x01\x06\x00\x39\x03\xf3\x26", App::Dhcp),
            (123, b"\x23\x00\x06\x20\x00\x00\x00\x00", App::Ntp),
            (3478, b"\x00\x01\x00\x08\x21\x12\xa4\x42\x01\x02\x03\x04", App::Stun),
            (4433, b"\x16\xfe\xfd\x00\x00\x00\x00\x00\x00\x00\x00\x00\x9c\x01", App::Dtls),
            (88, b"\x6a\x81\xb3\x30\x81\xb0\xa1\x03", App::Kerberos),
            (161, b"\x30\x26\x02\x01\x01\x04\x06public\xa0\x19", App::Snmp),
            (1812, b"\x01\x2a\x00\x40\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff", App::Radius),
            (6881, b"d1:ad2:id20:abcdefghij0123456789e", App::Bittorrent),
            (514, b"<34>Oct 11 22:14:15 mymachine su", App::Syslog),
            (20000, b"\x80\x00\x12\x34\x00\x00\x00\xa0\xde\xad\xbe\xef", App::Rtp),
            (4433, b"\xc0\x1a\x2a\x3a\x4a\x08\x01\x02", App::Quic),
            (123, b"\x17\x00\x03\x2a\x00\x00\x00\x00", App::Ntp),
            (3389, b"\xff\xff\xff\xff\x00\x40\x00\x01", App::Rdp),
            (
                13958,
                b"\x00\x01\x00\x08\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff\x00\x00\x03\x00\x04",
                App::Stun,
            ),
            (53, b"\x00\x07\x08\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x01", App::Dns),
        ];
        for (port, fwd, want) in cases {
            assert_eq!(
                payload(17, 40000, *port, fwd, b""),
                Some(*want),
                "{port} {fwd:?}"
            );
        }
    }

    #[test]
    fn ports_only_as_marked_fallback() {
        assert_eq!(
            app(6, 40000, 443, b"", b""),
            Some((App::Tls, AppSource::Port))
        );
        // A payload that matches nothing on a well-known port: still only a guess.
        assert_eq!(
            app(6, 40000, 80, b"\x00\x01garbage", b""),
            Some((App::Http, AppSource::Port))
        );
        // The responder's port wins over the initiator's.
        assert_eq!(
            app(17, 53, 123, b"", b""),
            Some((App::Ntp, AppSource::Port))
        );
        assert_eq!(app(6, 40000, 40001, b"hello", b"world"), None);
        // DNS-shaped bytes away from the DNS ports are not DNS.
        let dns: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03www\x00";
        assert_eq!(app(17, 40000, 40001, dns, b""), None);
    }

    #[test]
    fn truncated_prefixes_never_panic() {
        let samples: &[&[u8]] = &[
            b"GET /",
            b"\x16\x03\x01\x02",
            b"\x30\x81",
            b"\x10\xff\xff\xff\xff",
            b"*12",
            b"<1",
            b"\x00\x00\x00\x08",
            b"220",
            b"\xc3\x00",
        ];
        for s in samples {
            for n in 0..=s.len() {
                for proto in [6, 17] {
                    let _ = classify(proto, 53, 123, &s[..n], &s[..n]);
                }
            }
        }
    }
}
