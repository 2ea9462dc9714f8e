//! The scan: blocks of the range handed to a pool of workers (map), each reading only the
//! needed columns of the row groups its statistics cannot rule out, filtering and grouping on
//! dictionary indices, and the workers' partial aggregates merged (reduce).
//!
//! Columns are decoded by `read` (trawl's own column chunks straight from their pages, others
//! through the Arrow reader) into buffers each worker reuses. Per row the work is a few array
//! lookups: a dictionary column's entries (a few hundred to a few thousand distinct values per
//! row group) are resolved once per row group into worker-wide codes (addresses lazily, as
//! rows that need them are met), and predicates are evaluated once per dictionary entry.
//! Group keys pack the codes and small integers into one `u128`; per-block constants
//! (interface, time bucket) select the hash map the block's rows go to.
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use parquet::file::metadata::RowGroupMetaData;
use parquet::file::statistics::Statistics;
use trawl_store::hash::FxHashMap;
use trawl_store::pages::DictColumn;
use trawl_store::schema::{STORE_VERSION, VERSION_KEY};
use trawl_store::{list_blocks_and_strays, proto_number, BlockFilter, BlockRef};

use crate::control::ScanControl;
use crate::error::Error;
use crate::partial::{
    context, country_code, tunnel_type_code, Inner, Layout, Metrics, PartialAggregate, ScanStats,
    Tables, NO_ADDR, V4_TAG,
};
use crate::plan::{eval3, Attribute, IpCol, IpPred, Leaf, Node, NumCol, Program, Query};
use crate::read::{BlockFile, Col, ColumnReader, CounterPages, RowGroup, DICTS};

/// Runs `query` over the database at `db` and returns the merged partial aggregate.
/// Unreadable blocks are counted in `stats.blocks_failed` with their error in `stats.errors`;
/// the others are still scanned. Parquet files that are not blocks are listed in
/// `stats.ignored_files`.
pub fn scan(db: &Path, query: &Query) -> Result<PartialAggregate, Error> {
    scan_with(db, query, &ScanControl::default())
}

/// [`scan`] that `control` can stop ([`Error::Cancelled`]) and that counts its blocks there.
pub fn scan_with(
    db: &Path,
    query: &Query,
    control: &ScanControl,
) -> Result<PartialAggregate, Error> {
    let listing = list_blocks_and_strays(
        db,
        &BlockFilter {
            ifaces: &query.ifaces,
            from_ns: query.from_ns,
            to_ns: query.to_ns,
        },
    )?;
    let mut partial = scan_blocks_with(&listing.blocks, query, control)?;
    partial.stats.ignored_files = listing
        .strays
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    Ok(partial)
}

/// Runs `query` over the given blocks (the time and interface selection already made).
pub fn scan_blocks(blocks: &[BlockRef], query: &Query) -> Result<PartialAggregate, Error> {
    scan_blocks_with(blocks, query, &ScanControl::default())
}

/// [`scan_blocks`] that `control` can stop and that counts its blocks there.
pub fn scan_blocks_with(
    blocks: &[BlockRef],
    query: &Query,
    control: &ScanControl,
) -> Result<PartialAggregate, Error> {
    // A database knows no probe: the coordinator of a fleet query answers these itself.
    if query.attributes.contains(&Attribute::Probe)
        || query
            .condition
            .as_ref()
            .is_some_and(|c| c.has_fleet_fields())
    {
        return Err(Error::FleetOnly);
    }
    let layout = Layout::of(&query.attributes)?;
    let program = Program::compile(query.condition.as_ref());
    let named = |n: &str| Col::of(n).ok_or_else(|| Error::Internal(format!("column {n}")));
    let mut columns: Vec<Col> = Vec::new();
    for n in query
        .attributes
        .iter()
        .filter_map(|a| a.column())
        .chain(program.columns())
    {
        let c = named(n)?;
        if !columns.contains(&c) {
            columns.push(c);
        }
    }
    columns.extend(Col::COUNTERS);
    let cond_columns = program
        .columns()
        .into_iter()
        .map(named)
        .collect::<Result<Vec<Col>, Error>>()?;
    let mut ifaces: Vec<String> = blocks.iter().map(|b| b.iface.clone()).collect();
    ifaces.sort();
    ifaces.dedup();
    let ctx = Ctx {
        query,
        control,
        layout,
        program,
        columns,
        resolution: query.time_resolution_ns.max(1),
        ips: Mutex::new(IpInterner::default()),
        ifaces,
        staged: AtomicUsize::new(0),
        stage_limit: query.max_groups.max(MIN_STAGE_LIMIT),
        cond_columns,
        text_attr: match query
            .attributes
            .iter()
            .filter(|a| a.column().is_some())
            .collect::<Vec<_>>()
            .as_slice()
        {
            [a @ (Attribute::Sip | Attribute::Dip)] => {
                Some((**a, dict_col(**a).unwrap_or(Col::Sip)))
            }
            _ => None,
        },
    };
    let next = AtomicUsize::new(0);
    let abort = AtomicBool::new(false);
    let workers = query.workers.clamp(1, blocks.len().max(1));
    let results: Vec<Result<PartialAggregate, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                let worker = std::thread::Builder::new()
                    .name("trawl-scan".into())
                    .stack_size(SCAN_STACK);
                worker.spawn_scoped(s, || {
                    let mut w = Worker::new(&ctx);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= blocks.len() || abort.load(Ordering::Relaxed) {
                            break;
                        }
                        if control.is_cancelled() {
                            abort.store(true, Ordering::Relaxed);
                            return Err(Error::Cancelled);
                        }
                        // A decoder that panics on a damaged file (the Parquet library is
                        // not hardened against every malformed input) fails that block like
                        // any other error; blocks are decoded whole before they count, so the
                        // worker's groups hold no part of it.
                        let outcome =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                w.block(&blocks[i])
                            }))
                            .unwrap_or_else(|p| {
                                let what = p
                                    .downcast_ref::<&str>()
                                    .map(|s| s.to_string())
                                    .or_else(|| p.downcast_ref::<String>().cloned())
                                    .unwrap_or_default();
                                Err(block_error(&blocks[i], format!("decoder panicked: {what}")))
                            });
                        control.block_done();
                        if let Err(e) = outcome {
                            if matches!(e, Error::TooManyGroups(_) | Error::Cancelled) {
                                abort.store(true, Ordering::Relaxed);
                                return Err(e);
                            }
                            w.stats.blocks_failed += 1;
                            w.stats.errors.push(e.to_string());
                        }
                    }
                    Ok(w.into_partial())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(Error::Internal("a scan worker panicked".into()))),
                Err(e) => Err(Error::Internal(format!("cannot start a scan worker: {e}"))),
            })
            .collect()
    });
    // Every worker interned into the same table: one decoding table for all partials, so
    // merging never re-encodes.
    let interner = ctx.ips.into_inner().unwrap_or_else(|p| p.into_inner());
    let tables = Arc::new(Tables {
        ips: interner.addrs,
        ip_ids: interner.ids,
        ifaces: ctx.ifaces,
        probes: Vec::new(),
    });
    // The workers' tables of each context are merged all at once: their staged rows are
    // aggregated together, a partition at a time (`AggTable::merge_all`).
    let mut total = PartialAggregate::new(query.attributes.clone(), query.max_groups);
    total.tables = tables;
    let mut by_ctx: FxHashMap<u64, Vec<Inner>> = FxHashMap::default();
    for r in results {
        let p = r?;
        total.stats.merge(&p.stats);
        for (c, m) in p.maps {
            by_ctx.entry(c).or_default().push(m);
        }
    }
    let threads = workers.max(1);
    for (c, tables) in by_ctx {
        total.maps.insert(c, Inner::merge_all(tables, threads));
    }
    if total.len() > query.max_groups {
        return Err(Error::TooManyGroups(query.max_groups));
    }
    total.stats.blocks = blocks.len() as u64;
    total.stats.errors.sort();
    Ok(total)
}

struct Ctx<'a> {
    query: &'a Query,
    /// Looked at before every row group: a cancelled scan stops.
    control: &'a ScanControl,
    /// Where each attribute goes in a packed key.
    layout: Layout,
    program: Program,
    /// Columns read: the attributes', the condition's, the four counters.
    columns: Vec<Col>,
    resolution: u64,
    /// Address ids shared by the workers (locked once per dictionary, not per row).
    ips: Mutex<IpInterner>,
    /// Interface names of the blocks, sorted; ids index this.
    ifaces: Vec<String>,
    /// Rows staged by all workers and not aggregated yet.
    staged: AtomicUsize,
    /// Most rows staged at once (32 bytes each) before a worker aggregates its own.
    stage_limit: usize,
    /// Columns of the condition.
    cond_columns: Vec<Col>,
    /// The one address attribute, when the query groups by it alone (besides interface and
    /// time): its dense groups are keyed by the address text (see [`text_key`]).
    text_attr: Option<(Attribute, Col)>,
}

/// Stack of a scan worker: the condition is evaluated by recursion over its tree, up to
/// `syntax::MAX_DEPTH` deep (a chain of 4,096 comparisons overflowed the default 2 MiB in a
/// debug build). Only the pages used are ever touched.
const SCAN_STACK: usize = 16 << 20;

/// Rows that may always be staged, whatever `max_groups` (32 MB; small in tests, so that
/// they stage past the limit).
const MIN_STAGE_LIMIT: usize = if cfg!(test) { 64 } else { 1 << 20 };

/// Ids of addresses shared by the workers, keyed by the address (parsed from the stored text
/// with a fast path for dotted quads: no string hashing or comparison per dictionary entry).
#[derive(Default)]
struct IpInterner {
    ids: FxHashMap<IpAddr, u32>,
    addrs: Vec<IpAddr>,
}

/// Parses a dotted quad in canonical form (as `std` accepts it: no leading zeros) without
/// the generic parser's overhead; `None` for anything else.
#[inline]
fn parse_v4(text: &[u8]) -> Option<u32> {
    let mut octets = [0u32; 4];
    let (mut n, mut digits) = (0usize, 0u32);
    for &c in text {
        match c {
            b'0'..=b'9' if digits < 3 && !(digits == 1 && octets[n] == 0) => {
                octets[n] = octets[n] * 10 + u32::from(c - b'0');
                digits += 1;
            }
            b'.' if digits > 0 && n < 3 => {
                n += 1;
                digits = 0;
            }
            _ => return None,
        }
    }
    if n != 3 || digits == 0 || octets.iter().any(|&o| o > 255) {
        return None;
    }
    Some(octets[0] << 24 | octets[1] << 16 | octets[2] << 8 | octets[3])
}

impl IpInterner {
    /// The 33-bit code of an IPv6 address (IPv4 codes need no table: see `V4_TAG`).
    fn v6_code(&mut self, ip: IpAddr) -> u64 {
        let n = self.addrs.len() as u32;
        let id = *self.ids.entry(ip).or_insert(n);
        if id == n {
            self.addrs.push(ip);
        }
        u64::from(id)
    }
}

/// What was derived from a dictionary column's dictionary: per entry the code that goes into
/// group keys (address code, `UNSET` until resolved; protocol number; port or VLAN).
#[derive(Default)]
struct DictCache {
    /// The dictionary this was derived from (`RowGroup::gens`); 0: none.
    gen: u64,
    codes: Vec<u64>,
    /// Per entry of an address dictionary: the address, once resolved.
    ips: Vec<IpAddr>,
}

/// A dictionary entry not resolved yet (codes use 33 bits).
const UNSET: u64 = u64::MAX;

/// Addresses other than IPv4 already resolved by a worker, by their text: the standard
/// parser and the shared table's lock are paid once per worker and address, not once per
/// dictionary.
type OtherAddrs = FxHashMap<Box<[u8]>, (u64, IpAddr)>;

/// Resolves entry `d` of an address dictionary (of column `c`: a tunnel address may be
/// empty, [`NO_ADDR`]).
#[inline(never)]
fn resolve_ip(
    cache: &mut DictCache,
    dict: &DictColumn,
    shared: &Mutex<IpInterner>,
    others: &mut OtherAddrs,
    c: Col,
    d: usize,
) -> Result<u64, String> {
    let text = dict.bytes(d);
    let name = c.name();
    let (code, ip) = if text.is_empty() && matches!(c, Col::TunnelSrc | Col::TunnelDst) {
        (NO_ADDR, IpAddr::V4(0.into()))
    } else if let Some(ip) = parse_v4(text) {
        (V4_TAG | u64::from(ip), IpAddr::V4(ip.into()))
    } else if let Some(&known) = others.get(text) {
        known
    } else {
        let ip = address_text(name, text)?;
        let code = match ip {
            IpAddr::V4(a) => V4_TAG | u64::from(u32::from(a)),
            IpAddr::V6(_) => shared.lock().unwrap_or_else(|p| p.into_inner()).v6_code(ip),
        };
        others.insert(text.into(), (code, ip));
        (code, ip)
    };
    cache.codes[d] = code;
    cache.ips[d] = ip;
    Ok(code)
}

/// A predicate table per dictionary entry, for one leaf: 0 false, 1 true, 2 not evaluated
/// yet.
#[derive(Default)]
struct LeafCache {
    gen: u64,
    table: Vec<u8>,
    /// For an IPv4 prefix on an octet boundary, the text every address in it starts with
    /// (`"10.1."` for 10.1.0.0/16): an entry not starting with it is outside without being
    /// parsed (stored text is canonical; an entry that is not an address at all is then
    /// simply not in the prefix, where parsing it would have failed the block).
    text: Option<Vec<u8>>,
}

impl LeafCache {
    fn new(leaf: &Leaf) -> LeafCache {
        let text = match leaf {
            Leaf::Ip(_, IpPred::In(n)) if n.addr.is_ipv4() && n.prefix % 8 == 0 && n.prefix > 0 => {
                let t = n.addr.to_string();
                let octets: Vec<&str> = t.split('.').take(usize::from(n.prefix / 8)).collect();
                Some(if n.prefix == 32 {
                    t.into_bytes()
                } else {
                    format!("{}.", octets.join(".")).into_bytes()
                })
            }
            _ => None,
        };
        LeafCache {
            text,
            ..LeafCache::default()
        }
    }
}

struct Worker<'a> {
    ctx: &'a Ctx<'a>,
    /// Context key (interface, time bucket) → index into `maps`.
    outer: FxHashMap<u64, usize>,
    maps: Vec<Inner>,
    groups: usize,
    stats: ScanStats,
    /// Per dictionary column (`Col::slot`): codes of the dictionary last seen.
    caches: [DictCache; DICTS],
    leaf_tables: Vec<LeafCache>,
    /// Flag buffers of condition evaluation, reused.
    flag_pool: Vec<Vec<bool>>,
    keys: Vec<u128>,
    /// Scratch of [`Worker::dense_rowgroup`]: local index per row, slot per local index, the
    /// sums per slot (or per local index), the local index of each slot.
    local: Vec<u32>,
    slot_of: Vec<u32>,
    dense: Vec<Metrics>,
    touched: Vec<u32>,
    /// Addresses other than IPv4 resolved so far.
    others: OtherAddrs,
    /// Groups of the current block's dense row groups, added once it is decoded whole.
    pending: Vec<(u128, Metrics)>,
    /// Rows to stage.
    rows: Vec<u32>,
    /// Groups a block created (keyed by text: checked to be addresses).
    created: Vec<u128>,
    /// Slot per row (the dense path through a slot index), and the row each slot was first
    /// met in.
    slots: Vec<u32>,
    first: Vec<u32>,
    /// Decoding: the column reader and the decoded row groups of the current block.
    reader: ColumnReader,
    rgs: Vec<RowGroup>,
}

/// Largest local key space aggregated densely (a 2^18-entry slot index: 1 MB per worker).
const DENSE_LIMIT: u64 = 1 << 18;

/// Largest local key space summed directly by local key (32,768 × 40 bytes, in L2).
const DIRECT_LIMIT: u64 = 1 << 15;

/// A local key without a slot in the current batch.
const NO_SLOT: u32 = u32::MAX;

fn block_error(b: &BlockRef, e: impl std::fmt::Display) -> Error {
    Error::Block(format!("{}: {e}", b.path.display()))
}

/// The dictionary column of an attribute or leaf.
fn dict_col(a: Attribute) -> Option<Col> {
    a.column().and_then(Col::of)
}

fn num_col(c: NumCol) -> Col {
    match c {
        NumCol::Sport => Col::Sport,
        NumCol::Dport => Col::Dport,
        NumCol::Vlan => Col::Vlan,
        NumCol::SrcAs => Col::SrcAs,
        NumCol::DstAs => Col::DstAs,
    }
}

fn ip_col(c: IpCol) -> Col {
    match c {
        IpCol::Src => Col::Sip,
        IpCol::Dst => Col::Dip,
        IpCol::TunnelSrc => Col::TunnelSrc,
        IpCol::TunnelDst => Col::TunnelDst,
    }
}

impl<'a> Worker<'a> {
    fn new(ctx: &'a Ctx<'a>) -> Self {
        Worker {
            ctx,
            outer: FxHashMap::default(),
            maps: Vec::new(),
            groups: 0,
            stats: ScanStats::default(),
            caches: Default::default(),
            leaf_tables: ctx.program.leaves.iter().map(LeafCache::new).collect(),
            flag_pool: Vec::new(),
            keys: Vec::new(),
            local: Vec::new(),
            slot_of: Vec::new(),
            dense: Vec::new(),
            touched: Vec::new(),
            others: OtherAddrs::default(),
            pending: Vec::new(),
            slots: Vec::new(),
            first: Vec::new(),
            rows: Vec::new(),
            created: Vec::new(),
            reader: ColumnReader::new(ctx.query.direct_decoding),
            rgs: Vec::new(),
        }
    }

    fn block(&mut self, b: &BlockRef) -> Result<(), Error> {
        let mut rgs = std::mem::take(&mut self.rgs);
        let r = self.block_with(b, &mut rgs);
        self.rgs = rgs;
        r
    }

    fn block_with(&mut self, b: &BlockRef, rgs: &mut Vec<RowGroup>) -> Result<(), Error> {
        // Interface leaves are constant per block: fold them first, maybe skipping the file.
        let root = self
            .ctx
            .program
            .root
            .as_ref()
            .map(|r| fold_iface(r, &self.ctx.program.leaves, &b.iface));
        if matches!(root, Some(Node::Const(false))) {
            self.stats.blocks_pruned += 1;
            return Ok(());
        }
        let mut file = BlockFile::open(&b.path).map_err(|e| block_error(b, e))?;
        let meta = file.meta.clone();
        let version = meta
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|k| k.key == VERSION_KEY))
            .and_then(|k| k.value.as_deref())
            .and_then(|v| v.parse::<u32>().ok());
        if version.is_some_and(|v| v > STORE_VERSION) {
            return Err(block_error(
                b,
                format!(
                    "block format version {} is newer than this trawl's ({STORE_VERSION})",
                    version.unwrap_or(0)
                ),
            ));
        }
        let index_of = |name: &str| -> Result<usize, Error> {
            file.leaf(name)
                .ok_or_else(|| block_error(b, format!("column {name} missing")))
        };
        let mut leaves = [usize::MAX; Col::ALL.len()];
        for &c in &self.ctx.columns {
            leaves[c as usize] = match file.leaf(c.name()) {
                // Blocks written before the label (or the enrichment and tunnel columns) have
                // none: their rows are unlabelled, not enriched, not tunnelled.
                None if c.later() => crate::read::MISSING,
                _ => index_of(c.name())?,
            };
        }
        // Row groups the statistics cannot rule out.
        let mut selected = Vec::new();
        for (i, rg) in meta.row_groups().iter().enumerate() {
            self.stats.row_groups += 1;
            let keep = match &root {
                None => true,
                Some(r) => {
                    let leaf3 =
                        |l: usize| leaf_on_stats(&self.ctx.program.leaves[l], rg, &index_of);
                    eval3(r, &leaf3) != Some(false)
                }
            };
            if keep {
                selected.push(i);
            } else {
                self.stats.row_groups_pruned += 1;
            }
        }
        if selected.is_empty() {
            self.stats.blocks_pruned += 1;
            return Ok(());
        }
        // Late materialisation: with a condition on fewer columns than the query reads, the
        // condition's columns are decoded first, and the other columns only in the pages
        // holding a row where it can hold. The first pass tests the conjuncts on the source
        // address alone when there are such and others: blocks are written sorted by source
        // address, so those rows come in one stretch. (Only speed depends on that order:
        // every row decoded is tested against the whole condition when aggregated.)
        let first = root
            .as_ref()
            .filter(|r| !matches!(r, Node::Const(_)))
            .map(|r| match leading_conjuncts(r, &self.ctx.program.leaves) {
                Some(n) => (n, vec![Col::Sip]),
                None => (r.clone(), self.ctx.cond_columns.clone()),
            })
            .filter(|(_, cond)| !cond.is_empty() && cond.len() < self.ctx.columns.len());
        while rgs.len() < selected.len() {
            rgs.push(RowGroup::default());
        }
        let map = self.map_for(b);
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        let r = self.decode_block(
            b,
            &mut file,
            &selected,
            &leaves,
            rgs,
            first,
            root.as_ref(),
            &mut pending,
        );
        let matched = match r {
            Ok(m) => m,
            Err(e) => {
                self.pending = pending;
                return Err(e);
            }
        };
        // The block is decoded whole: its rows count now. Groups keyed by address text are
        // checked to be addresses when first met (below); a block with an entry that is not
        // is taken back out whole.
        let before = self.maps[map].len();
        let mut created = std::mem::take(&mut self.created);
        created.clear();
        let track = self.ctx.text_attr.is_some();
        self.maps[map].add_many(&pending, track.then_some(&mut created));
        self.groups += self.maps[map].len() - before;
        let bad = created
            .iter()
            .find(|&&k| k & TEXT_TAG != 0 && self.text_code(k).is_err())
            .copied();
        if let Some(k) = bad {
            let e = self.text_code(k).err().unwrap_or_default();
            self.take_back(map, &pending, &created);
            self.pending = pending;
            self.created = created;
            return Err(block_error(b, e));
        }
        self.created = created;
        self.stats.blocks_scanned += 1;
        self.stats.bytes_scanned += b.bytes;
        self.stats.rows_matched += matched;
        self.pending = pending;
        for rg in &rgs[..selected.len()] {
            self.stats.rows_scanned += rg.rows as u64;
            if rg.staged {
                self.stage(rg, map).map_err(|e| block_error(b, e))?;
            }
        }
        if self.groups > self.ctx.query.max_groups {
            return Err(Error::TooManyGroups(self.ctx.query.max_groups));
        }
        Ok(())
    }

    /// Decodes the selected row groups of a block. Those whose group keys have few local
    /// values are aggregated on the way, into `pending` (a data page of counters at a time,
    /// while the values are in the cache); the others are left decoded for staging
    /// (`RowGroup::staged`). Nothing reaches the worker's tables: a block that turns out
    /// damaged half-way contributes nothing. Returns the rows aggregated.
    #[allow(clippy::too_many_arguments)] // The block's state, passed apart so borrows stay disjoint.
    fn decode_block(
        &mut self,
        b: &BlockRef,
        file: &mut BlockFile,
        selected: &[usize],
        leaves: &[usize],
        rgs: &mut [RowGroup],
        first: Option<(Node, Vec<Col>)>,
        root: Option<&Node>,
        pending: &mut Vec<(u128, Metrics)>,
    ) -> Result<u64, Error> {
        let ctx = self.ctx;
        let err = |e: String| block_error(b, e);
        let mut matched = 0;
        for (k, &g) in selected.iter().enumerate() {
            // A block is counted whole or not at all: a cancelled one is simply left.
            if ctx.control.is_cancelled() {
                return Err(Error::Cancelled);
            }
            let rg = &mut rgs[k];
            rg.rows = usize::try_from(file.meta.row_group(g).num_rows())
                .map_err(|_| err(format!("row group {g}: negative row count")))?;
            rg.staged = false;
            if let Some(old) = rg.sel.take() {
                self.give(old);
            }
            let mut needed = None;
            let mut done: &[Col] = &[];
            if let Some((node, cond)) = &first {
                for &c in cond {
                    self.reader
                        .load(file, g, c, leaves[c as usize], None, rg)
                        .map_err(err)?;
                }
                done = cond;
                let mask = self.eval(node, rg, None).map_err(err)?;
                let picked = mask.iter().filter(|&&m| m).count();
                if picked == 0 {
                    self.give(mask);
                    continue;
                }
                if picked < rg.rows {
                    needed = Some(mask);
                } else {
                    self.give(mask);
                }
            }
            for &c in &ctx.columns {
                if c.slot().is_ok() && !done.contains(&c) {
                    self.reader
                        .load(file, g, c, leaves[c as usize], needed.as_deref(), rg)
                        .map_err(err)?;
                }
            }
            // The whole condition, tested where the first pass holds (it implies the first
            // pass's: elsewhere it is false).
            let sel = match root {
                Some(r) if !matches!(r, Node::Const(true)) => {
                    Some(self.eval(r, rg, needed.as_deref()).map_err(err)?)
                }
                _ => None,
            };
            if let Some((parts, product)) = dense_parts(ctx, rg) {
                matched += self
                    .dense_rowgroup(
                        file,
                        g,
                        leaves,
                        rg,
                        &parts,
                        product,
                        sel.as_deref(),
                        needed.as_deref(),
                        pending,
                    )
                    .map_err(err)?;
                if let Some(f) = sel {
                    self.give(f);
                }
            } else {
                for c in Col::COUNTERS {
                    self.reader
                        .load(file, g, c, leaves[c as usize], needed.as_deref(), rg)
                        .map_err(err)?;
                }
                rg.sel = sel;
                rg.staged = true;
            }
            if let Some(f) = needed {
                self.give(f);
            }
        }
        Ok(matched)
    }

    /// The packed key (code shifted into place) of a group keyed by address text.
    fn text_code(&self, k: u128) -> Result<u128, String> {
        let Some((a, c)) = self.ctx.text_attr else {
            return Err("internal error, please report: an address text key".into());
        };
        let len = (k >> 120 & 0xf) as usize;
        let bytes = k.to_le_bytes();
        let text = &bytes[..len.min(15)];
        let code = match parse_v4(text) {
            Some(ip) => V4_TAG | u64::from(ip),
            None => {
                let ip = address_text(c.name(), text)?;
                match ip {
                    IpAddr::V4(v) => V4_TAG | u64::from(u32::from(v)),
                    IpAddr::V6(_) => self
                        .ctx
                        .ips
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .v6_code(ip),
                }
            }
        };
        Ok(self.ctx.layout.put(a, code))
    }

    /// Takes a block's groups (`pending`, added to table `map`, creating `created`) back out
    /// of the table. (Only when a block turns out to hold an entry that is not an address.)
    #[cold]
    fn take_back(&mut self, map: usize, pending: &[(u128, Metrics)], created: &[u128]) {
        let mut minus: FxHashMap<u128, Metrics> = FxHashMap::default();
        for (k, m) in pending {
            minus.entry(*k).or_default().add(m);
        }
        let created: std::collections::HashSet<u128> = created.iter().copied().collect();
        let table = &mut self.maps[map];
        let (staged, before) = (table.staged_len(), table.len());
        table.flush(true);
        self.ctx.staged.fetch_sub(staged, Ordering::Relaxed);
        let mut fresh = Inner::default();
        for (k, mut m) in table.iter() {
            if created.contains(&k) {
                continue;
            }
            if let Some(d) = minus.get(&k) {
                m.fwd_packets = m.fwd_packets.wrapping_sub(d.fwd_packets);
                m.rev_packets = m.rev_packets.wrapping_sub(d.rev_packets);
                m.fwd_bytes = m.fwd_bytes.wrapping_sub(d.fwd_bytes);
                m.rev_bytes = m.rev_bytes.wrapping_sub(d.rev_bytes);
                m.flows = m.flows.wrapping_sub(d.flows);
            }
            fresh.add(k, &m);
        }
        self.groups = (self.groups + fresh.len()).saturating_sub(before);
        *table = fresh;
    }

    fn map_for(&mut self, b: &BlockRef) -> usize {
        let attrs = &self.ctx.query.attributes;
        let iface = attrs.contains(&Attribute::Iface).then(|| {
            self.ctx
                .ifaces
                .iter()
                .position(|i| *i == b.iface)
                .unwrap_or(0) as u32
        });
        let time = attrs
            .contains(&Attribute::Time)
            .then(|| b.start_ns - b.start_ns % self.ctx.resolution);
        let n = self.maps.len();
        let i = *self.outer.entry(context(iface, None, time)).or_insert(n);
        if i == n {
            self.maps.push(Inner::default());
        }
        i
    }

    /// Makes the cache of dictionary column `c` describe the row group's dictionary: codes of
    /// ports, VLANs and protocols at once, addresses left `UNSET` to be resolved when met.
    fn refresh(&mut self, c: Col, rg: &RowGroup) -> Result<(), String> {
        let i = c as usize;
        let cache = &mut self.caches[i];
        if cache.gen == rg.gens[i] {
            return Ok(());
        }
        let d = &rg.dicts[i];
        let n = d.dict_len();
        cache.codes.clear();
        cache.ips.clear();
        let text = |e: usize| String::from_utf8_lossy(d.bytes(e));
        match c {
            Col::Sip | Col::Dip | Col::TunnelSrc | Col::TunnelDst => {
                cache.codes.resize(n, UNSET);
                cache.ips.resize(n, IpAddr::V4(0.into()));
            }
            Col::SrcCountry | Col::DstCountry => {
                for e in 0..n {
                    let code = country_code(d.bytes(e)).ok_or_else(|| {
                        format!("column {}: not a country code: {:?}", c.name(), text(e))
                    })?;
                    cache.codes.push(code);
                }
            }
            Col::TunnelType => {
                for e in 0..n {
                    let code = tunnel_type_code(d.bytes(e)).ok_or_else(|| {
                        format!("column {}: unknown tunnel type {:?}", c.name(), text(e))
                    })?;
                    cache.codes.push(code);
                }
            }
            // Any 32-bit number (stored as INT32 bits).
            Col::SrcAs | Col::DstAs => cache
                .codes
                .extend(d.ints().iter().map(|&v| u64::from(v as u32))),
            Col::Vlan => {
                // 12 bits in a packed key: a VLAN id is no more.
                if let Some(v) = d.ints().iter().find(|&&v| v > 4095) {
                    return Err(format!("column {}: {v} is not a VLAN id", c.name()));
                }
                cache.codes.extend(d.ints().iter().map(|&v| v as u64));
            }
            Col::App => {
                // 0: no label (the empty value).
                for e in 0..n {
                    let s = String::from_utf8_lossy(d.bytes(e));
                    let code = match &*s {
                        "" => 0,
                        name => trawl_flow::App::from_name(name).ok_or_else(|| {
                            format!("column {}: unknown application {s:?}", c.name())
                        })? as u64,
                    };
                    cache.codes.push(code);
                }
            }
            Col::Proto => {
                for e in 0..n {
                    let s = String::from_utf8_lossy(d.bytes(e));
                    let p = proto_number(&s)
                        .ok_or_else(|| format!("column {}: unknown protocol {s:?}", c.name()))?;
                    cache.codes.push(u64::from(p));
                }
            }
            // Checked to be 16-bit when read.
            _ => cache
                .codes
                .extend(d.ints().iter().map(|&v| u64::from(v as u16))),
        }
        cache.gen = rg.gens[i];
        Ok(())
    }

    /// Stages a decoded row group's selected rows (see `agg`): their keys are packed, and
    /// they are appended to the partitions of their keys.
    fn stage(&mut self, rg: &RowGroup, map: usize) -> Result<(), String> {
        let ctx = self.ctx;
        // With a condition, the selected rows are listed first and only their keys packed.
        let mut rows = std::mem::take(&mut self.rows);
        rows.clear();
        if let Some(s) = &rg.sel {
            rows.extend(
                s.iter()
                    .enumerate()
                    .filter(|&(_, &x)| x)
                    .map(|(i, _)| i as u32),
            );
        }
        let all = rg.sel.is_none();
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        keys.resize(if all { rg.rows } else { rows.len() }, 0);
        for &a in &ctx.query.attributes {
            let Some(c) = dict_col(a) else { continue };
            self.refresh(c, rg)?;
            let sh = ctx.layout.shift(a);
            let d = &rg.dicts[c as usize];
            let dk = d.keys.as_slice();
            let cache = &mut self.caches[c as usize];
            let mut put = |k: &mut u128, e: usize| -> Result<(), String> {
                let mut code = cache.codes[e];
                if code == UNSET {
                    code = resolve_ip(cache, d, &ctx.ips, &mut self.others, c, e)?;
                }
                *k |= u128::from(code) << sh;
                Ok(())
            };
            if all {
                for (k, &e) in keys.iter_mut().zip(dk) {
                    put(k, e as usize)?;
                }
            } else {
                for (k, &i) in keys.iter_mut().zip(&rows) {
                    put(k, dk[i as usize] as usize)?;
                }
            }
        }
        let [fp, rp, fb, rb] = &rg.counters;
        let counters = [fp.as_slice(), rp.as_slice(), fb.as_slice(), rb.as_slice()];
        // Staged, not added: the rows are aggregated a partition at a time when the workers'
        // tables are merged (see `agg`), or here once too many are staged.
        let table = &mut self.maps[map];
        let matched = if all {
            table.stage_rows(&keys, None, counters)
        } else {
            table.stage_rows_at(&keys, &rows, counters)
        };
        self.stats.rows_matched += matched;
        self.keys = keys;
        self.rows = rows;
        let staged = ctx.staged.fetch_add(matched as usize, Ordering::Relaxed);
        if staged + matched as usize > ctx.stage_limit {
            self.flush_staged();
        }
        Ok(())
    }

    /// Aggregates this worker's staged rows into its tables (keeping the buffers for more),
    /// and counts the groups.
    fn flush_staged(&mut self) {
        let mut flushed = 0;
        for m in &mut self.maps {
            flushed += m.staged_len();
            let before = m.len();
            m.flush(true);
            self.groups += m.len() - before;
        }
        self.ctx.staged.fetch_sub(flushed, Ordering::Relaxed);
    }

    /// Aggregates a row group whose group keys have few local values (`parts`, their
    /// product: see [`dense_parts`]) into a dense array indexed by the local values — no
    /// hashing per row — reading the counters a data page at a time, and appends each group
    /// met, once, to `pending`. Returns the rows aggregated.
    #[allow(clippy::too_many_arguments)] // The row group's state, passed apart so borrows stay disjoint.
    fn dense_rowgroup(
        &mut self,
        file: &mut BlockFile,
        g: usize,
        leaves: &[usize],
        rg: &RowGroup,
        parts: &[Part],
        product: u64,
        sel: Option<&[bool]>,
        needed: Option<&[bool]>,
        pending: &mut Vec<(u128, Metrics)>,
    ) -> Result<u64, String> {
        let ctx = self.ctx;
        // Grouping by one address alone, its groups are keyed by the address text: no
        // dictionary entry is parsed here (a group's text is, once, when it is created).
        let text = ctx.text_attr.is_some();
        for &(_, c, _) in parts {
            if !text {
                self.refresh(c, rg)?;
            }
        }
        let n = rg.rows;
        let mut idx = std::mem::take(&mut self.local);
        idx.clear();
        let li: &[u32] = match parts {
            // One attribute: the local key is the dictionary index itself.
            [(_, c, _)] => rg.dicts[*c as usize].keys.as_slice(),
            _ => {
                idx.resize(n, 0);
                let mut stride = 1u32;
                for (_, c, card) in parts {
                    let keys = rg.dicts[*c as usize].keys.as_slice();
                    for (x, &d) in idx.iter_mut().zip(keys) {
                        *x += d * stride;
                    }
                    stride = stride.saturating_mul(*card as u32);
                }
                &idx
            }
        };
        self.touched.clear();
        let direct = product <= DIRECT_LIMIT;
        let mut slots = std::mem::take(&mut self.slots);
        if direct {
            // Few local keys (top sources: a block's few thousand addresses): the sums are
            // indexed by the local key itself. (`dense` is all zeros between row groups.)
            if self.dense.len() < product as usize {
                self.dense.resize(product as usize, Metrics::default());
            }
        } else {
            // Each row's slot in `dense`, a slot per local key met: `slot_of[local key]`
            // (4 bytes per possible key keep this index cache-resident, 1 MB at most) and the
            // sums of the groups actually met stay packed together.
            if self.slot_of.len() < product as usize {
                self.slot_of.resize(product as usize, NO_SLOT);
            }
            slots.clear();
            slots.resize(n, 0);
            self.first.clear();
            assign_slots(li, sel, &mut self.slot_of, &mut slots, &mut self.first);
            self.touched.clear();
            self.touched
                .extend(self.first.iter().map(|&i| li[i as usize]));
            if self.dense.len() < self.touched.len() {
                self.dense.resize(self.touched.len(), Metrics::default());
            }
        }
        let targets: &[u32] = if direct { li } else { &slots };
        // The counters a page at a time: rows cur..end of all four are in the cache.
        let mut pages = Vec::with_capacity(4);
        let mut result = Ok(0u64);
        for c in Col::COUNTERS {
            match self
                .reader
                .open_counter(file, g, c, leaves[c as usize], needed)
            {
                Ok(p) => pages.push(p),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        let mut cur = 0usize;
        let mut matched = 0u64;
        while result.is_ok() && cur < n {
            for p in pages.iter_mut() {
                while p.end <= cur {
                    match self.reader.next_counter_page(p, needed) {
                        Ok(true) => {}
                        Ok(false) => {
                            result = Err(format!("row group {g}: a counter column ends early"));
                            break;
                        }
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    }
                }
                if result.is_err() {
                    break;
                }
            }
            if result.is_err() {
                break;
            }
            let end = pages.iter().map(|p| p.end).min().unwrap_or(n).min(n);
            let slice = |j: usize| {
                let p: &CounterPages = &pages[j];
                &self.reader.page_values(j)[cur - p.start..end - p.start]
            };
            matched += sum_direct(
                &mut self.dense,
                &targets[cur..end],
                [slice(0), slice(1), slice(2), slice(3)],
                sel.map(|s| &s[cur..end]),
            );
            cur = end;
        }
        self.slots = slots;
        if let Err(e) = result {
            self.local = idx;
            self.touched.clear();
            self.slot_of.iter_mut().for_each(|s| *s = NO_SLOT);
            self.dense.iter_mut().for_each(|m| *m = Metrics::default());
            return Err(e);
        }
        // The groups met, each once; `dense` and `slot_of` left as found (zeros, `NO_SLOT`).
        let count = if direct {
            product as usize
        } else {
            self.touched.len()
        };
        for t in 0..count {
            let m = std::mem::take(&mut self.dense[t]);
            let j = if direct {
                if m.flows == 0 {
                    continue;
                }
                t
            } else {
                let j = self.touched[t] as usize;
                self.slot_of[j] = NO_SLOT;
                j
            };
            if let [(_, c, _)] = parts {
                if text {
                    let local = if direct {
                        j
                    } else {
                        rg.dicts[*c as usize].keys.as_slice()[self.first[t] as usize] as usize
                    };
                    if let Some(k) = text_key(rg.dicts[*c as usize].bytes(local)) {
                        pending.push((k, m));
                        continue;
                    }
                    self.refresh(*c, rg)?;
                }
            }
            let mut rem = j as u64;
            let mut key = 0u128;
            for (a, c, card) in parts {
                // Each attribute's dictionary index: from the row the slot was first met in,
                // or for the direct path from the local key (a division only with several).
                let local = if !direct {
                    rg.dicts[*c as usize].keys.as_slice()[self.first[t] as usize] as usize
                } else if parts.len() == 1 {
                    j
                } else {
                    let l = (rem % card) as usize;
                    rem /= card;
                    l
                };
                let cache = &mut self.caches[*c as usize];
                let code = match cache.codes[local] {
                    UNSET => resolve_ip(
                        cache,
                        &rg.dicts[*c as usize],
                        &ctx.ips,
                        &mut self.others,
                        *c,
                        local,
                    )?,
                    code => code,
                };
                key |= u128::from(code) << ctx.layout.shift(*a);
            }
            pending.push((key, m));
        }
        self.touched.clear();
        self.local = idx;
        Ok(matched)
    }

    /// A buffer of `n` flags from the pool, all `v`.
    fn flags(&mut self, n: usize, v: bool) -> Vec<bool> {
        let mut f = self.flag_pool.pop().unwrap_or_default();
        f.clear();
        f.resize(n, v);
        f
    }

    /// Returns a buffer to the pool (they are reused: fresh memory costs more than filling).
    fn give(&mut self, f: Vec<bool>) {
        self.flag_pool.push(f);
    }

    /// The condition `node` per row, evaluated only where `within` holds (false elsewhere).
    fn eval(
        &mut self,
        node: &Node,
        rg: &RowGroup,
        within: Option<&[bool]>,
    ) -> Result<Vec<bool>, String> {
        let n = rg.rows;
        Ok(match node {
            Node::Const(b) => match within {
                Some(w) if *b => {
                    let mut v = self.flags(0, false);
                    v.extend_from_slice(w);
                    v
                }
                _ => self.flags(n, *b),
            },
            Node::Not(a) => {
                let mut v = self.eval(a, rg, within)?;
                match within {
                    Some(w) => v.iter_mut().zip(w).for_each(|(x, &y)| *x = y && !*x),
                    None => v.iter_mut().for_each(|x| *x = !*x),
                }
                v
            }
            Node::And(a, b) => {
                let l = self.eval(a, rg, within)?;
                if l.iter().any(|&x| x) {
                    // Only where the left side holds.
                    let r = self.eval(b, rg, Some(&l))?;
                    self.give(l);
                    r
                } else {
                    l
                }
            }
            Node::Or(a, b) => {
                let mut l = self.eval(a, rg, within)?;
                // Only where the left side does not hold (and `within` does).
                let mut rest = self.flags(0, false);
                match within {
                    Some(w) => rest.extend(l.iter().zip(w).map(|(&x, &y)| y && !x)),
                    None => rest.extend(l.iter().map(|&x| !x)),
                }
                if rest.iter().any(|&x| x) {
                    let r = self.eval(b, rg, Some(&rest))?;
                    l.iter_mut().zip(&r).for_each(|(x, &y)| *x |= y);
                    self.give(r);
                }
                self.give(rest);
                l
            }
            Node::Leaf(i) => self.leaf(*i, rg, within)?,
        })
    }

    /// A leaf's value per row (where `within` holds; false elsewhere): the predicate
    /// evaluated once per dictionary entry (addresses as rows meet them), then looked up by
    /// each row's index.
    fn leaf(
        &mut self,
        i: usize,
        rg: &RowGroup,
        within: Option<&[bool]>,
    ) -> Result<Vec<bool>, String> {
        let ctx = self.ctx;
        let leaf = &ctx.program.leaves[i];
        let c = match leaf {
            Leaf::Ip(c, _) => ip_col(*c),
            Leaf::Num(c, ..) => num_col(*c),
            Leaf::Proto(_) => Col::Proto,
            Leaf::Text(name, _) => {
                Col::of(name).ok_or_else(|| format!("internal error: column {name}"))?
            }
            // Folded per block before the scan.
            Leaf::Iface(_) => return Ok(self.flags(rg.rows, false)),
        };
        self.refresh(c, rg)?;
        let mut out = self.flags(0, false);
        let s = c as usize;
        let d = &rg.dicts[s];
        let cache = &mut self.caches[s];
        let lc = &mut self.leaf_tables[i];
        if lc.gen != rg.gens[s] {
            lc.table.clear();
            match leaf {
                Leaf::Num(_, lo, hi) => lc.table.extend(
                    cache
                        .codes
                        .iter()
                        .map(|&v| u8::from((u64::from(*lo)..=u64::from(*hi)).contains(&v))),
                ),
                Leaf::Proto(p) => lc
                    .table
                    .extend(cache.codes.iter().map(|&v| u8::from(v == u64::from(*p)))),
                Leaf::Text(_, want) => lc
                    .table
                    .extend((0..d.dict_len()).map(|e| u8::from(d.bytes(e) == &**want))),
                _ => lc.table.resize(d.dict_len(), 2),
            }
            lc.gen = rg.gens[s];
        }
        let keys = d.keys.as_slice();
        match leaf {
            Leaf::Ip(_, pred) => {
                for (r, &e) in keys.iter().enumerate() {
                    if within.is_some_and(|w| !w[r]) {
                        out.push(false);
                        continue;
                    }
                    let e = e as usize;
                    let mut t = lc.table[e];
                    if t == 2 {
                        t = match &lc.text {
                            // Canonical text outside the prefix: no need to parse it.
                            Some(p) if !d.bytes(e).starts_with(p) => 0,
                            _ => {
                                if cache.codes[e] == UNSET {
                                    resolve_ip(cache, d, &ctx.ips, &mut self.others, c, e)?;
                                }
                                // No tunnel: no address, which no address predicate holds for.
                                u8::from(cache.codes[e] != NO_ADDR && pred.eval(&cache.ips[e]))
                            }
                        };
                        lc.table[e] = t;
                    }
                    out.push(t == 1);
                }
            }
            _ => match within {
                None => out.extend(keys.iter().map(|&e| lc.table[e as usize] == 1)),
                Some(w) => out.extend(
                    keys.iter()
                        .zip(w)
                        .map(|(&e, &y)| y && lc.table[e as usize] == 1),
                ),
            },
        }
        Ok(out)
    }

    fn into_partial(mut self) -> PartialAggregate {
        // Groups keyed by address text get their address codes (every text was checked to be
        // an address when its group was created), merging texts of one address.
        if self.ctx.text_attr.is_some() {
            for i in 0..self.maps.len() {
                let mut table = std::mem::take(&mut self.maps[i]);
                let staged = table.staged_len();
                table.flush(true);
                self.ctx.staged.fetch_sub(staged, Ordering::Relaxed);
                let mut coded = Inner::default();
                for (k, m) in table.iter() {
                    let k = if k & TEXT_TAG != 0 {
                        self.text_code(k).unwrap_or(k & !TEXT_TAG)
                    } else {
                        k
                    };
                    coded.add(k, &m);
                }
                self.maps[i] = coded;
            }
        }
        let mut p =
            PartialAggregate::new(self.ctx.query.attributes.clone(), self.ctx.query.max_groups);
        let mut maps: Vec<Option<Inner>> = self.maps.into_iter().map(Some).collect();
        for (c, i) in self.outer {
            if let Some(m) = maps[i].take() {
                p.maps.insert(c, m);
            }
        }
        p.stats = self.stats;
        p.stats.column_chunks_general = self.reader.general_chunks;
        p
    }
}

/// Tag of a group key holding an address's text rather than its code (bit 127: codes end
/// at bit 122).
const TEXT_TAG: u128 = 1 << 127;

/// The group key of an address given as text, for a query grouping by that address alone:
/// the text itself (up to 15 bytes, little-endian), its length in bits 120–123, and
/// [`TEXT_TAG`]. Parsing each block's dictionary of a few thousand addresses was a sixth of a
/// top-sources query; a text is now parsed once per worker, when its group is created, and
/// texts become codes when the worker's table is handed over (`Worker::into_partial`).
/// `None` for longer texts (most IPv6 addresses), which are keyed by code as usual.
#[inline]
fn text_key(text: &[u8]) -> Option<u128> {
    if text.is_empty() || text.len() > 15 {
        return None;
    }
    let mut w = [0u8; 16];
    w[..text.len()].copy_from_slice(text);
    Some(TEXT_TAG | (text.len() as u128) << 120 | u128::from_le_bytes(w))
}

/// A grouped-by dictionary attribute, its column and its number of local values.
type Part = (Attribute, Col, u64);

/// The grouped-by dictionary attributes of a row group with the number of local values of
/// each, when their product — the local key space — is at most [`DENSE_LIMIT`].
fn dense_parts(ctx: &Ctx<'_>, rg: &RowGroup) -> Option<(Vec<Part>, u64)> {
    let mut parts = Vec::new();
    let mut product = 1u64;
    for &a in &ctx.query.attributes {
        let Some(c) = dict_col(a) else { continue };
        let card = (rg.dicts[c as usize].dict_len() as u64).max(1);
        product = product.saturating_mul(card);
        if product > DENSE_LIMIT {
            return None;
        }
        parts.push((a, c, card));
    }
    Some((parts, product))
}

/// Gives each selected row the slot of its local key `li[i]` in `slots`: `slot_of[key]`, or
/// the next free one when the key is first met (its row is appended to `first`, so slot `s`
/// was first met in row `first[s]`). (A function of its own so that its slices stay in
/// registers.)
#[inline(never)]
fn assign_slots(
    li: &[u32],
    sel: Option<&[bool]>,
    slot_of: &mut [u32],
    slots: &mut [u32],
    first: &mut Vec<u32>,
) {
    for (i, (t, &j)) in slots.iter_mut().zip(li).enumerate() {
        if sel.is_some_and(|s| !s[i]) {
            continue;
        }
        let s = &mut slot_of[j as usize];
        if *s == NO_SLOT {
            *s = first.len() as u32;
            first.push(i as u32);
        }
        *t = *s;
    }
}

/// Sums each row's counters (and one flow) into `d[keys[i]]`, the selected rows only with
/// `sel`; returns the rows summed. (Sums wrap at 2^64, as everywhere in the engine: only a
/// damaged block's counters get there.) (A function of its own: inlined into the scan loop its
/// slices were spilled to the stack and reloaded on every row. The row update is written out in
/// both loops for the same reason: shared through a closure calling `Metrics::add`, a query by
/// protocol took 20 % more CPU.)
#[inline(never)]
fn sum_direct(d: &mut [Metrics], keys: &[u32], counters: [&[u64]; 4], sel: Option<&[bool]>) -> u64 {
    let (keys, [fp, rp, fb, rb]) = crate::agg::common_len(keys, counters);
    let n = keys.len();
    match sel {
        None => {
            for i in 0..n {
                let m = &mut d[keys[i] as usize];
                m.fwd_packets = m.fwd_packets.wrapping_add(fp[i]);
                m.rev_packets = m.rev_packets.wrapping_add(rp[i]);
                m.fwd_bytes = m.fwd_bytes.wrapping_add(fb[i]);
                m.rev_bytes = m.rev_bytes.wrapping_add(rb[i]);
                m.flows += 1;
            }
            n as u64
        }
        Some(s) => {
            let s = &s[..n.min(s.len())];
            let mut k = 0;
            for (i, &x) in s.iter().enumerate() {
                if x {
                    let m = &mut d[keys[i] as usize];
                    m.fwd_packets = m.fwd_packets.wrapping_add(fp[i]);
                    m.rev_packets = m.rev_packets.wrapping_add(rp[i]);
                    m.fwd_bytes = m.fwd_bytes.wrapping_add(fb[i]);
                    m.rev_bytes = m.rev_bytes.wrapping_add(rb[i]);
                    m.flows += 1;
                    k += 1;
                }
            }
            k
        }
    }
}

/// The conjunction of the top-level conjuncts of `root` that test only the source address,
/// when there are some and they are not all of it.
fn leading_conjuncts(root: &Node, leaves: &[Leaf]) -> Option<Node> {
    fn flatten<'n>(n: &'n Node, out: &mut Vec<&'n Node>) {
        match n {
            Node::And(a, b) => {
                flatten(a, out);
                flatten(b, out);
            }
            _ => out.push(n),
        }
    }
    fn on_source(n: &Node, leaves: &[Leaf]) -> bool {
        match n {
            Node::Leaf(i) => matches!(leaves.get(*i), Some(Leaf::Ip(IpCol::Src, _))),
            Node::Not(a) => on_source(a, leaves),
            Node::And(a, b) | Node::Or(a, b) => on_source(a, leaves) && on_source(b, leaves),
            Node::Const(_) => false,
        }
    }
    let mut all = Vec::new();
    flatten(root, &mut all);
    let src: Vec<&Node> = all
        .iter()
        .copied()
        .filter(|n| on_source(n, leaves))
        .collect();
    if src.is_empty() || src.len() == all.len() {
        return None;
    }
    src.into_iter()
        .cloned()
        .reduce(|a, b| Node::And(Box::new(a), Box::new(b)))
}

/// Replaces interface leaves by their value for a block of interface `iface`, and simplifies.
fn fold_iface(node: &Node, leaves: &[Leaf], iface: &str) -> Node {
    match node {
        Node::Leaf(i) => match &leaves[*i] {
            Leaf::Iface(name) => Node::Const(name == iface),
            _ => node.clone(),
        },
        Node::Const(_) => node.clone(),
        Node::Not(a) => match fold_iface(a, leaves, iface) {
            Node::Const(b) => Node::Const(!b),
            x => Node::Not(Box::new(x)),
        },
        Node::And(a, b) => match (fold_iface(a, leaves, iface), fold_iface(b, leaves, iface)) {
            (Node::Const(false), _) | (_, Node::Const(false)) => Node::Const(false),
            (Node::Const(true), x) | (x, Node::Const(true)) => x,
            (x, y) => Node::And(Box::new(x), Box::new(y)),
        },
        Node::Or(a, b) => match (fold_iface(a, leaves, iface), fold_iface(b, leaves, iface)) {
            (Node::Const(true), _) | (_, Node::Const(true)) => Node::Const(true),
            (Node::Const(false), x) | (x, Node::Const(false)) => x,
            (x, y) => Node::Or(Box::new(x), Box::new(y)),
        },
    }
}

/// What a row group's min/max statistics say about a leaf: `Some(false)` when no row can
/// match, `Some(true)` when every row does, `None` when they do not tell.
fn leaf_on_stats(
    leaf: &Leaf,
    rg: &RowGroupMetaData,
    index_of: &dyn Fn(&str) -> Result<usize, Error>,
) -> Option<bool> {
    let stats = |name: &str| index_of(name).ok().and_then(|i| rg.column(i).statistics());
    match leaf {
        // AS numbers are unsigned 32-bit: their statistics are not compared as `i32`.
        Leaf::Num(NumCol::SrcAs | NumCol::DstAs, ..) => None,
        Leaf::Num(c, lo, hi) => {
            let Some(Statistics::Int32(s)) = stats(c.column()) else {
                return None;
            };
            let (min, max) = (*s.min_opt()?, *s.max_opt()?);
            let (lo, hi) = (*lo as i32, *hi as i32);
            if hi < min || lo > max {
                Some(false)
            } else if lo <= min && max <= hi {
                Some(true)
            } else {
                None
            }
        }
        Leaf::Text(name, want) => {
            let Some(Statistics::ByteArray(s)) = stats(name) else {
                return None;
            };
            let (min, max) = (s.min_opt()?.data(), s.max_opt()?.data());
            (&**want < min || &**want > max).then_some(false)
        }
        Leaf::Ip(c, pred) => {
            let Some(Statistics::ByteArray(s)) = stats(c.column()) else {
                return None;
            };
            let (min, max) = (s.min_opt()?.data(), s.max_opt()?.data());
            // Text ranges that hold every match: an exact address, or an IPv4 prefix on an
            // octet boundary ("10.1." .. "10.1/", '/' following '.' in ASCII).
            let (lo, hi): (Vec<u8>, Vec<u8>) = match pred {
                IpPred::Cmp(crate::syntax::Op::Eq, a) => {
                    let t = a.to_string().into_bytes();
                    (t.clone(), t)
                }
                IpPred::In(n) if n.addr.is_ipv4() && n.prefix % 8 == 0 && n.prefix > 0 => {
                    let t = n.addr.to_string();
                    let octets: Vec<&str> = t.split('.').take(usize::from(n.prefix / 8)).collect();
                    if n.prefix == 32 {
                        (t.clone().into_bytes(), t.into_bytes())
                    } else {
                        let p = format!("{}.", octets.join("."));
                        let mut end = p.clone().into_bytes();
                        *end.last_mut()? = b'/';
                        (p.into_bytes(), end)
                    }
                }
                _ => return None,
            };
            // Every matching text t satisfies lo <= t <= hi (or < hi for a prefix range).
            (max < lo.as_slice() || min > hi.as_slice()).then_some(false)
        }
        Leaf::Proto(_) | Leaf::Iface(_) => None,
    }
}

/// The address a stored text column holds (any form `IpAddr` parses); the error names the
/// column and shows the text.
fn address_text(column: &str, text: &[u8]) -> Result<IpAddr, String> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse::<IpAddr>().ok())
        .ok_or_else(|| {
            format!(
                "column {column}: not an address: {:?}",
                String::from_utf8_lossy(text)
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_like_std() {
        for t in [
            "10.0.0.1",
            "255.255.255.255",
            "0.0.0.0",
            "1.2.3.4",
            "::1",
            "2001:db8::5",
            "::ffff:1.2.3.4",
        ] {
            let want = match t.parse::<IpAddr>() {
                Ok(IpAddr::V4(a)) => Some(u32::from(a)),
                _ => None,
            };
            assert_eq!(parse_v4(t.as_bytes()), want, "{t}");
        }
        for t in [
            "256.0.0.1",
            "1.2.3",
            "1.2.3.4.5",
            "1..2.3",
            "01234.1.1.1",
            "",
            "x",
            "1.2.3.4.",
            // Leading zeros: `std` refuses them (they could mean octal).
            "01.2.3.4",
            "1.2.3.04",
            "1.2.00.4",
        ] {
            assert!(t.parse::<IpAddr>().is_err(), "{t}");
            assert_eq!(parse_v4(t.as_bytes()), None, "{t}");
        }
    }

    /// Rows staged past the limit are aggregated by the worker during the scan (and its
    /// tables then hold groups and staged rows at once); the result is the same.
    #[test]
    fn staging_past_the_limit_changes_nothing() {
        use trawl_store::{Ingest, StoreConfig, StoredFlow, BLOCK_NS};
        let dir = std::env::temp_dir().join(format!("trawl-query-stage-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut ing = Ingest::open(&dir, StoreConfig::default()).unwrap();
        let eth0 = ing.iface("eth0").unwrap();
        let t0 = 1_763_251_200 * 1_000_000_000u64;
        for i in 0..20_000u64 {
            ing.push_row(
                eth0,
                StoredFlow {
                    src_ip: IpAddr::from([10, 0, (i % 7) as u8, 1]),
                    dst_ip: IpAddr::from([192, 0, 2, (i % 11) as u8]),
                    src_port: 30_000 + (i % 300) as u16,
                    dst_port: [443, 80, 53, 8080][(i % 4) as usize],
                    proto: 6,
                    vlan: 0,
                    first_ns: t0 + (i % 5) * BLOCK_NS + i,
                    last_ns: t0 + (i % 5) * BLOCK_NS + i + 1,
                    fwd_packets: 1 + i % 13,
                    rev_packets: i % 7,
                    fwd_bytes: 60 + i,
                    rev_bytes: 40 * (i % 7),
                    fwd_ip_bytes: 0,
                    rev_ip_bytes: 0,
                    fwd_tcp_flags: 0,
                    rev_tcp_flags: 0,
                    end_reason: trawl_flow::EndReason::Idle,
                    app: None,
                    extra: Default::default(),
                },
            )
            .unwrap();
        }
        ing.finish().unwrap();
        let run = |max_groups: usize| {
            let q = Query {
                // Two ports: 2^32 local values, so the rows are staged, not summed densely.
                attributes: crate::parse_attributes("sport,dport").unwrap(),
                workers: 2,
                max_groups,
                ..Query::default()
            };
            let mut g = scan(&dir, &q).unwrap().groups();
            g.sort_by(|a, b| a.0.cmp(&b.0));
            g
        };
        // 300 groups; a limit of 400 staged rows is crossed many times over 20,000 rows.
        let tight = run(400);
        let loose = run(10_000_000);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(tight.len(), 300);
        assert_eq!(tight, loose);
        assert_eq!(tight.iter().map(|(_, m)| m.flows).sum::<u64>(), 20_000);
    }

    #[test]
    fn source_conjuncts_lead() {
        let lead = |c: &str| {
            let e = crate::syntax::parse(c).unwrap();
            let p = Program::compile(Some(&e));
            leading_conjuncts(p.root.as_ref().unwrap(), &p.leaves).map(|n| format!("{n:?}"))
        };
        assert_eq!(
            lead("sip = 10.1.0.0/16 and dport = 443").as_deref(),
            Some("Leaf(0)")
        );
        assert_eq!(
            lead("dport = 443 and (sip = 10.0.0.0/8 or not sip = 10.1.0.0/16) and proto = tcp")
                .as_deref(),
            Some("Or(Leaf(1), Not(Leaf(2)))")
        );
        // Nothing to lead with, or nothing else.
        assert_eq!(lead("sip = 10.1.0.0/16 or dport = 443"), None);
        assert_eq!(lead("dip = 10.1.0.0/16 and dport = 443"), None);
        assert_eq!(lead("sip = 10.1.0.0/16 and sip != 10.1.2.3"), None);
    }

    #[test]
    fn iface_leaves_fold() {
        let e = crate::syntax::parse("iface = eth0 and dport = 53 or iface = eth1").unwrap();
        let p = Program::compile(Some(&e));
        let r = p.root.as_ref().unwrap();
        assert_eq!(fold_iface(r, &p.leaves, "eth1"), Node::Const(true));
        assert!(matches!(fold_iface(r, &p.leaves, "eth0"), Node::Leaf(_)));
        assert_eq!(fold_iface(r, &p.leaves, "eth2"), Node::Const(false));
    }
}
