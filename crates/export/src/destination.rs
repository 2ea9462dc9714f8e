//! Where an exporter sends: parsed from `--export` arguments and `[[export]]` tables.
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::str::FromStr;

use crate::Error;

/// One export destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// `ipfix+udp://HOST:PORT[?biflow=off]`
    IpfixUdp(SocketAddr, Biflow),
    /// `ipfix+tcp://HOST:PORT[?biflow=off]` (IPFIX message framing, RFC 7011 10.4)
    IpfixTcp(SocketAddr, Biflow),
    /// `ipfix:/path/file.ipfix[?biflow=off]` (RFC 5655 file: messages back to back)
    IpfixFile(PathBuf, Biflow),
    /// `netflow9+udp://HOST:PORT`
    Netflow9Udp(SocketAddr),
    /// `netflow5+udp://HOST:PORT`
    Netflow5Udp(SocketAddr),
    /// `json:/path` (JSON lines)
    JsonFile(PathBuf),
    /// `json:-` (JSON lines on standard output)
    JsonStdout,
    /// `json+tcp://HOST:PORT` (JSON lines on a TCP connection)
    JsonTcp(SocketAddr),
    /// A multicast live feed of flow records (IPFIX, templates in every message).
    Feed(FeedAddr),
    /// `kafka://BROKER[,BROKER...]/TOPIC[?key=probe|flow&format=json|protobuf&series=TOPIC&alarms=TOPIC&...]`
    Kafka(KafkaTarget),
}

/// How an IPFIX destination sends a bidirectional flow record (`?biflow=on|off`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Biflow {
    /// One record with RFC 5103's reverse elements (the default).
    #[default]
    On,
    /// Two one-way records, each direction's sender as the source (`biflow=off`), for
    /// collectors that ignore the reverse elements.
    Off,
}

impl Biflow {
    /// `?biflow=off` in a destination's text, nothing for the default.
    fn suffix(self) -> &'static str {
        match self {
            Biflow::On => "",
            Biflow::Off => "?biflow=off",
        }
    }
}

/// The IPFIX parameters after `?` (`biflow=on|off`).
fn parse_ipfix_params(text: &str, query: Option<&str>) -> Result<Biflow, Error> {
    let mut biflow = Biflow::On;
    for kv in query.unwrap_or("").split('&').filter(|kv| !kv.is_empty()) {
        biflow = match kv {
            "biflow=on" => Biflow::On,
            "biflow=off" => Biflow::Off,
            other => {
                return Err(Error::BadDestination {
                    text: text.to_string(),
                    why: format!("parameter {other:?}: IPFIX takes biflow=on or biflow=off"),
                })
            }
        };
    }
    Ok(biflow)
}

/// How Kafka messages are keyed (and so partitioned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KafkaKey {
    /// The probe's name: all of a probe's records in one partition, in order.
    Probe,
    /// The flow key (`SRC_IP|SRC_PORT|DST_IP|DST_PORT|PROTO`): a flow's records in one
    /// partition, a probe's spread over all.
    Flow,
}

/// The encoding of a Kafka message's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KafkaFormat {
    /// One JSON object, the same as a line of trawl's JSON lines (without the newline).
    Json,
    /// One `trawl.FlowRecord` message of `docs/specs/trawl.proto` (no length prefix:
    /// ClickHouse's `ProtobufSingle`, `protoc --decode`).
    Protobuf,
    /// One Avro record of `docs/specs/avro/*.avsc` in Avro's single-object encoding
    /// (`C3 01`, the schema's fingerprint, the binary record).
    Avro,
    /// `trawl.FlowRecord` messages each after its length as a varint (Protobuf's delimited
    /// form: ClickHouse's `Protobuf` format), one or, with `batch=`, many per Kafka message.
    ProtobufDelimited,
}

impl KafkaFormat {
    /// The name `format=` takes.
    pub fn name(self) -> &'static str {
        match self {
            KafkaFormat::Json => "json",
            KafkaFormat::Protobuf => "protobuf",
            KafkaFormat::Avro => "avro",
            KafkaFormat::ProtobufDelimited => "protobuf-delimited",
        }
    }
}

/// How librdkafka compresses the batches it sends (`compression=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KafkaCompression {
    /// None (the default): on a LAN or loopback the CPU is worth more than the bytes.
    #[default]
    None,
    /// LZ4: cheap, for links where bandwidth costs.
    Lz4,
    /// gzip: smallest, most CPU.
    Gzip,
    /// Snappy.
    Snappy,
}

impl KafkaCompression {
    /// librdkafka's `compression.type` value.
    pub fn config_value(self) -> &'static str {
        match self {
            KafkaCompression::None => "none",
            KafkaCompression::Lz4 => "lz4",
            KafkaCompression::Gzip => "gzip",
            KafkaCompression::Snappy => "snappy",
        }
    }
}

/// The largest `batch=`: the brokers' default largest message (`message.max.bytes`,
/// 1048588 bytes) less room for the record batch's headers and key.
pub const MAX_KAFKA_BATCH: usize = 1_000_000;

/// How many replicas acknowledge a message before the producer counts it delivered
/// (`acks=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KafkaAcks {
    /// Every in-sync replica (`acks=all`, the default): the idempotent producer.
    All,
    /// The partition's leader alone (`acks=1`): not idempotent (librdkafka's idempotence
    /// needs `all`).
    Leader,
    /// None (`acks=0`): sent is delivered; not idempotent, no retry.
    None,
}

impl KafkaAcks {
    /// librdkafka's `acks` value.
    pub fn config_value(self) -> &'static str {
        match self {
            KafkaAcks::All => "all",
            KafkaAcks::Leader => "1",
            KafkaAcks::None => "0",
        }
    }
}

/// A Kafka destination: brokers, topics and delivery settings (`docs/specs/kafka.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaTarget {
    /// Bootstrap brokers, `HOST:PORT` separated by commas.
    pub brokers: String,
    /// Topic of flow records.
    pub topic: String,
    /// Topic of per-second series rows (`series=TOPIC`); none: rows are not sent.
    pub series_topic: Option<String>,
    /// Topic of alarms (`alarms=TOPIC`); none: alarms are not sent.
    pub alarms_topic: Option<String>,
    /// Message key (`key=`, default probe).
    pub key: KafkaKey,
    /// Message encoding (`format=`, default json).
    pub format: KafkaFormat,
    /// The probe's name (`probe=`, default the host name).
    pub probe: String,
    /// Directory of the spool of undelivered messages (`spool=`; none: they are dropped and
    /// counted).
    pub spool: Option<PathBuf>,
    /// Largest size of the spool in bytes (`spool_size=`, suffixes k, M, G; default 256M).
    pub spool_size: u64,
    /// A message not acknowledged after this long goes to the spool (`timeout=` in ms,
    /// default 5000).
    pub timeout_ms: u32,
    /// Acknowledgements the producer waits for (`acks=`, default all), on every topic of the
    /// destination.
    pub acks: KafkaAcks,
    /// Records packed into one message of the flow topic up to this many bytes (`batch=`);
    /// none: one record per message.
    pub batch: Option<usize>,
    /// Compression of the batches librdkafka sends (`compression=`, default none).
    pub compression: KafkaCompression,
    /// The parameters as given (what follows `?`): the destination's text form keeps them,
    /// so that it parses back to the same target (the CLI hands destinations to the
    /// `flow_export` block as text).
    pub params: String,
}

/// Default largest spool: 256 MiB.
pub const DEFAULT_SPOOL_SIZE: u64 = 256 << 20;

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "trawl".into())
}

fn parse_size(v: &str) -> Option<u64> {
    let (num, mult) = match v.char_indices().last()? {
        (i, 'k' | 'K') => (&v[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&v[..i], 1 << 20),
        (i, 'g' | 'G') => (&v[..i], 1 << 30),
        _ => (v, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

impl KafkaTarget {
    /// Parses what follows `kafka://`: `BROKERS/TOPIC[?PARAMS]`.
    pub fn parse(text: &str, rest: &str) -> Result<KafkaTarget, Error> {
        let bad = |why: String| Error::BadDestination {
            text: text.to_string(),
            why,
        };
        let (addr, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (brokers, topic) = addr
            .split_once('/')
            .ok_or_else(|| bad("expected kafka://BROKER[,BROKER...]/TOPIC".into()))?;
        if brokers.is_empty() || brokers.split(',').any(|b| !b.contains(':')) {
            return Err(bad("each broker is HOST:PORT".into()));
        }
        let valid_topic = |t: &str| {
            !t.is_empty()
                && t.len() <= 249
                && t.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c))
        };
        if !valid_topic(topic) {
            return Err(bad(format!(
                "topic {topic:?}: 1 to 249 of a-z A-Z 0-9 . _ -"
            )));
        }
        let mut t = KafkaTarget {
            brokers: brokers.to_string(),
            topic: topic.to_string(),
            series_topic: None,
            alarms_topic: None,
            key: KafkaKey::Probe,
            format: KafkaFormat::Json,
            probe: String::new(),
            spool: None,
            spool_size: DEFAULT_SPOOL_SIZE,
            timeout_ms: 5000,
            acks: KafkaAcks::All,
            batch: None,
            compression: KafkaCompression::None,
            params: query.to_string(),
        };
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| bad(format!("parameter {kv:?}: expected NAME=VALUE")))?;
            let invalid = || bad(format!("parameter {k}: invalid value {v:?}"));
            match k {
                "key" => {
                    t.key = match v {
                        "probe" => KafkaKey::Probe,
                        "flow" => KafkaKey::Flow,
                        _ => return Err(invalid()),
                    }
                }
                "format" => {
                    t.format = match v {
                        "json" => KafkaFormat::Json,
                        "protobuf" => KafkaFormat::Protobuf,
                        "avro" => KafkaFormat::Avro,
                        "protobuf-delimited" => KafkaFormat::ProtobufDelimited,
                        _ => return Err(invalid()),
                    }
                }
                "probe" if !v.is_empty() => t.probe = v.to_string(),
                "spool" if !v.is_empty() => t.spool = Some(PathBuf::from(v)),
                "spool_size" => {
                    t.spool_size = parse_size(v).filter(|s| *s > 0).ok_or_else(invalid)?
                }
                "timeout" => {
                    t.timeout_ms = v.parse().ok().filter(|t| *t > 0).ok_or_else(invalid)?
                }
                "acks" => {
                    t.acks = match v {
                        "all" | "-1" => KafkaAcks::All,
                        "1" => KafkaAcks::Leader,
                        "0" => KafkaAcks::None,
                        _ => return Err(invalid()),
                    }
                }
                "batch" => {
                    t.batch = Some(
                        parse_size(v)
                            .filter(|b| (1..=MAX_KAFKA_BATCH as u64).contains(b))
                            .ok_or_else(|| {
                                bad(format!(
                                    "parameter batch: {v:?} is not 1 to {MAX_KAFKA_BATCH} bytes"
                                ))
                            })? as usize,
                    )
                }
                "compression" => {
                    t.compression = match v {
                        "none" => KafkaCompression::None,
                        "lz4" => KafkaCompression::Lz4,
                        "gzip" => KafkaCompression::Gzip,
                        "snappy" => KafkaCompression::Snappy,
                        _ => return Err(invalid()),
                    }
                }
                // `series_topic`/`alarms_topic`: their first, reserved spelling.
                "series" | "series_topic" if valid_topic(v) => {
                    t.series_topic = Some(v.to_string())
                }
                "alarms" | "alarms_topic" if valid_topic(v) => {
                    t.alarms_topic = Some(v.to_string())
                }
                "probe" | "spool" | "series" | "series_topic" | "alarms" | "alarms_topic" => {
                    return Err(invalid())
                }
                other => {
                    return Err(bad(format!(
                        "unknown parameter {other:?} (key, format, probe, spool, spool_size, timeout, acks, batch, compression, series, alarms)"
                    )))
                }
            }
        }
        if let Some(why) = t.batch.and_then(|_| batch_conflict(t.format, t.key)) {
            return Err(bad(why.into()));
        }
        if t.probe.is_empty() {
            t.probe = host_name();
        }
        Ok(t)
    }
}

/// Why `batch=` cannot go with `format` and `key`, if it cannot: a batched message holds
/// many records, so their framing must say where each ends (JSON lines, delimited Protobuf),
/// and they share one key (the probe's).
fn batch_conflict(format: KafkaFormat, key: KafkaKey) -> Option<&'static str> {
    match (format, key) {
        (KafkaFormat::Avro, _) => Some(
            "parameter batch: Avro records are not batched (a single-object-encoded value is \
             one record); use format=json or format=protobuf-delimited",
        ),
        (KafkaFormat::Protobuf, _) => Some(
            "parameter batch: a format=protobuf value is one record without a length; batched \
             Protobuf is format=protobuf-delimited (each record after its length)",
        ),
        (_, KafkaKey::Flow) => Some(
            "parameter batch: a batched message holds many flows and has one key; batch with \
             key=probe",
        ),
        _ => None,
    }
}

/// A multicast feed: the group of the first interface, the UDP port, the TTL, and which local
/// address (interface) to send from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedAddr {
    /// Group of interface slot 0; interface slot `n` uses this address plus `n`.
    pub group: Ipv4Addr,
    /// UDP port.
    pub port: u16,
    /// Multicast TTL (1: this link only).
    pub ttl: u32,
    /// Local address to send from (selects the outgoing interface); None: the route's.
    pub source: Option<Ipv4Addr>,
}

impl FeedAddr {
    /// Parses `GROUP:PORT` (TTL 1, no source address).
    pub fn parse(s: &str) -> Result<FeedAddr, Error> {
        let bad = |why: &str| Error::BadDestination {
            text: s.to_string(),
            why: why.to_string(),
        };
        let (g, p) = s
            .rsplit_once(':')
            .ok_or_else(|| bad("expected GROUP:PORT, e.g. 239.255.10.1:5500"))?;
        let group: Ipv4Addr = g.parse().map_err(|_| bad("group is not an IPv4 address"))?;
        if !group.is_multicast() {
            return Err(bad("not a multicast group (224.0.0.0/4)"));
        }
        let port: u16 = p.parse().map_err(|_| bad("port is not a number"))?;
        if port == 0 {
            return Err(bad("port 0"));
        }
        Ok(FeedAddr {
            group,
            port,
            ttl: 1,
            source: None,
        })
    }

    /// The group of interface slot `slot` (the base group plus the slot).
    pub fn group_for(&self, slot: u16) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.group).wrapping_add(u32::from(slot)))
    }
}

impl fmt::Display for FeedAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.group, self.port)
    }
}

fn resolve(text: &str, hostport: &str) -> Result<SocketAddr, Error> {
    hostport
        .to_socket_addrs()
        .map_err(|e| Error::BadDestination {
            text: text.to_string(),
            why: format!("cannot resolve '{hostport}': {e}"),
        })?
        .next()
        .ok_or_else(|| Error::BadDestination {
            text: text.to_string(),
            why: format!("'{hostport}' has no address"),
        })
}

impl FromStr for Destination {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |why: &str| Error::BadDestination {
            text: s.to_string(),
            why: why.to_string(),
        };
        let (scheme, rest) = s.split_once(':').ok_or_else(|| {
            bad("expected SCHEME:TARGET (ipfix+udp://, ipfix+tcp://, ipfix:PATH, netflow9+udp://, netflow5+udp://, json:PATH, json:-, json+tcp://, kafka://)")
        })?;
        let net = |rest: &str| -> Result<SocketAddr, Error> {
            let hp = rest
                .strip_prefix("//")
                .ok_or_else(|| bad("expected //HOST:PORT"))?;
            resolve(s, hp)
        };
        let path = |rest: &str| -> Result<PathBuf, Error> {
            let p = rest.strip_prefix("//").unwrap_or(rest);
            if p.is_empty() {
                return Err(bad("empty path"));
            }
            Ok(PathBuf::from(p))
        };
        // IPFIX takes `?biflow=...`; the others' text is all address or path.
        let ipfix = matches!(scheme, "ipfix+udp" | "ipfix+tcp" | "ipfix" | "ipfix+file");
        let (rest, biflow) = match rest.split_once('?') {
            Some((r, q)) if ipfix => (r, parse_ipfix_params(s, Some(q))?),
            _ => (rest, Biflow::On),
        };
        Ok(match scheme {
            "ipfix+udp" => Destination::IpfixUdp(net(rest)?, biflow),
            "ipfix+tcp" => Destination::IpfixTcp(net(rest)?, biflow),
            "ipfix" | "ipfix+file" => Destination::IpfixFile(path(rest)?, biflow),
            "netflow9+udp" | "netflow9" => Destination::Netflow9Udp(net(rest)?),
            "netflow5+udp" | "netflow5" => Destination::Netflow5Udp(net(rest)?),
            "json" if rest == "-" => Destination::JsonStdout,
            "json" => Destination::JsonFile(path(rest)?),
            "json+tcp" => Destination::JsonTcp(net(rest)?),
            "kafka" => Destination::Kafka(KafkaTarget::parse(
                s,
                rest.strip_prefix("//")
                    .ok_or_else(|| bad("expected kafka://BROKER[,BROKER...]/TOPIC"))?,
            )?),
            "feed" | "multicast" => {
                Destination::Feed(FeedAddr::parse(rest.strip_prefix("//").unwrap_or(rest))?)
            }
            other => return Err(bad(&format!("unknown scheme '{other}'"))),
        })
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::IpfixUdp(a, b) => write!(f, "ipfix+udp://{a}{}", b.suffix()),
            Destination::IpfixTcp(a, b) => write!(f, "ipfix+tcp://{a}{}", b.suffix()),
            Destination::IpfixFile(p, b) => write!(f, "ipfix:{}{}", p.display(), b.suffix()),
            Destination::Netflow9Udp(a) => write!(f, "netflow9+udp://{a}"),
            Destination::Netflow5Udp(a) => write!(f, "netflow5+udp://{a}"),
            Destination::JsonFile(p) => write!(f, "json:{}", p.display()),
            Destination::JsonStdout => write!(f, "json:-"),
            Destination::JsonTcp(a) => write!(f, "json+tcp://{a}"),
            Destination::Feed(a) => write!(f, "feed:{a}"),
            Destination::Kafka(k) if k.params.is_empty() => {
                write!(f, "kafka://{}/{}", k.brokers, k.topic)
            }
            Destination::Kafka(k) => write!(f, "kafka://{}/{}?{}", k.brokers, k.topic, k.params),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kafka(text: &str) -> Result<KafkaTarget, String> {
        match text.parse::<Destination>() {
            Ok(Destination::Kafka(k)) => Ok(k),
            Ok(other) => panic!("not kafka: {other:?}"),
            Err(e) => Err(e.to_string()),
        }
    }

    /// `batch=` takes a size up to what brokers take by default, and only formats whose
    /// records can share a message (and one key).
    #[test]
    fn parse_kafka_batch_and_its_conflicts() {
        let k =
            kafka("kafka://h:1/t?batch=256k&format=protobuf-delimited&compression=lz4").unwrap();
        assert_eq!(k.batch, Some(256 << 10));
        assert_eq!(k.format, KafkaFormat::ProtobufDelimited);
        assert_eq!(k.compression.config_value(), "lz4");
        assert_eq!(kafka("kafka://h:1/t?batch=1000").unwrap().batch, Some(1000));
        let e = kafka("kafka://h:1/t?batch=1M").unwrap_err();
        assert!(e.contains("batch: \"1M\" is not 1 to 1000000 bytes"), "{e}");
        assert!(kafka("kafka://h:1/t?batch=0").is_err());
        let e = kafka("kafka://h:1/t?batch=64k&format=avro").unwrap_err();
        assert!(e.contains("Avro records are not batched"), "{e}");
        let e = kafka("kafka://h:1/t?format=protobuf&batch=64k").unwrap_err();
        assert!(e.contains("format=protobuf-delimited"), "{e}");
        let e = kafka("kafka://h:1/t?batch=64k&key=flow").unwrap_err();
        assert!(e.contains("key=probe"), "{e}");
        let e = kafka("kafka://h:1/t?compression=brotli").unwrap_err();
        assert!(e.contains("compression"), "{e}");
        // Unbatched, every format is as before; delimited Protobuf too.
        assert!(kafka("kafka://h:1/t?format=protobuf-delimited&key=flow").is_ok());
    }

    #[test]
    fn parse_every_scheme() {
        let d: Destination = "ipfix+udp://127.0.0.1:4739".parse().unwrap();
        assert_eq!(
            d,
            Destination::IpfixUdp("127.0.0.1:4739".parse().unwrap(), Biflow::On)
        );
        let d: Destination = "ipfix:/tmp/x.ipfix".parse().unwrap();
        assert_eq!(d, Destination::IpfixFile("/tmp/x.ipfix".into(), Biflow::On));
        // biflow=off, and back to the same text.
        let d: Destination = "ipfix+udp://127.0.0.1:4739?biflow=off".parse().unwrap();
        assert_eq!(
            d,
            Destination::IpfixUdp("127.0.0.1:4739".parse().unwrap(), Biflow::Off)
        );
        assert_eq!(d.to_string(), "ipfix+udp://127.0.0.1:4739?biflow=off");
        let e = "ipfix+tcp://127.0.0.1:1?biflow=maybe"
            .parse::<Destination>()
            .unwrap_err();
        assert!(e.to_string().contains("biflow=on or biflow=off"), "{e}");
        assert_eq!(
            "json:-".parse::<Destination>().unwrap(),
            Destination::JsonStdout
        );
        assert!(matches!(
            "netflow5+udp://localhost:2055"
                .parse::<Destination>()
                .unwrap(),
            Destination::Netflow5Udp(_)
        ));
        let e = "sflow+udp://1.2.3.4:6343"
            .parse::<Destination>()
            .unwrap_err();
        assert!(e.to_string().contains("unknown scheme 'sflow+udp'"), "{e}");
        let e = "ipfix+udp:1.2.3.4".parse::<Destination>().unwrap_err();
        assert!(e.to_string().contains("//HOST:PORT"), "{e}");
        let e = FeedAddr::parse("10.0.0.1:5").unwrap_err();
        assert!(e.to_string().contains("multicast"), "{e}");
        let Destination::Kafka(k) =
            "kafka://127.0.0.1:9092,127.0.0.1:9093/flows?key=flow&format=protobuf&spool=/tmp/s&spool_size=2M&probe=p1&series=flows-s"
                .parse()
                .unwrap()
        else {
            panic!("not kafka")
        };
        assert_eq!(k.brokers, "127.0.0.1:9092,127.0.0.1:9093");
        assert_eq!(
            (
                k.topic.as_str(),
                k.series_topic.as_deref(),
                k.alarms_topic.as_deref()
            ),
            ("flows", Some("flows-s"), None)
        );
        assert_eq!((k.key, k.format), (KafkaKey::Flow, KafkaFormat::Protobuf));
        assert_eq!((k.spool_size, k.probe.as_str()), (2 << 20, "p1"));
        let e = "kafka://h:1/t?colour=red"
            .parse::<Destination>()
            .unwrap_err();
        assert!(
            e.to_string().contains("unknown parameter \"colour\""),
            "{e}"
        );
        let e = "kafka://h/t".parse::<Destination>().unwrap_err();
        assert!(e.to_string().contains("HOST:PORT"), "{e}");
        assert_eq!((k.batch, k.compression), (None, KafkaCompression::None));
        assert_eq!(
            FeedAddr::parse("239.1.1.1:5500").unwrap().group_for(2),
            Ipv4Addr::new(239, 1, 1, 3)
        );
    }
}
