//! trawl's blocks in real compositions: over the committed captures (checked against the same
//! work done by the library without the runtime, and against libpcap), live capture on veth
//! pairs in network namespaces (with tcpreplay putting capture files on the wire), the shared
//! ring (published and read by `ring_source`), the packet store, the flow database, exporters to a real UDP socket, and the
//! composition files shipped in `compositions/`.
mod compositions;
mod docs;
mod ipfix;
mod live;
mod offline;
mod ring_source;
mod storage;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Deserialize;
use trawl_blocks::messages::{Events, FlowBatch, PacketBatch};
use trawl_capture::{FileSource, PacketSource};
use trawl_compose::{Block, BuildEnv, Ctx, GateDef, Msg, MsgType, Registry};
use trawl_flow::FlowRecord;

/// A packet as the tests compare it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pkt {
    pub data: Vec<u8>,
    pub wire_len: u32,
}

/// What a `collect` block received: packets or flow records.
#[derive(Default, Clone)]
pub struct Collected {
    pub packets: Vec<Pkt>,
    pub flows: Vec<FlowRecord<'static>>,
    /// The clock of every flow batch, in arrival order (empty batches too).
    pub clocks: Vec<u64>,
    /// Events of detectors, as JSON.
    pub events: Vec<serde_json::Value>,
}

fn collected_map() -> &'static Mutex<HashMap<String, Collected>> {
    static SEEN: OnceLock<Mutex<HashMap<String, Collected>>> = OnceLock::new();
    SEEN.get_or_init(Default::default)
}

/// What the `collect` block named `name` has received so far (names are unique per test).
pub fn collected(name: &str) -> Collected {
    collected_map()
        .lock()
        .unwrap()
        .get(name)
        .cloned()
        .unwrap_or_default()
}

/// A test sink keeping every packet and flow record it receives, by block name; with `hold`,
/// it also keeps the last `hold` messages themselves (a receiver that holds on to batches, as
/// `rtp_calls` does while it waits for their SIP).
pub struct Collect {
    name: String,
    hold: usize,
    held: VecDeque<Msg>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectSettings {
    #[serde(default)]
    hold: usize,
}

impl Block for Collect {
    const TYPE: &'static str = "collect";
    const SUMMARY: &'static str = "keeps what it receives (tests)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "in",
        ty: MsgType::ANY,
        required: true,
        doc: "packets or flows",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = CollectSettings;

    fn build(s: CollectSettings, env: &BuildEnv) -> Result<Self, String> {
        collected_map()
            .lock()
            .unwrap()
            .insert(env.name.clone(), Collected::default());
        Ok(Collect {
            name: env.name.clone(),
            hold: s.hold,
            held: VecDeque::new(),
        })
    }

    fn receive(&mut self, _input: usize, msg: &Msg, _ctx: &mut Ctx<'_>) {
        let mut map = collected_map().lock().unwrap();
        let c = map.entry(self.name.clone()).or_default();
        if let Some(p) = msg.get::<PacketBatch>() {
            c.packets.extend(p.batch().iter().map(|p| Pkt {
                data: p.data.to_vec(),
                wire_len: p.wire_len,
            }));
        }
        if let Some(f) = msg.get::<FlowBatch>() {
            c.flows.extend(f.records.iter().copied());
            c.clocks.push(f.clock_ns);
        }
        if let Some(e) = msg.get::<Events>() {
            c.events.extend(e.iter().map(|e| e.to_event().json));
        }
        if self.hold > 0 {
            if self.held.len() == self.hold {
                self.held.pop_front();
            }
            self.held.push_back(msg.clone());
        }
    }
}

pub fn registry() -> Registry {
    let mut r = trawl_blocks::registry();
    r.register::<Collect>();
    r
}

pub fn cpus() -> Vec<usize> {
    trawl_capture::live::allowed_cpus()
}

pub fn pcap(name: &str) -> PathBuf {
    trawl_testkit::testdata(&format!("pcaps/{name}"))
}

/// A committed capture (the same as [`pcap`]).
pub fn capture(name: &str) -> PathBuf {
    pcap(name)
}

/// A path inside `dir` as a TOML string.
pub fn p(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// Every packet of a capture file, with its timestamp.
pub fn file_packets(path: &Path) -> Vec<(u64, Pkt)> {
    let mut src = FileSource::open(path).expect("open capture");
    let mut v = Vec::new();
    while let Some(b) = src.next_batch().expect("read capture") {
        v.extend(b.iter().map(|p| {
            (
                p.ts_ns,
                Pkt {
                    data: p.data.to_vec(),
                    wire_len: p.wire_len,
                },
            )
        }));
    }
    v
}

/// A composition that meters `file` (`pcap_source` "file" into `flow_meter` "meter") and sends
/// the records to the block `sink` (one `[[block]]` table), into its gate `to`.
pub fn metered_file(file: &Path, sink: &str, to: &str) -> String {
    format!(
        r#"
        [[block]]
        name = "file"
        type = "pcap_source"
        files = ["{}"]
        [[block]]
        name = "meter"
        type = "flow_meter"
        {sink}
        [[connection]]
        from = "file.packets"
        to = "meter.packets"
        [[connection]]
        from = "meter.flows"
        to = "{to}"
        "#,
        file.display()
    )
}

/// Plans and starts `text` with the test registry.
pub fn start(text: &str) -> trawl_compose::Running {
    let plan = trawl_compose::plan(text, "test", &registry(), &cpus())
        .unwrap_or_else(|e| panic!("invalid composition: {e}\n{text}"));
    trawl_compose::start(plan).unwrap_or_else(|e| panic!("cannot start: {e}"))
}

/// Runs `text` to its end (file sources) and returns the report; panics on failure.
pub fn run(text: &str) -> trawl_compose::Report {
    start(text)
        .wait()
        .unwrap_or_else(|(e, r)| panic!("run failed: {e}\n{}", r.table()))
}

/// Waits until `done` holds (polling), at most `limit`.
pub fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// A conversation: protocol and the two endpoints in a fixed order.
pub type Conversation = (u8, (IpAddr, u16), (IpAddr, u16));

/// Packets and bytes (both directions) per conversation, summed over records.
pub fn conversation_sums(records: &[FlowRecord<'_>]) -> BTreeMap<Conversation, (u64, u64)> {
    let mut m = BTreeMap::new();
    for r in records {
        let (a, b) = ((r.src_ip, r.src_port), (r.dst_ip, r.dst_port));
        let key = if a <= b {
            (r.proto, a, b)
        } else {
            (r.proto, b, a)
        };
        let e: &mut (u64, u64) = m.entry(key).or_default();
        e.0 += r.fwd.packets + r.rev.packets;
        e.1 += r.fwd.bytes + r.rev.bytes;
    }
    m
}
