//! The blocks trawl ships for its block runtime (`trawl-compose`), and the message types they
//! exchange. [`registry`] returns all of them; docs/blocks.md lists their gates and settings.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod anon;
pub mod applog;
#[cfg(feature = "kafka")]
pub mod clickhouse_sink;
mod clock;
pub mod count;
pub mod datagrams;
pub mod detect;
pub mod dumper;
pub mod export;
pub mod feed;
pub mod filter;
pub mod hourly_out;
pub mod http_log;
pub mod ipfix;
#[cfg(feature = "kafka")]
pub mod kafka_source;
pub mod lanes;
pub mod live;
pub mod messages;
pub mod meter;
pub mod output;
pub mod pcap;
pub mod printer;
pub mod quic_conns;
pub mod record_series;
pub mod ring;
pub mod ring_source;
pub mod series;
pub mod store;
pub mod stored;
pub mod stream_log;
pub mod tcp_conns;
pub mod tls_log;
mod util;
pub mod voip;
pub mod voip_out;
pub mod write;

use trawl_compose::Registry;

/// Every block type trawl ships.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register::<pcap::PcapSource>()
        .register::<filter::PacketFilter>()
        .register::<anon::PacketAnonymizer>()
        .register::<meter::FlowMeterBlock>()
        .register::<lanes::PacketLanes>()
        .register::<series::SeriesMerge>()
        .register::<record_series::FlowSeries>()
        .register::<series::SeriesFileWriter>()
        .register::<write::FlowFileWriter>()
        .register::<write::EventFileWriter>()
        .register::<write::PcapFileWriter>()
        .register::<printer::PacketPrinter>()
        .register::<detect::SynFlood>()
        .register::<detect::HeavyHittersBlock>()
        .register::<live::AfPacketSource>()
        .register::<ring::RingBlock>()
        .register::<ring_source::RingSource>()
        .register::<dumper::DumperBlock>()
        .register::<store::FlowStore>()
        .register::<stored::SeriesStore>()
        .register::<stored::AlarmStore>()
        .register::<detect::SeriesChange>()
        .register::<export::FlowExport>()
        .register::<feed::SeriesFeedBlock>()
        .register::<count::Count>()
        .register::<voip::SipBlock>()
        .register::<voip::RtpCalls>()
        .register::<voip::SipAnomaly>()
        .register::<voip_out::DailyWriter>()
        .register::<hourly_out::HourlyWriter>()
        .register::<ipfix::IpfixSource>()
        .register::<applog::DnsLog>()
        .register::<stream_log::StreamLog>();
    #[cfg(feature = "kafka")]
    r.register::<kafka_source::KafkaSourceBlock>()
        .register::<clickhouse_sink::ClickHouseSink>();
    r
}
