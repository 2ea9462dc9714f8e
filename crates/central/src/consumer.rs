//! The Kafka consumer of trawl's flow topics: librdkafka's consumer in a group, automatic
//! commits off, offsets committed by the caller once the records are durable
//! ([`crate::OffsetTracker`]). A new group starts at the oldest message.
use std::collections::BTreeSet;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use crate::message::TopicFormat;
use crate::Error;

/// Where to consume: `BROKER[,BROKER...]/TOPIC[?format=trawl|goflow2]`, as `kafka://`
/// destinations name a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaSource {
    /// Bootstrap list.
    pub brokers: String,
    /// Topic.
    pub topic: String,
    /// What its messages are (`format=`; default `trawl`).
    pub format: TopicFormat,
}

impl KafkaSource {
    /// Parses `BROKER[,BROKER...]/TOPIC[?format=trawl|goflow2]` (a leading `kafka://` is
    /// allowed).
    pub fn parse(text: &str) -> Result<KafkaSource, Error> {
        let t = text.strip_prefix("kafka://").unwrap_or(text);
        let bad = |why: &str| Error::BadSource {
            text: text.to_string(),
            why: why.to_string(),
        };
        let (t, query) = t.split_once('?').unwrap_or((t, ""));
        let mut format = TopicFormat::Trawl;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("format", v)) => {
                    format = TopicFormat::from_name(v)
                        .ok_or_else(|| bad("`format` is trawl or goflow2"))?;
                }
                _ => return Err(bad(&format!("unknown parameter {pair:?} (only `format`)"))),
            }
        }
        let (brokers, topic) = t
            .rsplit_once('/')
            .ok_or_else(|| bad("expected BROKER[,BROKER...]/TOPIC"))?;
        if brokers.is_empty() || brokers.split(',').any(|b| !b.contains(':')) {
            return Err(bad("each broker is HOST:PORT"));
        }
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if topic.is_empty() || topic.len() > 249 || !topic.chars().all(ok) {
            return Err(bad("the topic is 1 to 249 characters of a-z A-Z 0-9 . _ -"));
        }
        Ok(KafkaSource {
            brokers: brokers.to_string(),
            topic: topic.to_string(),
            format,
        })
    }
}

/// One message handed to the caller.
pub struct Record<'a> {
    /// Partition.
    pub partition: i32,
    /// Offset in the partition.
    pub offset: i64,
    /// The key (empty when the message has none): the probe's name for series and alarms.
    pub key: &'a [u8],
    /// The value (empty when the message has none).
    pub value: &'a [u8],
}

/// What one [`KafkaConsumer::poll`] saw.
#[derive(Debug, PartialEq, Eq)]
pub enum Polled {
    /// A message was handed to the callback.
    Message,
    /// Nothing within the wait.
    Nothing,
    /// A partition reached its end.
    End,
}

/// A consumer of one topic in a group.
pub struct KafkaConsumer {
    consumer: BaseConsumer,
    topic: String,
    /// Partitions that reached their end with no message since.
    at_end: BTreeSet<i32>,
}

impl KafkaConsumer {
    /// Joins `group` and subscribes to the topic (partitions are assigned in the background,
    /// during [`KafkaConsumer::poll`]).
    pub fn open(source: &KafkaSource, group: &str) -> Result<KafkaConsumer, Error> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &source.brokers)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "true")
            // Large fetches: a batch insert wants many records per poll round.
            .set("fetch.max.bytes", "67108864")
            .set("max.partition.fetch.bytes", "16777216")
            .set("client.id", format!("trawl-{group}"))
            .create()
            .map_err(|e| Error::Kafka {
                what: format!("cannot create a consumer of {}", source.topic),
                why: e.to_string(),
            })?;
        consumer
            .subscribe(&[&source.topic])
            .map_err(|e| Error::Kafka {
                what: format!("cannot subscribe to {}", source.topic),
                why: e.to_string(),
            })?;
        Ok(KafkaConsumer {
            consumer,
            topic: source.topic.clone(),
            at_end: BTreeSet::new(),
        })
    }

    /// Waits up to `wait` for one message and hands it to `f`.
    pub fn poll(&mut self, wait: Duration, f: &mut dyn FnMut(Record<'_>)) -> Result<Polled, Error> {
        match self.consumer.poll(wait) {
            None => Ok(Polled::Nothing),
            Some(Ok(m)) => {
                self.at_end.remove(&m.partition());
                f(Record {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().unwrap_or_default(),
                    value: m.payload().unwrap_or_default(),
                });
                Ok(Polled::Message)
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                self.at_end.insert(p);
                Ok(Polled::End)
            }
            Some(Err(e)) => Err(Error::Kafka {
                what: format!("consuming {}", self.topic),
                why: e.to_string(),
            }),
        }
    }

    /// Whether every partition assigned to this consumer is at its end (none assigned yet:
    /// no).
    pub fn all_at_end(&self) -> bool {
        let Ok(assigned) = self.consumer.assignment() else {
            return false;
        };
        let parts: Vec<i32> = assigned.elements().iter().map(|e| e.partition()).collect();
        !parts.is_empty() && parts.iter().all(|p| self.at_end.contains(p))
    }

    /// Commits `positions` (partition, next offset to read), synchronously.
    pub fn commit(&self, positions: &[(i32, i64)]) -> Result<(), Error> {
        if positions.is_empty() {
            return Ok(());
        }
        let mut list = TopicPartitionList::new();
        for (p, o) in positions {
            list.add_partition_offset(&self.topic, *p, Offset::Offset(*o))
                .map_err(|e| Error::Kafka {
                    what: format!("committing {}/{p}", self.topic),
                    why: e.to_string(),
                })?;
        }
        self.consumer
            .commit(&list, CommitMode::Sync)
            .map_err(|e| Error::Kafka {
                what: format!("committing offsets of {}", self.topic),
                why: e.to_string(),
            })
    }
}
