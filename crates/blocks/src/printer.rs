//! `packet_printer`: one line of text per packet (time, interface, direction, lengths), as
//! `trawl listen` without `-w` prints them.
use std::io::Write;

use serde::Deserialize;
use trawl_capture::Direction;
use trawl_compose::{Block, BuildEnv, Ctx, GateDef, Msg, PathSetting, TimerId};
use trawl_time::Zone;

use crate::messages::{PacketBatch, PACKETS};
use crate::output::{FileMode, OutputFile};
use crate::write::REOPEN_CHECK;

/// Prints a line per packet: `2026-11-26T14:00:00.123456789Z eth0 in 60 bytes (captured 60)`.
pub struct PacketPrinter {
    out: OutputFile,
    zone: Zone,
}

/// Settings of `packet_printer`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrinterSettings {
    /// Output file; `-` (the default) is standard output.
    #[serde(default = "stdout")]
    pub path: String,
    /// `append` (default) or `truncate`, as the other writers.
    #[serde(default)]
    pub mode: FileMode,
    /// Times in the local zone (`TZ`) with its offset instead of UTC (default false).
    #[serde(default)]
    pub local: bool,
}

fn stdout() -> String {
    "-".into()
}

impl Block for PacketPrinter {
    const TYPE: &'static str = "packet_printer";
    const SUMMARY: &'static str =
        "prints a line per packet (time, interface, direction, lengths) to a file or standard output";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "packets to print",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = PrinterSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::path("path")];

    fn build(s: PrinterSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(PacketPrinter {
            out: OutputFile::open(&s.path, s.mode)?,
            zone: if s.local { Zone::Local } else { Zone::Utc },
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        ctx.every(REOPEN_CHECK);
        Ok(())
    }

    /// Lines that waited a second go out (a person watching sees packets as they come), and
    /// the file is reopened after SIGHUP.
    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        if let Err(e) = self.out.reopen_if_asked() {
            return ctx.fail(e);
        }
        self.out.flush_stale(ctx);
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<PacketBatch>() else {
            return;
        };
        let buf = self.out.buf();
        for p in b.batch().iter() {
            let dir = match p.direction {
                Direction::Inbound => "in",
                Direction::Outbound => "out",
                Direction::Unknown => "-",
            };
            let name = b
                .interfaces
                .get(usize::from(p.iface))
                .and_then(|i| i.name.as_deref())
                .unwrap_or("?");
            // Writing into a Vec cannot fail.
            let _ = writeln!(
                buf,
                "{} {name} {dir} {} bytes (captured {})",
                trawl_time::rfc3339(p.ts_ns, self.zone, true),
                p.wire_len,
                p.data.len()
            );
        }
        let written = self.out.written();
        self.out.settle(written, ctx);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        let flushed = self.out.flush();
        self.out.settle(flushed, ctx);
    }
}
