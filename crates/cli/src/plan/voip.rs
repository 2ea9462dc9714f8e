//! `trawl run --voip DIR`: the blocks of `trawl voip` in the live monitor. One `sip` and one
//! `rtp_calls` for the whole run (a call's SIP and RTP may cross interfaces and workers) on
//! the outputs thread, fed by every capture worker through a queue that drops batches
//! (counted) rather than hold capture back; `sip` passes each batch on to `rtp_calls` after
//! its SIP, so a dropped batch loses both halves of its pair and the pairing stays right.
//! Records go into one file per UTC day (`daily_writer`).
use std::path::Path;

use trawl_compose::{Document, Policy};

/// The `sip` block of `--voip`.
pub const SIP: &str = "voip_sip";
/// The `sip_anomaly` block of `--voip --db`.
pub const ANOMALY: &str = "voip_anomaly";
/// The `rtp_calls` block of `--voip` (its `active` gate feeds the API's active calls).
pub const CALLS: &str = "voip_calls";

/// Adds the VoIP chain writing into `dir`, fed by the capture blocks `sources`.
pub fn add(doc: &mut Document, dir: &Path, sources: &[&str]) {
    let dir = dir.display().to_string();
    doc.block(SIP, "sip").on("outputs", Some(0));
    doc.block(CALLS, "rtp_calls")
        .on("outputs", Some(0))
        .set("open_at_end", "shutdown");
    for (name, file) in [("voip_calls_out", "calls"), ("voip_rtp_out", "rtp")] {
        doc.block(name, "daily_writer")
            .on("outputs", Some(0))
            .set("dir", dir.as_str())
            .set("prefix", file);
    }
    for source in sources {
        doc.connect(
            &format!("{source}.packets"),
            &[&format!("{SIP}.packets")],
            Policy::Drop,
        );
    }
    doc.connect(
        &format!("{SIP}.sip"),
        &[&format!("{CALLS}.sip")],
        Policy::Wait,
    );
    doc.connect(
        &format!("{SIP}.packets"),
        &[&format!("{CALLS}.packets")],
        Policy::Wait,
    );
    doc.connect(
        &format!("{CALLS}.calls"),
        &["voip_calls_out.events"],
        Policy::Wait,
    );
    doc.connect(
        &format!("{CALLS}.streams"),
        &["voip_rtp_out.events"],
        Policy::Wait,
    );
}

/// The calls in progress to the `http_api` block `api` (`/api/v1/calls?active=1`).
pub fn serve_active(doc: &mut Document, api: &str) {
    doc.connect(
        &format!("{CALLS}.active"),
        &[&format!("{api}.calls")],
        Policy::Wait,
    );
}

/// The VoIP anomaly detector (`sip_anomaly`) on the SIP of `--voip`, its alarms into
/// `alarms` (an `alarm_store`'s input: `trawl run --db --voip`).
pub fn anomalies(doc: &mut Document, alarms: &str) {
    doc.block(ANOMALY, "sip_anomaly").on("outputs", Some(0));
    doc.connect(
        &format!("{SIP}.sip"),
        &[&format!("{ANOMALY}.sip")],
        Policy::Wait,
    );
    doc.connect(&format!("{ANOMALY}.alarms"), &[alarms], Policy::Wait);
}
